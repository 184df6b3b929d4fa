"""Graph-from-text rendering at three levels, and constructed-graph problems behind a round-trip filter.

* **L1 edge-stated**: the variables, then one sentence per edge (active, passive, "link from A to B"
  and hidden-common-cause phrasings, drawn from the domain vocabulary).
* **L2 mechanism-explicit**: one mechanism per variable ("B is computed as a function of A and C",
  "The mechanism for B takes A as input", "B is exogenous"); no edge list.
* **L3 naturalistic**: a domain frame, relations grouped by effect or by cause, causal chains with
  relative clauses, fronted clauses ("Because of A, B tends to shift"), "It is A that ...",
  pronoun follow-ups, appositives; plus distractors (non-causal facts about variables, pairs
  recorded together, causal talk about things that are not variables, negated non-edges), all
  sentences shuffled. A small share of L3 units are deliberately ambiguous (a pronoun after a fronted
  clause, two clauses joined without a comma), which the faithfulness filter is expected to reject.

Names that collide with template words or are one character long are quoted (see
:func:`calver.data_gen.extractors.risky_name`). :func:`constructed_problems` turns supplied-graph
problems into constructed-mode ones (``text`` = prose + question, ``variables`` = the graph's
nodes, ``graph`` = the source graph kept as the label) and admits an item only when the extractor
reproduces the source graph exactly; it returns admission statistics per level.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

from calver.verifier.graph import CausalGraph
from calver.verifier.problem import Problem

__all__ = ["DOMAINS", "LEVELS", "render_level", "constructed_problem", "constructed_problems", "admission_report",
           "template_words"]

LEVELS = (1, 2, 3)

_GENERIC_FWD = ["causes", "directly affects", "influences", "drives", "determines", "shapes", "has a direct effect on",
                "leads to", "produces", "regulates", "controls", "contributes to", "is a direct cause of",
                "exerts a direct influence on", "acts directly on", "helps determine", "directly changes"]
_GENERIC_REV = ["is caused by", "is directly affected by", "is influenced by", "is driven by", "is determined by",
                "is shaped by", "depends on", "responds to", "is a consequence of", "is a direct effect of",
                "is governed by", "reacts to", "is sensitive to"]

DOMAINS: dict[str, dict[str, list[str]]] = {
    "medicine": {
        "fwd": ["raises", "lowers", "triggers", "is a risk factor for", "stimulates", "inhibits", "affects"],
        "rev": ["is raised by", "is triggered by", "is modulated by", "responds directly to"],
        "frame": ["These notes summarise a clinical study on a cardiology ward.",
                  "Doctors at a regional hospital wrote down what they learned about their patients."],
        "facts": ["{a} was recorded at every visit.", "{a} is measured with a standard bedside test.",
                  "Nurses chart {a} twice a day.", "The protocol lists {a} among the routine measurements."],
        "pairs": ["{a} and {b} are reported on the same lab sheet.",
                  "{a} and {b} were discussed at the weekly meeting."],
        "outside": ["Staff shortages affect how quickly the charts are updated.",
                    "Cold weather drives up the number of admissions."],
        "apposition": ["which is charted by the nurses", "which the ward measures every morning"],
    },
    "economics": {
        "fwd": ["pushes up", "drags down", "fuels", "weighs on", "feeds into", "boosts", "sets the level of"],
        "rev": ["is pushed around by", "hinges on", "is boosted by", "moves with changes in"],
        "frame": ["This brief describes a regional economy as modelled by a central bank.",
                  "An analyst's report on a small open economy makes the following points."],
        "facts": ["{a} is published every quarter.", "{a} is revised twice after its first release.",
                  "Journalists follow {a} closely.", "{a} is reported in local currency."],
        "pairs": ["{a} and {b} appear in the same statistical bulletin.", "Analysts often plot {a} against {b}."],
        "outside": ["Holiday seasons affect how many surveys are returned.",
                    "A new statistics law shaped how the bulletin is printed."],
        "apposition": ["which is published every quarter", "which analysts watch closely"],
    },
    "ecology": {
        "fwd": ["depletes", "feeds", "limits", "regulates", "stimulates", "accelerates", "slows"],
        "rev": ["is limited by", "draws on", "is regulated by", "rises and falls with"],
        "frame": ["Field ecologists surveyed a lake and its shore for several seasons.",
                  "A long-term survey of a temperate forest produced these observations."],
        "facts": ["{a} was sampled every spring.", "{a} is counted from aerial photographs.",
                  "Volunteers helped to log {a}.", "{a} is estimated with transects."],
        "pairs": ["{a} and {b} are logged on the same field sheet.", "{a} and {b} were both sampled near the shore."],
        "outside": ["Heavy rain affects how often the boats can go out.",
                    "Funding cuts limited the number of field trips."],
        "apposition": ["which is sampled every spring", "which volunteers count by hand"],
    },
    "engineering": {
        "fwd": ["controls", "degrades", "strains", "sets the level of", "accelerates", "caps", "feeds into"],
        "rev": ["is set by", "is computed from", "is worn down by", "takes input from", "is limited by"],
        "frame": ["The following describes a water-treatment plant and its control system.",
                  "An incident review of a manufacturing line recorded how its subsystems interact."],
        "facts": ["{a} is logged by the plant historian.", "{a} is read from a sensor every second.",
                  "Operators see {a} on the main dashboard.", "{a} is archived for five years."],
        "pairs": ["{a} and {b} share a dashboard panel.", "{a} and {b} are sampled by the same data logger."],
        "outside": ["Night shifts affect how fast alarms are acknowledged.",
                    "The vendor's firmware update changed the screen layout."],
        "apposition": ["which is logged by the plant historian", "which operators watch on the dashboard"],
    },
    "education": {
        "fwd": ["shapes", "boosts", "erodes", "contributes to", "influences", "lowers"],
        "rev": ["is shaped by", "depends directly on", "is boosted by", "is lowered by"],
        "frame": ["A school district evaluated its programmes over three years.",
                  "Researchers followed a cohort of students from primary to secondary school."],
        "facts": ["{a} is measured at the end of each term.", "{a} comes from a yearly survey.",
                  "Teachers record {a} in the school register.", "{a} is reported to parents."],
        "pairs": ["{a} and {b} are printed on the same report card.", "{a} and {b} were collected in one survey."],
        "outside": ["Snow days affect how many surveys are completed.",
                    "A new timetable shaped when the tests were given."],
        "apposition": ["which is measured at the end of each term", "which teachers record in the register"],
    },
    "generic": {
        "fwd": ["causes", "directly affects", "drives", "determines"],
        "rev": ["is caused by", "is determined by", "depends on"],
        "frame": ["Consider the following system.", "Here is a description of how a system works."],
        "facts": ["{a} is observed in every record.", "{a} takes values on a fixed scale.", "{a} is recorded daily."],
        "pairs": ["{a} and {b} are stored in the same table.", "{a} and {b} were measured together."],
        "outside": ["Clerical errors affect how complete the records are."],
        "apposition": ["which is observed in every record", "which is recorded daily"],
    },
}

_L1_INTRO = ["The variables are {all}.", "The system has {k} variables: {all}.", "We consider the variables {all}.",
             "The model involves {all}."]
_L1_FRM = ["There is a direct causal link from {a} to {b}.", "The graph has a directed edge from {a} to {b}.",
           "There is an arrow from {a} to {b}.", "The model contains a causal arrow from {a} to {b}."]
_BI_T = ["{a} and {b} share a hidden common cause.", "{a} and {b} are confounded by an unmeasured factor.",
         "An unobserved factor influences both {a} and {b}.", "There is latent confounding between {a} and {b}."]
_L2_MECH = ["{v} is determined by {P}.", "{v} is computed as a function of {P}.",
            "The mechanism for {v} takes {P} as {inp}.",
            "To produce {v}, the process combines {P}.", "{v} takes its value from {P}.",
            "The value of {v} is set by {P}.",
            "{v} responds directly to {P}.", "In computing {v}, the model uses {P}.", "{v} is generated from {P}."]
_L2_MECH_PLURAL = ["{P} are the inputs to {v}.", "{P} are the direct causes of {v}."]
_L2_EXO = ["{v} is exogenous.", "{v} is set externally.", "{v} is an external input to the system.",
           "{v} has a value drawn independently."]
_L3_SINGLE = ["Because of {a}, {b} tends to shift.", "Owing to {a}, {b} moves around a lot.",
              "It is {a} that {fwd} {b}.", "{b}, the team found, {rev} {a}.", "{b}, as it turns out, {rev} {a}.",
              "As the records show, {a} {fwd} {b}.", "{a} {fwd} {b}.", "{b} {rev} {a}.",
              "Over time, {a} {fwd} {b}.", "In this setting {b} {rev} {a}."]
_L3_CHILD = ["{c} {rev} {P}.", "Among the drivers of {c} are {P}.", "What shapes {c} is the combination of {P}.",
             "{c}, by all accounts, {rev} {P}."]
_L3_CHILD_PLURAL = ["{P} are among the causes of {c}.", "{P} are the direct causes of {c}."]
_L3_PARENT = ["{p} {fwd} {C}.", "As the records show, {p} {fwd} {C}."]
_L3_NEG = ["Contrary to a popular belief, {a} does not affect {b}.", "{a} has no direct effect on {b}.",
           "Earlier reports claimed that {a} drives {b}, but this was ruled out."]
_L3_INTRO = ["The team tracked {all}.", "Among other things, the records cover {all}."]


def template_words() -> set[str]:
    """Lower-case words used anywhere in the templates and domain vocabularies."""
    texts = _L1_INTRO + _L1_FRM + _BI_T + _L2_MECH + _L2_MECH_PLURAL + _L2_EXO + _L3_SINGLE + _L3_CHILD
    texts += _L3_CHILD_PLURAL + _L3_PARENT + _L3_NEG + _L3_INTRO + _GENERIC_FWD + _GENERIC_REV
    texts += [s for d in DOMAINS.values() for v in d.values() for s in v]
    return {w for t in texts for w in re.findall(r"[a-z]+", re.sub(r"\{[^}]*\}", " ", t.lower()))}


def _vocab(vocab: str | dict | None, rng: random.Random) -> dict[str, list[str]]:
    if vocab is None:
        vocab = rng.choice(sorted(DOMAINS))
    if isinstance(vocab, str):
        if vocab not in DOMAINS:
            raise ValueError(f"unknown vocabulary {vocab!r}; expected one of {', '.join(sorted(DOMAINS))}")
        vocab = DOMAINS[vocab]
    out = {k: list(v) for k, v in DOMAINS["generic"].items()}
    out.update({k: list(v) for k, v in vocab.items()})
    out["fwd"] = list(dict.fromkeys(out["fwd"] + _GENERIC_FWD))
    out["rev"] = list(dict.fromkeys(out["rev"] + _GENERIC_REV))
    return out


def _name(n: str) -> str:
    from calver.data_gen.extractors import risky_name

    return f'"{n}"' if risky_name(n) else n


def _listing(names: Sequence[str]) -> str:
    shown = [_name(n) for n in names]
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else "".join(shown)


def _cap(s: str) -> str:
    return s[0].upper() + s[1:] if s and s[0].isalpha() and s[0].islower() else s


def _fill(t: str, rng: random.Random, voc, **kw) -> str:
    vals = {k: (_name(v) if isinstance(v, str) else _listing(v)) for k, v in kw.items()}
    vals["fwd"] = rng.choice(voc["fwd"])
    vals["rev"] = rng.choice(voc["rev"])
    if "P" in kw:
        vals["inp"] = "input" if len(kw["P"]) == 1 else "inputs"
    return _cap(t).format(**vals)  # capitalise the template, never a variable name


def _graph_of(obj) -> CausalGraph:
    if isinstance(obj, CausalGraph):
        return obj
    if isinstance(obj, Problem) and obj.graph is not None:
        return obj.graph
    raise ValueError("render_level needs a CausalGraph or a Problem with a graph")


def _render_l1(g: CausalGraph, rng, voc) -> list[str]:
    sents = []
    for a, b in sorted(g.directed):
        r = rng.random()
        if r < 0.45:
            sents.append(_fill("{a} {fwd} {b}.", rng, voc, a=a, b=b))
        elif r < 0.85:
            sents.append(_fill("{b} {rev} {a}.", rng, voc, a=a, b=b))
        else:
            sents.append(_fill(rng.choice(_L1_FRM), rng, voc, a=a, b=b))
    sents += [_fill(rng.choice(_BI_T), rng, voc, a=a, b=b) for a, b in sorted(g.bidirected)]
    rng.shuffle(sents)
    nodes = list(g.nodes)
    rng.shuffle(nodes)
    intro = rng.choice(_L1_INTRO).replace("{k}", str(len(nodes)))
    return [_fill(intro, rng, voc, all=nodes)] + sents


def _render_l2(g: CausalGraph, rng, voc) -> list[str]:
    sents = []
    for v in g.nodes:
        pa = sorted(g.parents(v))
        rng.shuffle(pa)
        if not pa:
            sents.append(_fill(rng.choice(_L2_EXO), rng, voc, v=v))
            continue
        pool = _L2_MECH + (_L2_MECH_PLURAL if len(pa) > 1 else [])
        sents.append(_fill(rng.choice(pool), rng, voc, v=v, P=pa))
    sents += [_fill("{a} and {b} are both influenced by a hidden factor.", rng, voc, a=a, b=b)
              for a, b in sorted(g.bidirected)]
    rng.shuffle(sents)
    return sents


def _render_l3(g: CausalGraph, rng, voc, ambiguity: float) -> list[str]:
    units: list[str] = []
    left = set(g.directed)
    children = list(g.nodes)
    rng.shuffle(children)
    for c in children:  # grouped by effect
        pa = sorted(a for a, b in left if b == c)
        if len(pa) >= 2 and rng.random() < 0.4:
            rng.shuffle(pa)
            units.append(_fill(rng.choice(_L3_CHILD + _L3_CHILD_PLURAL), rng, voc, c=c, P=pa))
            left -= {(a, c) for a in pa}
    for p in children:  # grouped by cause
        ch = sorted(b for a, b in left if a == p)
        if len(ch) >= 2 and rng.random() < 0.35:
            rng.shuffle(ch)
            units.append(_fill(rng.choice(_L3_PARENT), rng, voc, p=p, C=ch))
            left -= {(p, b) for b in ch}
    apps = voc["apposition"]
    for a, b in sorted(left):
        if (a, b) not in left:
            continue
        left.discard((a, b))
        nxt = sorted(e for e in left if e[0] == b)
        sib = sorted(e for e in left if e[0] == a)
        r = rng.random()
        if nxt and r < 0.3:  # chain with a relative clause
            left.discard(nxt[0])
            units.append(_fill("{a} {fwd} {b}, which in turn affects {c}.", rng, voc, a=a, b=b, c=nxt[0][1]))
        elif sib and r < 0.5:  # pronoun follow-up; sometimes after a fronted clause (ambiguous "It")
            left.discard(sib[0])
            if rng.random() < ambiguity:
                # "It" means a, but the previous sentence opens with b
                units.append(_fill("{b}, the team found, {rev} {a}. It also {fwd} {c}.", rng, voc,
                                   a=a, b=b, c=sib[0][1]))
            else:
                units.append(_fill("{a} {fwd} {b}. It also {fwd} {c}.", rng, voc, a=a, b=b, c=sib[0][1]))
        elif r < 0.62:
            units.append(_fill("{a}, " + rng.choice(apps) + ", {fwd} {b}.", rng, voc, a=a, b=b))
        elif left and rng.random() < ambiguity:  # two clauses joined without a comma
            e2 = sorted(left)[0]
            left.discard(e2)
            units.append(_fill("{a} {fwd} {b} and {c} {fwd} {d}.", rng, voc, a=a, b=b, c=e2[0], d=e2[1]))
        else:
            units.append(_fill(rng.choice(_L3_SINGLE), rng, voc, a=a, b=b))
    units += [_fill(rng.choice(_BI_T), rng, voc, a=a, b=b) for a, b in sorted(g.bidirected)]
    # distractors
    nodes = list(g.nodes)
    touched = {n for e in g.directed | g.bidirected for n in e}
    for n in nodes:
        if n not in touched or rng.random() < 0.25:
            units.append(_fill(rng.choice(voc["facts"]), rng, voc, a=n))
    if len(nodes) >= 2:
        for _ in range(1 + len(nodes) // 4):
            a, b = rng.sample(nodes, 2)
            units.append(_fill(rng.choice(voc["pairs"]), rng, voc, a=a, b=b))
        adjacent = {frozenset(e) for e in g.directed | g.bidirected}
        non = [(a, b) for a in nodes for b in nodes if a != b and frozenset((a, b)) not in adjacent]
        for a, b in rng.sample(non, min(len(non), 1 + len(nodes) // 5)):
            units.append(_fill(rng.choice(_L3_NEG), rng, voc, a=a, b=b))
    units.append(rng.choice(voc["outside"]))
    rng.shuffle(units)
    head = [rng.choice(voc["frame"])]
    if rng.random() < 0.5:
        shown = list(nodes)
        rng.shuffle(shown)
        head.append(_fill(rng.choice(_L3_INTRO), rng, voc, all=shown))
    return head + units


def render_level(problem_or_graph: Problem | CausalGraph, level: int, rng: random.Random | None = None,
                 vocab: str | dict | None = None, *, ambiguity: float = 0.1) -> str:
    """Prose for the graph at ``level`` 1, 2 or 3. ``vocab``: a :data:`DOMAINS` key, a dict with the
    same keys, or None (a random domain). ``ambiguity``: share of deliberately ambiguous L3 units."""
    g = _graph_of(problem_or_graph)
    rng = rng or random.Random(0)
    voc = _vocab(vocab, rng)
    if level == 1:
        sents = _render_l1(g, rng, voc)
    elif level == 2:
        sents = _render_l2(g, rng, voc)
    elif level == 3:
        sents = _render_l3(g, rng, voc, ambiguity)
    else:
        raise ValueError(f"level must be 1, 2 or 3, not {level!r}")
    return " ".join(sents) if level == 3 else "\n".join(sents)


def constructed_problem(problem: Problem, level: int, rng: random.Random, vocab=None, **kw) -> Problem:
    """The constructed-mode version of a supplied-graph problem (graph kept only as the label); its
    meta keeps the problem's (``source`` included) with ``text_level`` ``"L<level>"`` and
    ``encoding`` ``"text"``."""
    fam = problem.family
    prose = render_level(problem.graph, level, rng, vocab, **kw)
    question = fam.question_text(fam.normalize_query(problem))
    meta = dict(problem.meta)
    meta.update(text_level=f"L{level}", encoding="text", supplied_id=problem.id)
    return replace(problem, text=f"{prose}\n\n{question}", mode="constructed", variables=tuple(problem.graph.nodes),
                   id=f"{problem.id}-L{level}", meta=meta)


def constructed_problems(problems: Iterable[Problem], level: int, rng: random.Random,
                         extractor: Callable[[str, Sequence[str]], CausalGraph] | None = None, vocab=None,
                         **kw) -> tuple[list[Problem], dict[str, Any]]:
    """Render each problem at ``level``; keep it only if ``extractor`` (default: the rule-based one)
    re-reads the prose into exactly the source graph. Returns ``(admitted, stats)``."""
    from calver.data_gen.extractors import extract_graph

    extractor = extractor or extract_graph
    kept, total, failed, unrenderable = [], 0, 0, 0
    for p in problems:
        total += 1
        if p.graph is None or not (p.graph.directed or p.graph.bidirected):
            unrenderable += 1  # no causal graph to describe (K&K, an edgeless graph)
            continue
        try:
            cp = constructed_problem(p, level, rng, vocab, **kw)
        except (ValueError, KeyError, NotImplementedError):
            unrenderable += 1
            continue
        prose = cp.text.rsplit("\n\n", 1)[0]
        try:
            g = extractor(prose, list(cp.variables))
        except Exception:  # noqa: BLE001 - a failing extractor rejects the item
            failed += 1
            continue
        if g == p.graph:
            cp.meta["round_trip"] = "exact"
            kept.append(cp)
    stats = {"level": level, "total": total, "admitted": len(kept), "extractor_errors": failed,
             "unrenderable": unrenderable,
             "admission_rate": len(kept) / total if total else 0.0}
    return kept, stats


def admission_report(problems: Sequence[Problem], levels: Iterable[int] = LEVELS, seed: int = 0,
                     extractor=None, vocab=None) -> dict[int, dict[str, Any]]:
    """Admission statistics of :func:`constructed_problems` for each level."""
    return {lv: constructed_problems(problems, lv, random.Random(f"{seed}:{lv}"), extractor, vocab)[1] for lv in levels}
