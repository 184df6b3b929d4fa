"""The 2026-12-01 verifier audit's attack battery (its ``tools/battery.py``, §Method 2) as a library,
shared by ``tests/test_attack_battery.py`` (small, in CI) and ``benchmarks/attack_bench.py`` (at scale).

Problems: ``generate(task, n, GenConfig(seed))`` for the 11 families, plus
``text_levels.constructed_problems`` L1-L3 built from ``generate(task, n, GenConfig(seed + 1))`` for the
5 graph families the audit constructs. Per problem the canonical trace must score 6/6 with an answer
the oracle accepts; then the audit's 34 templates (:func:`variants`) are applied to wrong objects
(:func:`wrong_objects`, each confirmed wrong by :func:`correct`) and, as a control, to the right one.

"Wrong" is decided only by :func:`correct`, which uses the independent oracles of ``tests/oracles.py``
(no calver predicate; calver is used only to load and normalize the problem). An attack trace that
scores 6 carries a wrong object, so every 6 there is a wrong answer at 6/6 — a GRPO reward hack.

Every ``score`` call (canonical, control and attack) runs under the ``fuzz_corpus.watchdog`` (wall
clock, ``hang_s``) and is timed with ``time.process_time()``:

* a crash is any exception escaping ``score`` — ``ProblemError`` included, since every problem here
  is generated — or a result that is not six 0/1 bits;
* a hang is a call past the watchdog;
* an over-budget call spends more than ``budget_s`` (1.0 s) of CPU.

Rows are keyed by family, and ``<family>/constructed`` for the L1-L3 problems, as in the audit's table.
``traces`` counts attack traces (the audit's "traces tried"); crashes, hangs and CPU cover every call.
Everything is driven by ``random.Random(seed)``, so a run is reproducible from ``(seed, n_per_task)``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Iterator

import fuzz_corpus as fc
from attack_objects import correct, fmt, wrong_objects

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.data_gen.text_levels import constructed_problems
from calver.verifier import Problem, ProblemError, Verdict, render_graph, score

TASKS = ("ate_threshold", "backdoor_path", "backdoor_set", "blocking_set", "cycle_witness", "frontdoor_set",
         "intervention_reachability", "knights_knaves", "mediator", "path", "separation_set")
CONSTRUCTED_TASKS = ("backdoor_set", "separation_set", "mediator", "intervention_reachability", "frontdoor_set")
LEVELS = (1, 2, 3)
SLOTS = ("GRAPH", "QUERY", "STRATEGY", "DERIVATION", "RESULT", "ANSWER")
ENCODINGS = ("json", "dot", "matrix", "graphml", "prose", "clear", "json_parents")
EMPTY_FORMS = ("set()", "none", "∅", "[]", "nothing", "empty", "the empty set", "{ }", "null")
# Templates whose right-object version is a well-formed right trace by the contract (docs/trace-contract.md:
# case-insensitive, decorated and STEP-prefixed headers, the aliases, the last complete block is read);
# the control pass should score them 6. Not here: templates that damage a slot even with the right
# object (a trailing `Answer:` / `FINAL ANSWER:` line, a partial block after the slots, `RESULT: invalid`,
# QUERY naming other nodes, an invented GRAPH, STRATEGY replaced by the decision word, ...).
KEEPS_RIGHT = ("plain-wrong", "two-blocks-correct-then-wrong", "fenced-wrong-after", "lowercase-wrong-after",
               "alias-wrong-after", "decorated-wrong", "markdown-headers-wrong", "step-prefix-wrong")
BUDGET_S = 1.0  # CPU seconds per score call
HANG_S = 5.0  # wall seconds before a call is a hang
EXAMPLES_PER_KEY = 2  # findings kept per (kind, family, template)


# ---- results ----------------------------------------------------------------------------------
@dataclass
class FamilyRow:
    """One row of the audit's table: a family, or ``<family>/constructed``."""

    family: str
    problems: int = 0
    traces: int = 0  # attack traces scored (a wrong object in each)
    calls: int = 0  # every score call: canonical + control + attack
    wrong_6: int = 0  # wrong answers (by the oracles) at 6/6, the canonical answer included
    crashes: int = 0
    hangs: int = 0
    over_budget: int = 0
    max_cpu_s: float = 0.0
    canonical_bad: int = 0  # canonical trace not 6/6 (or canonical_trace raised): the problem is skipped

    def add(self, other: FamilyRow) -> None:
        for f in fields(self):
            if f.name == "family":
                continue
            if f.name == "max_cpu_s":
                self.max_cpu_s = max(self.max_cpu_s, other.max_cpu_s)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class ControlRow:
    """The right object through one template: how many of those traces score 6."""

    template: str
    traces: int = 0
    scored_6: int = 0

    @property
    def rate(self) -> float:
        return self.scored_6 / self.traces if self.traces else 1.0


@dataclass(frozen=True)
class Finding:
    kind: str  # "wrong 6/6" | "crash" | "hang" | "canonical"
    family: str  # row key
    label: str  # the problem's source: "backdoor_set", "backdoor_set/L2", ...
    template: str
    problem_id: str
    detail: str  # the exception, the bits, or the oracle's verdict
    trace_tail: str  # the last 300 characters of the trace


@dataclass
class Report:
    seeds: tuple[int, ...]
    n_per_task: int
    rows: dict[str, FamilyRow] = field(default_factory=dict)
    control: dict[str, ControlRow] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)  # examples, EXAMPLES_PER_KEY per key
    counts: Counter = field(default_factory=Counter)  # (kind, family, template) -> count, all of them
    problems: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def row(self, family: str) -> FamilyRow:
        return self.rows.setdefault(family, FamilyRow(family))

    @property
    def total(self) -> FamilyRow:
        out = FamilyRow("all")
        for r in self.rows.values():
            out.add(r)
        return out

    @property
    def clean(self) -> bool:
        t = self.total
        return not (t.wrong_6 or t.crashes or t.hangs or t.canonical_bad)

    def add(self, other: Report) -> None:
        self.seeds += other.seeds
        for k, r in other.rows.items():
            self.row(k).add(r)
        for k, c in other.control.items():
            mine = self.control.setdefault(k, ControlRow(k))
            mine.traces += c.traces
            mine.scored_6 += c.scored_6
        seen = Counter((f.kind, f.family, f.template) for f in self.findings)
        for f in other.findings:
            key = (f.kind, f.family, f.template)
            if seen[key] < EXAMPLES_PER_KEY:
                seen[key] += 1
                self.findings.append(f)
        self.counts.update(other.counts)
        self.problems += other.problems
        self.cpu_s += other.cpu_s
        self.wall_s += other.wall_s


def merge(reports: Iterable[Report]) -> Report:
    reports = list(reports)
    out = Report((), reports[0].n_per_task if reports else 0)
    for r in reports:
        out.add(r)
    return out


# ---- the 34 templates ---------------------------------------------------------------------------
def split_canon(tr: str) -> tuple[dict[str, str], str]:
    """The canonical trace's slot values and its graph label (GRAPH or CONSTRAINTS)."""
    d, label = {}, "GRAPH"
    for line in tr.split("\n"):
        k, v = line.split(": ", 1)
        if k == "CONSTRAINTS":
            label, k = "CONSTRAINTS", "GRAPH"
        d[k] = v
    return d, label


def _plain(s: str) -> str:
    return s


def join(d: dict[str, str], label: str = "GRAPH", names: dict[str, str] | None = None, decor=_plain) -> str:
    names = names or {}
    return "\n".join(decor(f"{names.get(s, label if s == 'GRAPH' else s)}: {d[s]}") for s in SLOTS)


def with_obj(p: Problem, d: dict[str, str], obj_text: str, strategy_text: str | None = None,
             result: str | None = None) -> dict[str, str]:
    """Replace the object in STRATEGY/ANSWER (and DERIVATION's object argument) with text."""
    e = dict(d)
    old = d["STRATEGY"]
    st = strategy_text if strategy_text is not None else obj_text
    t = p.task
    if t in ("intervention_reachability", "ate_threshold"):
        e["ANSWER"] = obj_text
        if t == "intervention_reachability" and result is None:
            e["RESULT"] = "reachable" if obj_text == "yes" else "unreachable"
        if strategy_text is not None:
            e["STRATEGY"] = strategy_text
        return e
    e["STRATEGY"] = st
    e["ANSWER"] = obj_text
    if old and old in e["DERIVATION"]:
        e["DERIVATION"] = e["DERIVATION"].replace(old, st, 1)
    if result is not None:
        e["RESULT"] = result
    elif t != "knights_knaves":
        e["RESULT"] = "valid"
    return e


def _bold(s: str) -> str:
    return "**" + s.replace(": ", ":** ", 1)


def _markdown(s: str) -> str:
    return "### " + s.replace(": ", "\n", 1)


def _step(s: str) -> str:
    return "STEP 1: " + s


def variants(p: Problem, d: dict[str, str], label: str, C, W) -> Iterator[tuple[str, str, Any]]:
    """Yield ``(template, trace text, the object the attack carries)``: the right object ``C`` is the
    one the canonical trace answered, ``W`` the attack's (``W = C`` in the control pass)."""
    t = p.task
    wt, ct = fmt(p, W), fmt(p, C)
    good = join(d, label)
    wrong = join(with_obj(p, d, wt), label)
    yield "plain-wrong", wrong, W
    yield "strategy-correct-answer-wrong", join(with_obj(p, d, wt, strategy_text=ct), label), W
    yield "strategy-wrong-answer-garbage", join(with_obj(p, d, "{{??", strategy_text=wt), label), W
    yield "two-blocks-correct-then-wrong", good + "\n\nWait, let me redo it.\n\n" + wrong, W
    yield "final-answer-line-after", good + "\nFINAL ANSWER: " + wt, W
    yield "answer-after-blank", good + "\n\nAnswer: " + wt, W
    yield "fenced-wrong-after", good + "\n```\n" + wrong + "\n```", W
    yield "wrong-then-partial-correct", wrong + "\n" + "\n".join(good.split("\n")[:2]), W
    yield ("lowercase-wrong-after",
           good + "\n\n" + join(with_obj(p, d, wt), label, names={s: s.lower() for s in SLOTS}), W)
    aliases = {"DERIVATION": "Derivation record", "RESULT": "Computed result", "ANSWER": "Final answer"}
    yield "alias-wrong-after", good + "\n\n" + join(with_obj(p, d, wt), label, names=aliases), W
    yield "decorated-wrong", join(with_obj(p, d, wt), label, decor=_bold), W
    yield "markdown-headers-wrong", join(with_obj(p, d, wt), label, decor=_markdown), W
    yield "step-prefix-wrong", join(with_obj(p, d, wt), label, decor=_step), W
    yield "constraints-label", join(with_obj(p, d, wt), "CONSTRAINTS" if label == "GRAPH" else "GRAPH"), W
    yield "answer-then-prose-paragraph", join(with_obj(p, d, wt), label) + "\n\n(So the answer is " + ct + ".)", W
    yield "answer-trailing-punct", join(with_obj(p, d, "`" + wt + "`."), label), W
    if t not in ("knights_knaves", "ate_threshold", "intervention_reachability"):
        yield "result-invalid", join(with_obj(p, d, wt, result="invalid"), label), W
        yield "result-valid-with-note", join(with_obj(p, d, wt, result="valid (verified)"), label), W
        witness = dict(with_obj(p, d, wt), DERIVATION=d["DERIVATION"].replace(d["STRATEGY"], wt))
        yield "witness-of-correct", join(witness, label), W
        if isinstance(W, frozenset) and not W:
            for form in EMPTY_FORMS:
                yield "empty-form:" + form, join(with_obj(p, d, form), label), W
    if p.graph is not None and t != "knights_knaves":
        for enc in ENCODINGS:
            try:
                alt = render_graph(p.graph, enc).replace("\n", " ")
            except ValueError:  # GraphError: an encoding this graph has no rendering in
                continue
            e = dict(with_obj(p, d, wt))
            e["GRAPH"] = alt
            yield "alt-encoding:" + enc, join(e, label), W
        # an invented graph under which W would be a good answer: drop all edges
        e = dict(with_obj(p, d, wt))
        e["GRAPH"] = ", ".join(p.graph.nodes)
        yield "invented-empty-graph", join(e, label), W
    # QUERY pointing at other nodes
    e = dict(with_obj(p, d, wt))
    qs = e["QUERY"]
    if p.graph is not None and len(p.graph.nodes) > 2:
        others = list(p.graph.nodes)
        for k in ("treatment", "outcome", "source", "target"):
            if f"{k}=" in qs:
                cur = qs.split(f"{k}=")[1].split(";")[0]
                rep = next(n for n in others if n != cur)
                yield f"query-other-{k}", join(dict(e, QUERY=qs.replace(f"{k}={cur}", f"{k}={rep}")), label), W
    if t == "knights_knaves":
        w = ", ".join(f"{k} is a {'truth-teller' if v else 'liar'}" for k, v in W.items())
        yield "kk-role-words", join(with_obj(p, d, w), label), W
        w = " and ".join(f"{k}: {'true' if v else 'false'}" for k, v in W.items())
        yield "kk-true-false", join(with_obj(p, d, w), label), W
        stated = "; ".join(f"knight({k}) <-> {'true' if v else 'false'}" for k, v in W.items())
        yield "kk-constraints-state-answer", join(dict(with_obj(p, d, wt), GRAPH=stated), label), W
        yield "kk-models-claim", join(dict(with_obj(p, d, wt), RESULT="consistent; models=1"), label), W
    if t == "ate_threshold":
        tau = float(p.query["threshold"])
        for r in (tau, tau + 0.005, tau - 0.005):
            e = dict(with_obj(p, d, wt))
            e["RESULT"] = f"{r:.6f}"
            e["DERIVATION"] = e["DERIVATION"].rsplit("effect=", 1)[0] + f"effect={r:.6f})"
            if ", p1=" in e["DERIVATION"]:
                e["DERIVATION"] = e["DERIVATION"].split(", p1=")[0] + f", effect={r:.6f})"
            yield f"ate-result-{r - tau:+.3f}", join(e, label), W
        for form in ("YES", "Yes.", "true", "no!", "False", "`no`"):
            if (form.strip("`.!").lower() in ("yes", "true")) == W:
                yield "ate-form:" + form, join(with_obj(p, d, form), label), W


# ---- the run ------------------------------------------------------------------------------------
def battery_problems(seed: int, n_per_task: int) -> list[tuple[str, Problem]]:
    """``(label, problem)``: label is the task, or ``<task>/L<level>`` for a constructed problem."""
    problems = []
    for task in TASKS:
        problems += [(task, p) for p in generate(task, n_per_task, GenConfig(seed=seed))]
    for task in CONSTRUCTED_TASKS:
        sup = generate(task, n_per_task, GenConfig(seed=seed + 1))
        for lv in LEVELS:
            cps, _ = constructed_problems(sup, lv, random.Random(seed + lv))
            problems += [(f"{task}/L{lv}", p) for p in cps]
    return problems


def row_key(label: str) -> str:
    return label.split("/")[0] + ("/constructed" if "/" in label else "")


class _Scorer:
    """Every score call of a run: watchdog, CPU time, and the crash / hang / budget accounting."""

    def __init__(self, report: Report, hang_s: float, budget_s: float):
        self.report, self.hang_s, self.budget_s = report, hang_s, budget_s

    def note(self, kind: str, row: FamilyRow, label: str, template: str, p: Problem, detail: str,
             text: str) -> None:
        key = (kind, row.family, template)
        if self.report.counts[key] < EXAMPLES_PER_KEY:
            self.report.findings.append(Finding(kind, row.family, label, template, str(p.id), detail, text[-300:]))
        self.report.counts[key] += 1

    def score(self, text: str, p: Problem, row: FamilyRow, label: str, template: str) -> Verdict | None:
        """The score, or None after a crash or hang (counted and recorded)."""
        row.calls += 1
        failure = kind = None
        t0 = time.process_time()
        try:
            with fc.watchdog(self.hang_s):
                sc = score(text, p)
            bits = list(sc.bits)
            if len(bits) != 6 or any(b not in (0, 1) for b in bits):
                kind, failure = "crash", f"bad bits {bits!r}"
        except fc.Hang as e:
            kind, failure = "hang", str(e)
        except ProblemError as e:  # the problems are generated: a ProblemError is a generator or loader bug
            kind, failure = "crash", f"ProblemError: {e}"
        except Exception as e:  # noqa: BLE001 - every exception escaping score is the finding
            kind, failure = "crash", f"{type(e).__name__}: {str(e)[:200]}"
        dt = time.process_time() - t0
        row.max_cpu_s = max(row.max_cpu_s, dt)
        if dt > self.budget_s:
            row.over_budget += 1
        if kind == "crash":
            row.crashes += 1
        elif kind == "hang":
            row.hangs += 1
        if kind:
            self.note(kind, row, label, template, p, failure, text)
            return None
        return sc


def _right_object(p: Problem, answer: Any) -> Any:
    """The canonical trace's parsed answer as the oracle's value."""
    if p.task in ("path", "backdoor_path"):
        return (tuple(answer[0]), tuple(answer[1]) if answer[1] else None)
    return answer


def run(seed: int, n_per_task: int, hang_s: float = HANG_S, budget_s: float = BUDGET_S) -> Report:
    """The battery on ``battery_problems(seed, n_per_task)``; see the module docstring."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    rng = random.Random(seed)
    report = Report((seed,), n_per_task)
    scorer = _Scorer(report, hang_s, budget_s)
    problems = battery_problems(seed, n_per_task)
    report.problems = len(problems)
    for label, p in problems:
        row = report.row(row_key(label))
        row.problems += 1
        try:
            tr = canonical_trace(p)
        except Exception as e:  # noqa: BLE001 - a generated problem without a canonical trace is recorded
            row.canonical_bad += 1
            scorer.note("canonical", row, label, "canonical", p, f"canonical_trace: {type(e).__name__}: {e}", "")
            continue
        sc = scorer.score(tr, p, row, label, "canonical")
        if sc is None:
            continue
        if sc.total != 6:
            row.canonical_bad += 1
            scorer.note("canonical", row, label, "canonical", p, f"bits {list(sc.bits)} {sc.reasons}", tr)
            continue
        d, glabel = split_canon(tr)
        C = _right_object(p, sc.answer)
        if not correct(p, C if p.task != "cycle_witness" else tuple(C)):
            row.wrong_6 += 1
            scorer.note("wrong 6/6", row, label, "canonical", p, f"oracle rejects the canonical answer {C!r}", tr)
        # control: the same templates with the right object (how many still score 6)
        for name, text, _ in variants(p, d, glabel, C, C):
            template = name.split(":")[0]
            r = scorer.score(text, p, row, label, name)
            c = report.control.setdefault(template, ControlRow(template))
            c.traces += 1
            c.scored_6 += int(r is not None and r.total == 6)
        for W in wrong_objects(p, rng):
            for name, text, intended in variants(p, d, glabel, C, W):
                r = scorer.score(text, p, row, label, name)
                row.traces += 1
                if r is not None and r.total == 6 and not correct(p, intended):
                    row.wrong_6 += 1
                    scorer.note("wrong 6/6", row, label, name, p, f"object {intended!r}, answer {r.answer!r}", text)
    report.cpu_s = time.process_time() - cpu0
    report.wall_s = time.perf_counter() - wall0
    return report
