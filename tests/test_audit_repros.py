"""The verifier audit's repro pairs (tests/data/repro/, copied from the audit) behave as the fixes
for issue 12 require ("Reproducing the findings" in the audit).

* Reward hacks (A1 constructed K&K / backdoor, A2 ATE margin, A3 cycle direction, A4 front-door
  maximality): the trace no longer scores 6/6, named bits fail, and ``grade`` rejects the wrong
  answer. Each case's facts are re-derived by an independent oracle (networkx, brute force, or a
  hand-worked argument) so the test does not trust calver for what is right.
* Robustness (B1 ReDoS banner, B2 ``İ`` header, B3 prose blow-up, B4 quadratic number regex):
  no exception, bounded CPU / memory, and ``calver verify`` exits 0 with JSON.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import fuzz_corpus as fc
import networkx as nx
import pytest

from calver.verifier import Problem, get_family, grade, score, select, split_slots

REPRO = Path(__file__).parent / "data" / "repro"
ROOT = Path(__file__).resolve().parents[1]
DOCS_TRACE = ROOT / "docs" / "examples" / "backdoor_trace.txt"
DOCS_KK_TRACE = ROOT / "docs" / "examples" / "kk_trace.txt"


def load(name: str) -> Problem:
    return Problem.from_dict(json.loads((REPRO / f"{name}.json").read_text(encoding="utf-8")))


def text(name: str) -> str:
    return (REPRO / name).read_text(encoding="utf-8")


def failed(sc) -> list[int]:
    """1-based numbers of the failed bits."""
    return [i + 1 for i, b in enumerate(sc.bits) if not b]


def guarded(fn, wall_s: float = 10.0):
    """(result, CPU seconds); a call past ``wall_s`` fails the test instead of hanging it."""
    t0 = time.process_time()
    try:
        with fc.watchdog(wall_s):
            out = fn()
    except fc.Hang:
        pytest.fail(f"no return within {wall_s:g} s (hang)")
    return out, time.process_time() - t0


# ---- independent oracles ---------------------------------------------------------------------
def nx_graph(p: Problem) -> nx.DiGraph:
    """The canonical DAG of the problem's graph: each a <-> b becomes a latent U -> a, U -> b."""
    g = nx.DiGraph()
    g.add_nodes_from(p.graph.nodes)
    g.add_edges_from(p.graph.directed)
    for a, b in p.graph.bidirected:
        g.add_edges_from([(f"U[{a},{b}]", a), (f"U[{a},{b}]", b)])
    return g


def backdoor_ok(g: nx.DiGraph, x: str, y: str, z: set) -> bool:
    """Pearl's criterion: no descendant of x in z, and z d-separates x, y once x's out-edges are cut."""
    if z & nx.descendants(g, x):
        return False
    h = g.copy()
    h.remove_edges_from(list(g.out_edges(x)))
    return nx.is_d_separator(h, {x}, {y}, set(z))


def frontdoor_ok(g: nx.DiGraph, x: str, y: str, z: set) -> bool:
    """Front door, set reading (the audit's G_{underline Z} oracle): z intercepts every directed x->y
    path; x and z are d-separated once x's out-edges are cut; z and y are d-separated given x once
    every out-edge of z is cut."""
    h = g.copy()
    h.remove_nodes_from(z)
    if nx.has_path(h, x, y):
        return False
    if not z:
        return True
    h = g.copy()
    h.remove_edges_from(list(g.out_edges(x)))
    if not nx.is_d_separator(h, {x}, set(z), set()):
        return False
    h = g.copy()
    h.remove_edges_from([e for v in z for e in g.out_edges(v)])
    return nx.is_d_separator(h, set(z), {y}, {x})


def brute_force_ate(p: Problem) -> float:
    """P(Y=1 | do(X=1)) - P(Y=1 | do(X=0)) by truncated factorization over every assignment."""
    cpt: dict[str, dict[tuple, float]] = {}
    parents: dict[str, list[str]] = {}
    for line in p.data["cpts"]:
        m = re.fullmatch(r"P\((\w+)=1(?: \| (.*))?\) = ([\d.]+)", line.strip())
        v, cond, prob = m.group(1), m.group(2), float(m.group(3))
        pairs = [c.split("=") for c in cond.split(", ")] if cond else []
        parents[v] = [a for a, _ in pairs]
        cpt.setdefault(v, {})[tuple(int(b) for _, b in pairs)] = prob
    x, y = p.query["treatment"], p.query["outcome"]
    names = sorted(cpt)

    def do(xv: int) -> float:
        total = 0.0
        for vals in itertools.product((0, 1), repeat=len(names)):
            a = dict(zip(names, vals))
            if a[x] != xv or a[y] != 1:
                continue
            w = 1.0
            for v in names:
                if v != x:
                    p1 = cpt[v][tuple(a[u] for u in parents[v])]
                    w *= p1 if a[v] else 1 - p1
            total += w
        return total

    return do(1) - do(0)


# ---- A1-A4: wrong answers that scored 6/6 ------------------------------------------------------
# (repro name, bits that must fail, the trace's wrong answer, a right answer)
HACKS = [
    ("kk_constructed", (1,), "Paul=knight, Ivy=knight", "Paul=knave, Ivy=knight"),
    ("bd_constructed", (1, 3), "{}", "{A}"),
    ("ate_margin", (6,), "no", "yes"),
    ("cycle", (3, 5), "A <- B <- C <- A", "A -> B -> C -> A"),
    ("fd_maximal", (3, 5), "{V4}", "{V2, V3, V4}"),
]


@pytest.mark.parametrize("name,must_fail,wrong,right", HACKS, ids=[h[0] for h in HACKS])
def test_hack_no_longer_scores_six(name, must_fail, wrong, right):
    p = load(f"{name}_problem")
    sc = score(text(f"{name}_trace.txt"), p)
    assert sc.total < 6, sc.reasons
    for b in must_fail:
        assert sc.bits[b - 1] == 0, f"b{b} passed; failed bits {failed(sc)}; reasons {sc.reasons}"
    assert grade(p, wrong) is False
    assert grade(p, right) is True


def test_oracle_kk_constructed():
    """Hand-worked: Paul says "Ivy is a truth-teller iff Ivy is not one", a contradiction, so Paul
    lies (knave); Ivy says Paul is a liar, which is true, so Ivy is a knight. The trace's
    constraints ``knight(Paul); knight(Ivy)`` are not the puzzle's statements."""
    p = load("kk_constructed_problem")
    assert p.data["statements"] == {"Ivy": "knave(Paul)", "Paul": "knight(Ivy) <-> not knight(Ivy)"}
    honest = get_family("knights_knaves").canonical_trace(p, {"Paul": False, "Ivy": True})
    assert score(honest, p).total == 6  # grounding must not cost the honest trace its reward


def test_oracle_bd_constructed():
    """networkx: C <- A -> F and C <- A <- D -> F are open back-door paths; {A} is the only minimal
    valid set and {} is invalid on the source graph the prompt's prose describes."""
    p = load("bd_constructed_problem")
    g = nx_graph(p)
    cands = sorted(set(g) - {"C", "F"})
    valid = [set(z) for r in range(len(cands) + 1) for z in itertools.combinations(cands, r)
             if backdoor_ok(g, "C", "F", set(z))]
    minimal = [z for z in valid if not any(o < z for o in valid)]
    assert minimal == [{"A"}] and set() not in valid
    fam = get_family("backdoor_set")
    assert score(fam.canonical_trace(p, {"A"}), p).total == 6  # the honest trace keeps 6/6


def test_oracle_ate_margin():
    """Brute force: the true ATE is ~0.0496 > τ = 0.04 (so "yes"), and it lies within ε of τ: a
    θ̂ = 0.04 inside the declared tolerance may not buy the wrong "no"."""
    p = load("ate_margin_problem")
    ate = brute_force_ate(p)
    assert ate == pytest.approx(0.049588, abs=1e-6)
    assert p.query["threshold"] < ate <= p.query["threshold"] + p.data["epsilon"]


def test_oracle_cycle_and_answer_swap():
    """networkx: the only directed cycle is A -> B -> C -> A. A max-score trace whose ANSWER is
    swapped to the reversed cycle (a well-formed but invalid object) fails exactly b3, b5, b6
    (score 3), as the contract doc claims for path-valued families (audit D3); a bidirected
    sequence is not a directed cycle at all, so at least b6 fails."""
    p = load("cycle_problem")
    cycles = list(nx.simple_cycles(nx_graph(p)))
    assert len(cycles) == 1 and sorted(cycles[0]) == ["A", "B", "C"]
    fwd = "A -> B -> C -> A"
    good = re.sub(r"(?m)^(STRATEGY|ANSWER): .*$", lambda m: f"{m.group(1)}: {fwd}", text("cycle_trace.txt"))
    assert score(good, p).total == 6
    for bad in ("A <- B <- C <- A", "A <-> B <-> C <-> A"):
        sc = score(good.replace(f"ANSWER: {fwd}", f"ANSWER: {bad}"), p)
        if "<->" in bad:
            assert sc.bits[5] == 0 and sc.total < 6, (bad, sc.reasons)
        else:
            assert failed(sc) == [3, 5, 6], (bad, sc.reasons)
        assert grade(p, bad) is False
        both = good.replace(f"STRATEGY: {fwd}", f"STRATEGY: {bad}").replace(f"ANSWER: {fwd}", f"ANSWER: {bad}")
        sc = score(both, p)
        assert sc.bits[2] == 0 and sc.bits[4] == 0, (bad, sc.reasons)


def test_oracle_fd_maximal():
    """networkx (set reading): every P_i <-> V0 makes any set holding P_i fail condition (ii), so
    the valid sets are subsets of {V2, V3, V4, V5}; among them {V4} is valid but not maximal
    ({V2, V3, V4} is valid), although adding V2 or V3 alone breaks it."""
    p = load("fd_maximal_problem")
    g = nx_graph(p)
    poison = sorted(n for n in p.graph.nodes if n.startswith("P"))
    assert len(poison) == 15 and not any(frontdoor_ok(g, "V0", "V1", {q}) for q in poison)
    core = ["V2", "V3", "V4", "V5"]
    valid = [set(z) for r in range(5) for z in itertools.combinations(core, r) if frontdoor_ok(g, "V0", "V1", set(z))]
    maximal = [z for z in valid if not any(z < o for o in valid)]
    assert {"V4"} in valid and {"V2", "V3", "V4"} in maximal and {"V4"} not in maximal
    assert not frontdoor_ok(g, "V0", "V1", {"V2", "V4"}) and not frontdoor_ok(g, "V0", "V1", {"V3", "V4"})
    for z in maximal:
        assert grade(p, z) is True, z


# ---- B1-B4: hangs, crashes, blow-ups -----------------------------------------------------------
def test_redos_banner_is_fast_and_harmless():
    """A 30-star banner line before the docs' example trace: under 1 s CPU, same 6/6 as without it."""
    p = load("backdoor_problem")
    redos = text("redos_trace.txt")
    lines = redos.split("\n")
    assert set(lines[1].split()[0]) == {"*"} and "\n".join(lines[2:]) == DOCS_TRACE.read_text(encoding="utf-8")
    sc, cpu = guarded(lambda: score(redos, p))
    assert cpu <= 1.0, f"{cpu:.2f} s CPU"
    without_banner = "\n".join(lines[:1] + lines[2:])
    assert sc.bits == score(without_banner, p).bits == score(DOCS_TRACE.read_text(encoding="utf-8"), p).bits == [1] * 6


def test_ideogram_header_is_not_a_header():
    """``DERİVATION`` (U+0130) is not a slot header: no KeyError, the DERIVATION slot is missing."""
    p = load("backdoor_problem")
    t = text("ideogram_trace.txt")
    slots = split_slots(t)
    assert "DERIVATION" not in slots.values and "missing" in slots.problems["DERIVATION"]
    sc = score(t, p)
    assert sc.bits[3] == 0 and sc.total < 6, sc.reasons
    assert select([t, DOCS_TRACE.read_text(encoding="utf-8")], p) == 1


@pytest.mark.parametrize("spelled,slot", [
    ("DERİVATION", "DERIVATION"), ("DERıVATION", "DERIVATION"), ("ANſWER", "ANSWER"), ("ſTRATEGY", "STRATEGY"),
    ("FİNAL ANSWER", "ANSWER"), ("ＡNSWER", "ANSWER"), ("АNSWER", "ANSWER"), ("CONSTRAİNTS", "GRAPH"),
])
def test_non_ascii_header_letters_are_not_headers(spelled, slot):
    """Headers are ASCII: a case-folding special (İ ı ſ) or a look-alike is not a header (audit B2
    and §2: ``ANſWER`` / ``DERıVATION`` used to be accepted silently)."""
    src = DOCS_KK_TRACE if slot == "GRAPH" else DOCS_TRACE
    label = "CONSTRAINTS" if slot == "GRAPH" else slot
    t = re.sub(rf"(?m)^{label}:", f"{spelled}:", src.read_text(encoding="utf-8"), count=1)
    assert t != src.read_text(encoding="utf-8")
    slots = split_slots(t)
    assert slot not in slots.values, (spelled, slots.values.get(slot))


def _child(args: list[str], mem_mb: int = 1536, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` from the repository root under an address-space cap (a blow-up becomes a
    MemoryError in the child, not an OOM on the test machine) and a wall-clock timeout."""
    def cap():
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = mem_mb << 20 if hard == resource.RLIM_INFINITY else min(mem_mb << 20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(map(str, args))}: no exit within {timeout:g} s (hang)")


_MEASURE = """
import json, sys, time, tracemalloc
from calver.verifier import Problem, score
p = Problem.from_dict(json.load(open(sys.argv[1], encoding="utf-8")))
t = open(sys.argv[2], encoding="utf-8").read()
if sys.argv[3] == "memory":
    tracemalloc.start()
t0 = time.process_time()
sc = score(t, p)
cpu = time.process_time() - t0
peak = tracemalloc.get_traced_memory()[1] if sys.argv[3] == "memory" else 0
print(json.dumps({"cpu": cpu, "peak": peak, "bits": sc.bits}))
"""


def test_prose_blowup_is_bounded():
    """``a0, ..., a7999 causes b0, ..., b7999 and bz.`` in GRAPH (110 KB): no exception, under 2 s
    CPU and 200 MB peak (it took 22 s and 3.3 GB, then MemoryError). Measured in a child process."""
    out = {}
    for mode in ("time", "memory"):
        r = _child(["-c", _MEASURE, str(REPRO / "backdoor_problem.json"), str(REPRO / "prose_blowup_trace.txt"), mode])
        assert r.returncode == 0, r.stderr[-3000:]
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["time"]["cpu"] <= 2.0, out
    assert out["memory"]["peak"] < 200 * 2**20, out
    assert out["time"]["bits"][0] == 0  # the GRAPH slot names 16,001 nodes that are not in the graph


def test_ate_quadratic_number_is_fast():
    """RESULT of 19,000 ones then ``x-0.132774``: under 1 s CPU (56 s before); it is not a number, so
    b5 fails."""
    p = load("ate_problem_seed0")
    t = text("ate_quadratic_trace.txt")
    sc, cpu = guarded(lambda: score(t, p))
    assert cpu <= 1.0, f"{cpu:.2f} s CPU"
    assert sc.bits[4] == 0, sc.reasons


# ---- the CLI on the same files -----------------------------------------------------------------
def _verify(*args: str) -> dict:
    r = _child(["-m", "calver.cli", "verify", *args], timeout=30.0)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert len(out["bits"]) == 6 and out["total"] == sum(out["bits"])
    return out


@pytest.mark.parametrize("problem,trace", [
    ("backdoor_problem", "redos_trace.txt"), ("backdoor_problem", "ideogram_trace.txt"),
    ("backdoor_problem", "prose_blowup_trace.txt"), ("ate_problem_seed0", "ate_quadratic_trace.txt"),
])
def test_cli_survives_hang_and_crash_cases(problem, trace):
    _verify(str(REPRO / f"{problem}.json"), str(REPRO / trace))


@pytest.mark.parametrize("name", [h[0] for h in HACKS])
def test_cli_grades_hacks_wrong(name):
    out = _verify("--grade", str(REPRO / f"{name}_problem.json"), str(REPRO / f"{name}_trace.txt"))
    assert out["correct"] is False and out["total"] < 6, out
