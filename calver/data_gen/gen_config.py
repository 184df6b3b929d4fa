"""`GenConfig`: the validated configuration of the synthetic generator (and its YAML form).

Read through :mod:`calver.config` (YAML, then ``--field value`` flags); every bad value raises
:class:`~calver.config.ConfigError` naming the field. The seed is required: generation is never
silently random. Unknown keys are errors naming the closest field.

YAML run files (``calver gen --config FILE``) hold the :class:`GenConfig` keys plus the
:class:`RunConfig` keys ``tasks`` (or ``task``), ``n``, ``out`` and ``level`` (see ``configs/gen/*.yaml``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, build, cfg_field, collect, unknown_key_hints
from calver.data_gen.drills import DrillConfig, drill_config
from calver.data_gen.names import NAMINGS
from calver.data_gen.prompts import GRAPH_SLOTS, SYSTEMS, VERBATIM_ENCODINGS, VERBATIM_SLOTS
from calver.data_gen.text_levels import LEVELS as TEXT_LEVELS
from calver.data_gen.trace_style import ANSWER_CHOICES, RATIONALES, TraceStyle
from calver.verifier.parsers import RENDER_FORMATS

GRAPH_CLASSES = ("DAG", "ADMG", "directed")
ENCODINGS = RENDER_FORMATS  # every encoding the verifier renders (and reads back)
LEVELS = tuple(f"L{i}" for i in TEXT_LEVELS)  # the graph-from-text levels, as configs spell them
MAX_NODES = 26
MAX_N = 1_000_000
EXTRA_TASKS = ("ate_threshold", "knights_knaves")  # generators that read settings from ``extra[task]``

__all__ = ["ENCODINGS", "GRAPH_CLASSES", "LEVELS", "ConfigError", "GenConfig", "RunConfig", "check_task_limits",
           "load_config", "parse_run", "run_config_from_dict"]


def _as_tuple(value: Any, field_name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"field {field_name!r} must be a string or a non-empty list of strings, got {value!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class GenConfig:
    """Per-item generation parameters. Item ``idx`` of task ``t`` uses
    ``Random(f"calver-gen/{t}/{seed}/{idx}")``, so it is the same whatever else is generated."""

    seed: int = cfg_field(help="generator seed (required: generation is never silently random)")
    n_nodes: tuple[int, int] = cfg_field((5, 8), help="node count: N, or an inclusive MIN MAX range (3..26)")
    density: float = cfg_field(0.3, help="probability of each forward (topological-order) directed edge")
    graph_class: tuple[str, ...] | None = cfg_field(
        None, help="DAG / ADMG / directed, or several (one drawn per item); null: the family default "
        "(cycle_witness: directed; frontdoor_set: ADMG; others: DAG, or ADMG when latent > 0)")
    latent: float = cfg_field(0.0, help="probability of a bidirected edge (latent confounder) per node pair in an "
                              "ADMG (an ADMG always gets at least one)")
    naming: tuple[str, ...] = cfg_field(("letters",), help="variable names, one naming drawn per item: "
                                        + ", ".join(NAMINGS))
    encoding: tuple[str, ...] = cfg_field(("arrows",), help="graph encoding(s) in the prompt, one drawn per item: "
                                          + ", ".join(ENCODINGS))
    wording: tuple[str, ...] = cfg_field(("calver",), help="question wordings, one drawn per item: calver (each "
                                         "family's own) | clear (CLEAR's phrasing where CLEAR asks that question)")
    headerless: float = cfg_field(0.0, help="probability that an item's prompt has no header line naming the graph "
                                  "class and encoding (CLEAR's prompts have none)")
    shuffle_order: float = cfg_field(0.0, help="probability that an item's prompt lists its nodes and edges in a "
                                     "random order instead of sorted (CLEAR's are unsorted); the order is recorded "
                                     "and the SFT trace's GRAPH line follows it")
    variants: tuple[str, ...] | None = cfg_field(
        None, help="query variants to draw from (null: all of the family's; with many_satisfier, single-answer "
        "variants such as mediator 'all' are left out)")
    many_satisfier: bool = cfg_field(False, help="keep only queries whose validity class has >= min_valid members "
                                     "(families with one yes/no answer are exempt and say so in meta)")
    min_valid: int = cfg_field(2, help="the many_satisfier threshold")
    max_attempts: int = cfg_field(64, help="deterministic retries (within the item's rng) before an item is skipped")
    max_candidates: int = cfg_field(12, help="set families skip queries with more candidate nodes than this "
                                    "(validity-class enumeration is 2^candidates)")
    max_class: int = cfg_field(10_000, help="enumeration cap for validity classes that can explode (cycles)")
    extra: dict[str, Any] = cfg_field(help="family-specific settings (ate / knights)", default_factory=dict,
                                      compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not _is_int(self.seed):
            raise ConfigError(f"field 'seed' must be an integer, got {self.seed!r}")
        nn = self.n_nodes
        if _is_int(nn):
            nn = (nn, nn)
        elif isinstance(nn, (list, tuple)) and len(nn) == 1:  # `--n_nodes 6`
            nn = (nn[0], nn[0])
        if not (isinstance(nn, (list, tuple)) and len(nn) == 2 and all(_is_int(v) for v in nn)):
            raise ConfigError(f"field 'n_nodes' must be an int or a [min, max] pair of ints, got {self.n_nodes!r}")
        lo, hi = int(nn[0]), int(nn[1])
        if not 3 <= lo <= hi <= MAX_NODES:
            raise ConfigError(f"field 'n_nodes' must satisfy 3 <= min <= max <= {MAX_NODES}, got {[lo, hi]}")
        set_(self, "n_nodes", (lo, hi))
        wording = _as_tuple(self.wording, "wording")
        from calver.data_gen.wordings import WORDINGS

        bad = [w for w in wording if w not in WORDINGS]
        if bad:
            raise ConfigError(f"field 'wording' must be among {WORDINGS}, got {bad[0]!r}")
        set_(self, "wording", wording)
        for name in ("density", "latent", "headerless", "shuffle_order"):
            v = getattr(self, name)
            if not _is_num(v) or not 0.0 <= float(v) <= 1.0:
                raise ConfigError(f"field {name!r} must be a number in [0, 1], got {v!r}")
            set_(self, name, float(v))
        if self.graph_class is not None:
            classes = _as_tuple(self.graph_class, "graph_class")
            norm = []
            for c in classes:
                match = [k for k in GRAPH_CLASSES if k.lower() == c.strip().lower()]
                if not match:
                    raise ConfigError(f"field 'graph_class' must be among {GRAPH_CLASSES}, got {c!r}")
                norm.append(match[0])
            set_(self, "graph_class", tuple(norm))
        naming = _as_tuple(self.naming, "naming")
        bad = [n for n in naming if n not in NAMINGS]
        if bad:
            raise ConfigError(f"field 'naming' must be among {NAMINGS}, got {bad[0]!r}")
        set_(self, "naming", naming)
        enc = _as_tuple(self.encoding, "encoding")
        bad = [e for e in enc if e not in ENCODINGS]
        if bad:
            raise ConfigError(f"field 'encoding' must be among {ENCODINGS}, got {bad[0]!r}")
        set_(self, "encoding", enc)
        if self.variants is not None:
            set_(self, "variants", _as_tuple(self.variants, "variants"))
        if not isinstance(self.many_satisfier, bool):
            raise ConfigError(f"field 'many_satisfier' must be true or false, got {self.many_satisfier!r}")
        for name, low in (("min_valid", 1), ("max_attempts", 1), ("max_candidates", 1), ("max_class", 1)):
            v = getattr(self, name)
            if not _is_int(v) or v < low:
                raise ConfigError(f"field {name!r} must be an integer >= {low}, got {v!r}")
        if not isinstance(self.extra, dict):
            raise ConfigError(f"field 'extra' must be a mapping, got {type(self.extra).__name__}")
        for task, opts in self.extra.items():
            if task in EXTRA_TASKS and not isinstance(opts, dict):
                raise ConfigError(f"field 'extra.{task}' must be a mapping of setting: value, "
                                  f"got {type(opts).__name__}")

    # ---- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GenConfig":
        return build(cls, data, "the generator config")

    def replace(self, **changes: Any) -> "GenConfig":
        return dataclasses.replace(self, **changes)


def _str_list(value: Any, name: str, what: str) -> list[str]:
    """A list field given as one string or a list of strings (YAML or flags), as a list; ConfigError otherwise."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ConfigError(f"field '{name}' must be a list of {what}, got {items!r}")
    return list(items)


@dataclass
class RunConfig:
    """A generation run: which tasks, how many items each, where to write, and the GenConfig."""

    gen: GenConfig = cfg_field(help="per-item parameters (the GenConfig keys of the same file)", key=False)
    tasks: tuple[str, ...] = cfg_field((), help="task families to generate, or 'all' (none for drills alone: --n 0 "
                                       "--drills N)", aliases=("task",))
    n: int = cfg_field(0, help="problems per task")
    out: str | None = cfg_field(None, help="output directory")
    level: str | None = cfg_field(None, help="rewrite each problem as L1 / L2 / L3 prose (calver.data_gen.text_levels)")
    system: str = cfg_field("contract", help="system message of the SFT/GRPO rows: contract (the full contract "
                            "instructions) | compact (one line; the contract lives in the rows' traces)")
    answers: str = cfg_field("random", help="answers of the SFT rows' traces: random (a draw from the validity "
                             "class) | rule (the family's local rule where it gives a valid answer, e.g. the "
                             "treatment's parents: what a small policy can learn to apply)")
    witnesses: int | None = cfg_field(None, help="witness paths the SFT traces' DERIVATION lists at most (null: "
                                      "0 with the compact system, which the verifier does not need, else the "
                                      "family's own number)")
    rationale: str = cfg_field("none", help="write the rule each SFT answer follows as a paragraph before "
                               "STRATEGY (calver.data_gen.rationales; scores are unchanged): none | rule (the "
                               "rule and the edges it reads) | scan (each edge lookup as a yes/no pass over "
                               "the GRAPH line first)")
    graph_slot: str = cfg_field("arrows", help="how the SFT traces' GRAPH slot writes the graph: arrows (an arrow "
                                "list, in the order the prompt's encoding shows it) | verbatim (a prompt's matrix "
                                "or JSON parents map copied as shown, which the GRAPH bit parses: reading it into "
                                "arrows regroups every edge; other encodings keep the arrow list) | cue_first "
                                "(verbatim, and child-first arrow lines `L <- K` for backdoor_set and "
                                "separation_set, whose rule rationale's lookups then list `Edges into L: L <- K`: "
                                "each lookup's node before what it copies)")
    drills: int = cfg_field(0, help="drills added to the SFT rows (calver.data_gen.drills: a node's edges found in "
                            "an arrow list, alone, as a scan rationale writes it; or a graph copied from an "
                            "encoding into a GRAPH line), drawn from the run's seed, node range, namings and "
                            "encodings; their graphs are in drills.jsonl for `calver contamination`")
    drill_kinds: list[str] = cfg_field(help="the drills' kinds, one drawn per drill: into | out of (lookups) | "
                                       "transcribe", default_factory=lambda: ["into", "out of"])
    drill_encodings: list[str] | None = cfg_field(None, help="encodings the transcription drills copy from (null: "
                                                  "the run's encodings; under graph_slot verbatim or cue_first less "
                                                  "json_parents and matrix, which the traces copy as shown, not as "
                                                  "arrows)")
    drill_lookup: str = cfg_field("scan", help="how a lookup drill answers: scan (a yes/no pass over the GRAPH "
                                  "line's edges, then the list: a scan rationale's lookup) | rule (the list alone: "
                                  "a rule rationale's lookup line)")
    drill_lookup_encodings: list[str] = cfg_field(help="the GRAPH lines the lookup drills read, one drawn per drill: "
                                                  "arrows | json_parents | matrix (a parents map or matrix as a "
                                                  "verbatim GRAPH slot copies it: the context of a trace's lookup "
                                                  "on those prompts)", default_factory=lambda: ["arrows"])

    def __post_init__(self) -> None:
        if self.tasks:
            self.tasks = _as_tuple(list(self.tasks) if not isinstance(self.tasks, str) else self.tasks, "tasks")
        if not _is_int(self.n) or self.n < 0:
            raise ConfigError(f"field 'n' must be a non-negative integer, got {self.n!r}")
        if self.n > MAX_N:  # a run holds every problem in memory: a typo'd n would run until it is killed
            raise ConfigError(f"field 'n' must be at most {MAX_N:,} problems per task, got {self.n:,}")
        if self.out is not None and not isinstance(self.out, str):
            raise ConfigError(f"field 'out' must be a path string, got {self.out!r}")
        if self.level is not None and self.level not in LEVELS:
            raise ConfigError(f"field 'level' must be one of {LEVELS}, got {self.level!r}")
        if self.system not in SYSTEMS:
            raise ConfigError(f"field 'system' must be one of {SYSTEMS}, got {self.system!r}")
        if self.answers not in ANSWER_CHOICES:
            raise ConfigError(f"field 'answers' must be one of {ANSWER_CHOICES}, got {self.answers!r}")
        if self.witnesses is not None and (not _is_int(self.witnesses) or self.witnesses < 0):
            raise ConfigError(f"field 'witnesses' must be null or an integer >= 0, got {self.witnesses!r}")
        if not _is_int(self.drills) or not 0 <= self.drills <= MAX_N:
            raise ConfigError(f"field 'drills' must be an integer in 0..{MAX_N:,}, got {self.drills!r}")
        self.drill_kinds = _str_list(self.drill_kinds, "drill_kinds", "drill kinds")
        self.drill_lookup_encodings = _str_list(self.drill_lookup_encodings, "drill_lookup_encodings",
                                                "GRAPH line encodings")
        encs = self.drill_encodings
        if encs is not None:
            encs = [encs] if isinstance(encs, str) else encs
            if not isinstance(encs, list) or not encs or set(encs) - set(ENCODINGS):
                raise ConfigError(f"field 'drill_encodings' must be null or a non-empty list of {ENCODINGS}, "
                                  f"got {self.drill_encodings!r}")
            self.drill_encodings = list(encs)
        try:
            self.drill_config()
        except ValueError as e:
            raise ConfigError(f"field 'drill_kinds' / 'drill_lookup' / 'drill_lookup_encodings': {e}") from None
        if self.rationale not in RATIONALES:
            raise ConfigError(f"field 'rationale' must be one of {RATIONALES}, got {self.rationale!r}")
        if self.graph_slot not in GRAPH_SLOTS:
            raise ConfigError(f"field 'graph_slot' must be one of {GRAPH_SLOTS}, got {self.graph_slot!r}")

    def drill_config(self) -> DrillConfig:
        """The run's drills: its seed, node range, namings and encodings, of ``drill_kinds``. A verbatim GRAPH
        slot copies a matrix or parents map as shown, so by default no transcription drill turns one into an
        arrow list (the arrow list stands in where the run has no other encoding)."""
        encodings = self.drill_encodings
        if encodings is None:
            verbatim = VERBATIM_ENCODINGS if self.graph_slot in VERBATIM_SLOTS else ()
            encodings = [e for e in self.gen.encoding if e not in verbatim] or ["arrows"]
        return drill_config(self.drills, self.gen.seed, self.gen.n_nodes, self.gen.naming, self.drill_kinds,
                            encodings, self.drill_lookup, self.drill_lookup_encodings)

    def trace_style(self) -> TraceStyle:
        """How the run's SFT rows are written; the witness cap is ``witnesses``, or 0 under the compact system."""
        witnesses = self.witnesses if self.witnesses is not None else (0 if self.system == "compact" else None)
        return TraceStyle(self.answers, witnesses, self.rationale, self.graph_slot, self.system)


def check_task_limits(cfg: GenConfig, tasks: Sequence[str]) -> None:
    """The limits of the generators of ``tasks`` that GenConfig's task-independent checks do not know
    (an ATE problem's SCM has at most MAX_SCM_NODES variables; ``extra`` settings are the generator's
    keyword arguments); raises ConfigError naming the field."""
    import inspect

    if "ate_threshold" in tasks:
        from calver.data_gen.ate import generate_ate
        from calver.verifier.scm import MAX_SCM_NODES

        opts = cfg.extra.get("ate_threshold", {})
        _check_extra_keys("ate_threshold", opts, inspect.signature(generate_ate))
        if "n_nodes" in opts:
            v = opts["n_nodes"]
            if not _is_int(v) or not 2 <= v <= MAX_SCM_NODES:
                raise ConfigError(f"field 'extra.ate_threshold.n_nodes' must be an integer in [2, {MAX_SCM_NODES}] "
                                  f"(an SCM's joint has 2^n entries), got {v!r}")
        elif cfg.n_nodes[1] > MAX_SCM_NODES:
            raise ConfigError(f"field 'n_nodes': ate_threshold draws SCMs of at most {MAX_SCM_NODES} variables "
                              f"(the joint has 2^n entries), got max {cfg.n_nodes[1]}")
    if "knights_knaves" in tasks:
        from calver.data_gen.knights import MAX_PEOPLE, MIN_PEOPLE, generate_kk

        opts = cfg.extra.get("knights_knaves", {})
        _check_extra_keys("knights_knaves", opts, inspect.signature(generate_kk))
        v = opts.get("n_people")
        if v is not None and (not _is_int(v) or not MIN_PEOPLE <= v <= MAX_PEOPLE):
            raise ConfigError(f"field 'extra.knights_knaves.n_people' must be an integer in "
                              f"[{MIN_PEOPLE}, {MAX_PEOPLE}], got {v!r}")


def _check_extra_keys(task: str, opts: dict[str, Any], sig: Any) -> None:
    known = [n for n in sig.parameters if n not in ("idx", "seed")]  # those two come from the item
    hints = unknown_key_hints(opts, known)
    if hints:
        raise ConfigError(f"field 'extra.{task}': unknown setting(s) {', '.join(hints)}; "
                          f"known: {', '.join(known)}")


def parse_run(config: str | Path | None = None, args: Sequence[str] | Any = (),
              overrides: dict[str, Any] | None = None) -> RunConfig:
    """A :class:`RunConfig`: the YAML file ``config``, then ``--field value`` ``args`` (or a parsed
    namespace), then the mapping ``overrides``; GenConfig and run keys share one flat namespace."""
    gen, run = collect((GenConfig, RunConfig), config, args, overrides=overrides)
    return build(RunConfig, run, str(config or "the run config"), gen=build(GenConfig, gen, "the generator config"))


def run_config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Split a flat mapping into run keys and :class:`GenConfig` keys (unknown keys are errors)."""
    if not isinstance(data, dict):
        raise ConfigError(f"a generator config file must hold a mapping, got {type(data).__name__}")
    return parse_run(overrides=data)


def load_config(path: str | Path) -> RunConfig:
    """Read a YAML run config with ``yaml.safe_load``."""
    return parse_run(path)
