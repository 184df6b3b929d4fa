"""Lookup drills: short SFT rows that practise the one step every rule answer reads, alone.

A rule answer (the treatment's parents, its children, the parents of a node set) is an edge lookup in the
graph. SmolLM2-135M does not learn that lookup from full traces: in the scan arm its yes/no marks were right
no more often than writing "no" everywhere. A drill is the lookup with nothing around it::

    system:    Task: lookup. Scan the GRAPH line edge by edge, then list the edges asked for.
    user:      GRAPH: K -> L, L -> I, N -> L
               List the edges into L.
    assistant: Scan for edges into L: K -> L yes, L -> I no, N -> L yes. Edges into L: K -> L, N -> L.

The assistant turn is exactly what a ``scan`` rationale writes (:func:`calver.data_gen.rationales.lookup_line`),
so the skill is the one the traces need; a ``rule``-style drill (``DrillConfig.lookup``) answers with the last
sentence alone, the line a ``rule`` rationale writes. A *transcription* drill (kind ``transcribe``) practises the step
before it, the GRAPH line itself: the graph in one of the prompt encodings (a matrix, a parents map, prose,
CLEAR's sentence), and as its answer the GRAPH line a trace writes for it, edges in the order the text gives
them (:func:`calver.verifier.parsers.reading_order`). Each drill is drawn from its own seed (``{seed}-{i}``),
so a row does not depend on how many were asked for; graphs, names and edge orders vary as in the training mix.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

from calver.data_gen.graphs import label, random_skeleton
from calver.data_gen.names import NAMINGS, node_names
from calver.data_gen.prompts import VERBATIM_ENCODINGS, problem_text
from calver.data_gen.rationales import (
    LOOKUP_RE,
    Counts,
    LookupCheck,
    check_lookups,
    listed_edges,
    lookup_line,
    node_edges,
)
from calver.verifier.contract import format_path, split_slots
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphError
from calver.verifier.parsers import RENDER_FORMATS, parse_graph, reading_order, render_graph

DRILL_TASK = "lookup_drill"
TRANSCRIBE_TASK = "transcribe_drill"
DRILL_SYSTEM = "Task: lookup. Scan the GRAPH line edge by edge, then list the edges asked for."
RULE_DRILL_SYSTEM = "Task: lookup. List the edges asked for."
LOOKUP_STYLES = ("scan", "rule")  # how a lookup drill answers: as a scan rationale writes it, or a rule one
TRANSCRIBE_SYSTEM = "Task: transcribe. Copy the graph as a GRAPH line, its edges in the order the text gives them."
TRANSCRIBE_QUESTION = "Write the graph as a GRAPH line."
LOOKUP_KINDS = ("into", "out of")
KINDS = (*LOOKUP_KINDS, "transcribe")
GRAPH_KINDS = ("DAG", "ADMG", "directed")
TRAINING_NAMINGS = ("letters", "random_letters", "identifiers", "phrases")
TRAINING_ENCODINGS = ("arrows", "clear", "json_parents", "prose", "matrix")  # configs/gen/training-mix.yaml's
# the GRAPH lines a trace writes, so the ones a lookup reads: an arrow list, or a matrix / parents map copied as shown
LOOKUP_GRAPH_LINES = ("arrows", *VERBATIM_ENCODINGS)


@dataclass(frozen=True)
class DrillConfig:
    """What the drills are drawn from: ``n`` drills, each seeded ``{seed}-{i}``; graphs of ``min_nodes``..
    ``max_nodes`` nodes at edge ``density`` (``latent``: bidirected-edge probability in ADMGs), of the
    ``graph_kinds``, named by one of ``namings`` (:data:`~calver.data_gen.names.NAMINGS` entries) drawn per drill;
    edges listed in a random order when ``shuffle_order`` (else sorted); one of ``kinds`` per drill (a lookup
    ``into`` / ``out of`` a node, or ``transcribe`` from one of ``encodings``); a lookup answered as ``lookup``
    says: ``scan`` (a yes/no pass over the edges, then the list) or ``rule`` (the list alone, the line a rule
    rationale writes), over a GRAPH line written in one of ``lookup_encodings`` drawn per lookup
    (:data:`LOOKUP_GRAPH_LINES`: what a trace's GRAPH slot writes, so what its lookups read). The default
    namings and encodings are the training mix's: the domain vocabularies are the held-out split's names."""

    n: int = 1000
    seed: int = 0
    min_nodes: int = 4
    max_nodes: int = 9
    density: float = 0.35
    latent: float = 0.15
    graph_kinds: tuple[str, ...] = GRAPH_KINDS
    namings: tuple[str, ...] = TRAINING_NAMINGS
    shuffle_order: bool = True
    kinds: tuple[str, ...] = LOOKUP_KINDS
    encodings: tuple[str, ...] = TRAINING_ENCODINGS
    lookup: str = "scan"
    lookup_encodings: tuple[str, ...] = ("arrows",)

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"drills: n must be >= 0, got {self.n}")
        if not 2 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"drills: need 2 <= min_nodes <= max_nodes, got {self.min_nodes}..{self.max_nodes}")
        if not 0.0 < self.density <= 1.0 or not 0.0 <= self.latent <= 1.0:
            raise ValueError("drills: density must be in (0, 1] and latent in [0, 1]")
        for got, allowed, what in ((self.graph_kinds, GRAPH_KINDS, "graph_kinds"), (self.kinds, KINDS, "kinds"),
                                   (self.namings, NAMINGS, "namings"), (self.encodings, RENDER_FORMATS, "encodings"),
                                   (self.lookup_encodings, LOOKUP_GRAPH_LINES, "lookup_encodings")):
            if not got or set(got) - set(allowed):
                raise ValueError(f"drills: {what} must be a non-empty subset of {allowed}, got {got!r}")
        if self.lookup not in LOOKUP_STYLES:
            raise ValueError(f"drills: lookup must be one of {LOOKUP_STYLES}, got {self.lookup!r}")


@dataclass(frozen=True)
class TranscriptionCheck(Counts):
    """Transcription replies checked against their graphs: ``drills`` asked, ``parsed`` of them with a GRAPH line
    that reads as a graph, ``exact`` of them the drill's graph (as the GRAPH bit judges a trace), ``verbatim`` of
    them the gold line character for character (edges in the text's order); ``listed`` edges, ``right`` of them
    the graph's, out of ``graph_edges`` in all."""

    drills: int = 0
    parsed: int = 0
    exact: int = 0
    verbatim: int = 0
    listed: int = 0
    right: int = 0
    graph_edges: int = 0


@dataclass(frozen=True)
class DrillCheck:
    """The replies to some drills, checked: the lookups' scans and the transcriptions."""

    lookup: LookupCheck = field(default_factory=LookupCheck)
    transcription: TranscriptionCheck = field(default_factory=TranscriptionCheck)

    def __add__(self, other: "DrillCheck") -> "DrillCheck":
        return DrillCheck(self.lookup + other.lookup, self.transcription + other.transcription)


def check_transcription(reply: str, g: CausalGraph, gold: str) -> TranscriptionCheck:
    """``reply``'s GRAPH slot against ``g``, split and parsed as the GRAPH bit reads a trace's (its class
    enforced); ``gold``: the drill's own answer line."""
    edges = len(g.directed) + len(g.bidirected)
    text = split_slots(reply).get("GRAPH")
    if text is None:
        return TranscriptionCheck(drills=1, graph_edges=edges)
    try:
        got = parse_graph(text, kind=g.kind)
    except GraphError:
        return TranscriptionCheck(drills=1, graph_edges=edges)
    right = len(got.directed & g.directed) + len(got.bidirected & g.bidirected)
    verbatim = text == gold.removeprefix("GRAPH:").strip()
    return TranscriptionCheck(drills=1, parsed=1, exact=int(got == g), verbatim=int(verbatim),
                              listed=len(got.directed) + len(got.bidirected), right=right, graph_edges=edges)


@dataclass(frozen=True)
class _GraphDrill:
    """A drill on ``graph``, listed in ``order``; a subclass says what it asks and how a reply is checked."""

    id: str
    graph: CausalGraph
    order: RenderOrder
    task: ClassVar[str]

    @property
    def system(self) -> str:
        raise NotImplementedError

    @property
    def graph_line(self) -> str:
        return "GRAPH: " + self.graph.to_text(self.order)

    @property
    def question(self) -> str:
        raise NotImplementedError

    @property
    def answer(self) -> str:
        raise NotImplementedError

    def row(self) -> dict[str, Any]:
        """The SFT chat row (``messages``), with ``id`` and ``task``."""
        return {"id": self.id, "task": self.task, "messages": [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.question},
            {"role": "assistant", "content": self.answer}]}


@dataclass(frozen=True)
class LookupDrill(_GraphDrill):
    """The edges ``kind`` (``into`` / ``out of``) ``node`` in the graph's GRAPH line, found by a scan (or, with
    ``scan`` off, listed alone). The GRAPH line is written in ``encoding`` (:data:`LOOKUP_GRAPH_LINES`), as a
    trace's GRAPH slot would write it, and the lookup lists the edges in the order that line shows them."""

    kind: str = "into"
    node: str = ""
    scan: bool = True
    encoding: str = "arrows"
    task: ClassVar[str] = DRILL_TASK

    @property
    def graph_line(self) -> str:
        if self.encoding == "arrows":
            return super().graph_line
        return "GRAPH: " + render_graph(self.graph, self.encoding, self.order)

    @property
    def system(self) -> str:
        return DRILL_SYSTEM if self.scan else RULE_DRILL_SYSTEM

    @property
    def question(self) -> str:
        return f"{self.graph_line}\nList the edges {self.kind} {format_path([self.node])}."

    @property
    def answer(self) -> str:
        order = self.order if self.encoding == "arrows" else reading_order(self.graph, self.encoding, self.order)
        return lookup_line(self.kind, self.node, self.graph, order, scan=self.scan)

    def check(self, reply: str) -> DrillCheck:
        """``reply``'s scans and lookups, checked against the graph."""
        return DrillCheck(lookup=check_lookups(reply, self.graph))

    def solved(self, reply: str) -> bool:
        """Whether ``reply`` states a lookup of the asked node and kind (``Edges into L: ...``) listing exactly
        its edges: a reply that looks up another node, or states nothing, does not solve the drill."""
        want = set(node_edges(self.graph, self.kind, self.node))
        for head, kind, node, text in LOOKUP_RE.findall(reply):
            if head == "Edges" and kind == self.kind and node == self.node:
                listed = listed_edges(text)
                return len(listed) == len(want) and set(listed) == want
        return False


@dataclass(frozen=True)
class TranscriptionDrill(_GraphDrill):
    """The graph rendered in ``encoding``, copied as a GRAPH line in the order the rendering gives its edges."""

    encoding: str = "arrows"
    kind: ClassVar[str] = "transcribe"
    task: ClassVar[str] = TRANSCRIBE_TASK

    @property
    def system(self) -> str:
        return TRANSCRIBE_SYSTEM

    @property
    def question(self) -> str:
        return problem_text(self.graph, TRANSCRIBE_QUESTION, self.encoding, order=self.order)

    @property
    def answer(self) -> str:
        return "GRAPH: " + self.graph.to_text(reading_order(self.graph, self.encoding, self.order))

    def check(self, reply: str) -> DrillCheck:
        """``reply``'s GRAPH line, checked against the graph."""
        return DrillCheck(transcription=check_transcription(reply, self.graph, self.answer))

    def solved(self, reply: str) -> bool:
        """Whether ``reply``'s GRAPH line reads as the drill's graph (as the GRAPH bit judges a trace)."""
        return bool(self.check(reply).transcription.exact)


Drill = LookupDrill | TranscriptionDrill


def draw_drill(cfg: DrillConfig, i: int) -> Drill:
    """Drill ``i`` of ``cfg`` (from its own seed, ``{cfg.seed}-{i}``)."""
    rng = random.Random(f"{cfg.seed}-{i}")
    n = rng.randint(cfg.min_nodes, cfg.max_nodes)
    while True:  # a lookup needs at least one directed edge to scan
        sk = random_skeleton(rng, n, cfg.density, rng.choice(cfg.graph_kinds), cfg.latent)
        if sk.directed:
            break
    g = label(sk, node_names(n, rng.choice(cfg.namings), rng))
    directed = sorted(g.directed)
    bidirected = sorted(g.bidirected)
    nodes = list(g.nodes)
    if cfg.shuffle_order:
        for seq in (directed, bidirected, nodes):
            rng.shuffle(seq)
    order = RenderOrder(tuple(nodes), tuple(directed), tuple(bidirected))
    kind = rng.choice(cfg.kinds)
    if kind == "transcribe":
        encoding = rng.choice(cfg.encodings)
        try:
            render_graph(g, encoding, order)
        except GraphError:  # a name a parents map reserves: the arrow list says the same
            encoding = "arrows"
        return TranscriptionDrill(f"{TRANSCRIBE_TASK}-{cfg.seed}-{i}", g, order, encoding=encoding)
    ends = sorted({e[1] if kind == "into" else e[0] for e in directed})
    # most lookups ask about a node with edges of that kind, as the rules do; some about one without
    node = rng.choice(ends) if rng.random() < 0.85 else rng.choice(nodes)
    encoding = rng.choice(cfg.lookup_encodings)  # drawn last: the drill's graph and node do not depend on it
    try:
        render_graph(g, encoding, order)
    except GraphError:  # a name a parents map reserves: the arrow list says the same
        encoding = "arrows"
    return LookupDrill(f"{DRILL_TASK}-{cfg.seed}-{i}", g, order, kind, node, scan=cfg.lookup == "scan",
                       encoding=encoding)


def drill_config(n: int, seed: int, n_nodes: Sequence[int], namings: Sequence[str],
                 kinds: Sequence[str] = LOOKUP_KINDS, encodings: Sequence[str] = TRAINING_ENCODINGS,
                 lookup: str = "scan", lookup_encodings: Sequence[str] = ("arrows",)) -> DrillConfig:
    """The drills of a ``calver gen`` run: its seed, node range, namings and encodings (``n_nodes``: N or MIN,
    MAX), of the ``kinds`` asked, lookups answered in the ``lookup`` style over GRAPH lines in
    ``lookup_encodings``."""
    lo, hi = (n_nodes[0], n_nodes[-1])
    return DrillConfig(n=n, seed=seed, min_nodes=max(2, lo), max_nodes=max(2, hi), namings=tuple(namings),
                       kinds=tuple(kinds), encodings=tuple(encodings), lookup=lookup,
                       lookup_encodings=tuple(lookup_encodings))


def drill_config_from_dict(d: dict[str, Any]) -> DrillConfig:
    """A :class:`DrillConfig` from its ``dataclasses.asdict`` JSON (lists back to tuples)."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    return DrillConfig(**fields)


def drill_graph_record(d: Drill) -> dict[str, Any]:
    """What ``drills.jsonl`` keeps of a drill: its id and graph (arrow text and class), what it asks."""
    if isinstance(d, TranscriptionDrill):
        asked: dict[str, str] = {"encoding": d.encoding}
    else:  # an arrow-line lookup's record is as it was before lookups had an encoding
        asked = {"node": d.node, **({"encoding": d.encoding} if d.encoding != "arrows" else {})}
    return {"id": d.id, "graph": d.graph.to_text(d.order), "graph_class": d.graph.kind.value, "kind": d.kind,
            **asked}


def drills(cfg: DrillConfig) -> list[Drill]:
    return [draw_drill(cfg, i) for i in range(cfg.n)]


def drill_rows(cfg: DrillConfig) -> list[dict[str, Any]]:
    """``cfg.n`` SFT rows (see :meth:`Drill.row`)."""
    return [d.row() for d in drills(cfg)]


def check_replies(items: Sequence[Drill], replies: Sequence[str]) -> list[DrillCheck]:
    """Each reply checked against its drill (a reply per drill, in order)."""
    if len(items) != len(replies):
        raise ValueError(f"check_replies: {len(items)} drills but {len(replies)} replies")
    return [d.check(r) for d, r in zip(items, replies)]


def load_drill_graphs(path: str | Path) -> list[tuple[str, CausalGraph]]:
    """The drills' graphs of a ``calver gen --drills N`` folder (its drills.jsonl; none without one)."""
    f = Path(path) / "drills.jsonl"
    if not f.is_file():
        return []
    out = []
    for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rec = json.loads(line)
            out.append((rec["id"], parse_graph(rec["graph"], "arrows", kind=rec["graph_class"])))
        except (ValueError, KeyError, TypeError) as e:  # JSON, a graph that does not parse, a missing field
            raise ValueError(f"{f}:{i}: not a drill record ({type(e).__name__}: {e})") from None
    return out
