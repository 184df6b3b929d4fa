"""The tests' one fixtures module: problems from the project's own seeded generators
(``calver.data_gen`` with small ``GenConfig`` s), synthetic K-candidate pools built from them, hand-built
pools of canonical traces, pools sampled through ``calver sample``'s code path, and small independent
random-graph builders that oracle tests need (graphs no generator planted anything in).

Trace perturbations (``replace_slot``, ``rename_nodes`` ...) are the evaluation package's audit functions:
import them from ``calver.evaluation.audits``, there is one implementation. Benchmarks load this file by
path (``importlib``), so it imports nothing else from ``tests/``.
"""

from __future__ import annotations

import itertools
import json
import random
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from calver.data_gen import GenConfig, generate_item
from calver.data_gen.generators import canonical_trace, generate, iter_generate, validity_objects
from calver.data_gen.text_levels import constructed_problems
from calver.evaluation.audits import replace_slot
from calver.infer.pool import Pool
from calver.infer.sample import run_sample
from calver.infer.sample_config import SampleConfig
from calver.verifier import CausalGraph, GraphClass, Problem, get_family, grade, parse_graph, problem_fingerprint

SET_TASKS = ("backdoor_set", "frontdoor_set", "separation_set", "blocking_set", "mediator")
GRAPH_TASKS = SET_TASKS + ("cycle_witness", "intervention_reachability", "path", "backdoor_path")


# ---- independent random graphs (oracle tests) ---------------------------------------------------
def random_dag(rng: random.Random, n: int, p: float = 0.35, prefix: str = "V") -> CausalGraph:
    names = [f"{prefix}{i}" for i in range(n)]
    rng.shuffle(names)
    edges = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return CausalGraph.build(names, edges, (), GraphClass.DAG)


def random_admg(rng: random.Random, n: int, p: float = 0.3, pb: float = 0.15) -> CausalGraph:
    dag = random_dag(rng, n, p)
    nodes = list(dag.nodes)
    bi = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :] if rng.random() < pb]
    return CausalGraph.build(nodes, dag.directed, bi, GraphClass.ADMG)


def random_cyclic(rng: random.Random, n: int, p: float = 0.25) -> CausalGraph:
    nodes = [f"V{i}" for i in range(n)]
    edges = {(a, b) for a in nodes for b in nodes if a != b and rng.random() < p}
    cyc = rng.sample(nodes, rng.randint(2, min(4, n)))
    edges |= {(cyc[i], cyc[(i + 1) % len(cyc)]) for i in range(len(cyc))}
    return CausalGraph.build(nodes, edges, (), GraphClass.DIRECTED)


def renamed_graph(g: CausalGraph, rng: random.Random) -> CausalGraph:
    """``g`` with its nodes renamed ``q0``, ``q1``, ... at random (node order and edges kept)."""
    new = [f"q{i}" for i in range(len(g.nodes))]
    rng.shuffle(new)
    m = dict(zip(g.nodes, new))
    return CausalGraph.build([m[n] for n in g.nodes], [(m[a], m[b]) for a, b in g.directed],
                             [(m[a], m[b]) for a, b in g.bidirected], g.kind)


def iso_brute_force(a: CausalGraph, b: CausalGraph) -> bool:
    """Isomorphic up to renaming (edge types kept), by trying every node bijection: an oracle for small graphs."""
    if len(a.nodes) != len(b.nodes) or len(a.directed) != len(b.directed) or len(a.bidirected) != len(b.bidirected):
        return False
    bb = {frozenset(e) for e in b.bidirected}
    for perm in itertools.permutations(b.nodes):
        m = dict(zip(a.nodes, perm))
        if {(m[x], m[y]) for x, y in a.directed} == b.directed and \
                {frozenset((m[x], m[y])) for x, y in a.bidirected} == bb:
            return True
    return False


# ---- generated problems ------------------------------------------------------------------------
def small_config(seed: int, **changes: Any) -> GenConfig:
    """A small generator config: 4-8 nodes, DAGs and ADMGs mixed (directed graphs for cycle_witness)."""
    base = {"seed": seed, "n_nodes": (4, 8), "density": 0.35, "latent": 0.15}
    return GenConfig(**{**base, **changes})


def _classes(task: str) -> tuple[str, ...]:
    allowed = [c.value for c in get_family(task).graph_classes]
    mixed = tuple(c for c in ("DAG", "ADMG") if c in allowed)
    return mixed or tuple(allowed)


def sample_problem(task: str, rng: random.Random, tries: int = 200) -> tuple[Problem, list]:
    """A generated problem of ``task`` (item and seed drawn from ``rng``) whose validity class is
    non-empty and not just "none", with that class as answer objects."""
    for _ in range(tries):
        cfg = small_config(rng.randrange(1 << 30), graph_class=_classes(task))
        problem = generate_item(task, rng.randrange(1 << 20), cfg)
        if problem is None:
            continue
        valid = validity_objects(problem)
        if valid and valid != [()]:
            return problem, valid
    raise RuntimeError(f"no problem with a non-empty validity class for {task}")


# ---- synthetic K-candidate pools (selectors, firewall, sampling) -------------------------------
POOL_TASKS = ("backdoor_set", "separation_set", "mediator", "frontdoor_set")


def _damage(trace: str, rng: random.Random) -> str:
    lines = trace.splitlines()
    kind = rng.randrange(3)
    if kind == 0:
        del lines[rng.randrange(len(lines))]
    elif kind == 1:
        lines[0] = lines[0].replace("->", "<-", 1)
    else:
        lines[-1] = "ANSWER: {??}"
    return "\n".join(lines)


def _invalid_sets(problem: Problem, rng: random.Random) -> list[frozenset[str]]:
    q = problem.query
    ends = set(q.get("x", [])) | set(q.get("y", [])) | {q.get("treatment"), q.get("outcome")}
    cand = [n for n in problem.graph.nodes if n not in ends]
    out: list[frozenset[str]] = []
    for _ in range(20):
        s = frozenset(rng.sample(cand, rng.randint(0, min(3, len(cand)))))
        if s not in out and not grade(problem, s):
            out.append(s)
    return out


def pool_problems(n: int, seed: int = 0) -> list[tuple[Problem, list, list]]:
    """``n`` find-one-valid problems (round-robin over :data:`POOL_TASKS`, variant ``any``, at least two
    valid answers) with (valid members, invalid sets); problems with no invalid set are passed over."""
    rng = random.Random(f"fixtures/pool/{seed}")
    cfg = small_config(seed, n_nodes=(6, 9), latent=0.0, variants=("any",), many_satisfier=True)
    per_task = {t: iter_generate(t, 1 << 20, cfg) for t in POOL_TASKS}  # lazy: items as they are needed
    out = []
    while len(out) < n:
        task = POOL_TASKS[len(out) % len(POOL_TASKS)]
        p = next(per_task[task])
        invalid = _invalid_sets(p, rng)
        if invalid:
            out.append((p, validity_objects(p), invalid))
    return out


def synthetic_units(n_units: int = 24, k: int = 8, seed: int = 0, n_seeds: int = 1):
    """``[(problem, seed, texts)]``: per unit, canonical traces of several distinct valid answers (a
    fragmented vote), one repeated invalid "spoiler", other invalid answers and damaged traces."""
    rng = random.Random(f"fixtures/units/{seed}")
    out = []
    for p, valid, invalid in pool_problems(max(1, -(-n_units // n_seeds)), seed):
        fam = get_family(p.task)
        for s in range(n_seeds):
            texts = []
            spoiler = rng.choice(invalid)
            for _ in range(k):
                r = rng.random()
                if r < 0.45:
                    texts.append(fam.canonical_trace(p, rng.choice(valid)))
                elif r < 0.75:
                    texts.append(fam.canonical_trace(p, spoiler))
                elif r < 0.9:
                    texts.append(fam.canonical_trace(p, rng.choice(invalid)))
                else:
                    texts.append(_damage(fam.canonical_trace(p, rng.choice(valid)), rng))
            out.append((p, s, texts))
    return out[:n_units]


def write_pool(root: str | Path, units, k: int) -> Pool:
    """A pool directory (manifest, problems, candidates) holding ``units``; not frozen."""
    pool = Pool(root)
    probs = {p.id: p for p, _, _ in units}
    pool.write_manifest({"schema": "calver-pool/1", "sampling": {"k": k}, "seeds": sorted({s for _, s, _ in units}),
                         "model": {"id": "synthetic"}, "selector_context": {}})
    pool.write_problems(probs.values())
    pool.append_candidates(
        {"problem_id": p.id, "source_id": p.source_id, "seed": s, "candidate_index": i, "text": t,
         "finish_reason": "stop", "num_tokens": len(t.split()), "mean_logprob": -1.0}
        for p, s, texts in units for i, t in enumerate(texts)
    )
    return pool



# ---- hand-built frozen pools of canonical traces (evaluation tests) ---------------------------
# A pool spec is a list of units ``(problem, seed, objects)``; each object becomes the family's canonical
# six-slot trace for it (score 6 when valid). ``claim_valid`` rewrites an invalid trace's RESULT to
# ``valid``, the typical LLM error (it still scores below 6).

# The supplement's worked example: {U} and {U, P} are valid backdoor sets for X -> Y; {} leaves
# X <- U -> Y open; {M} is a descendant of X.
EXAMPLE_GRAPH = "P -> U, U -> X, U -> Y, X -> M, M -> Y"


def backdoor_problem(pid: str = "bd", source_id: str | None = None, graph: str = EXAMPLE_GRAPH,
                     treatment: str = "X", outcome: str = "Y") -> Problem:
    return Problem(task="backdoor_set", query={"treatment": treatment, "outcome": outcome, "variant": "any"},
                   graph=parse_graph(graph), id=pid, source_id=source_id or pid)


def trace_for(problem: Problem, obj: Any, claim: bool = False) -> str:
    """The canonical trace for ``obj``; ``claim`` makes an invalid one declare itself valid."""
    text = get_family(problem.task).canonical_trace(problem, obj)
    return claim_valid(text) if claim else text


def claim_valid(trace: str) -> str:
    return replace_slot(trace, "RESULT", "valid")


def build_pool(root: str, units: Sequence[tuple[Problem, int, Sequence[Any]]], *,
               selections: dict[str, Iterable[dict[str, Any]]] | None = None, freeze: bool = True,
               raw_texts: bool = False) -> Pool:
    """Write a pool: ``units`` are (problem, seed, objects-or-texts) in order; duplicates allowed."""
    pool = Pool(root)
    pool.write_manifest({"kind": "synthetic", "K": max((len(o) for _, _, o in units), default=0)})
    problems: dict[str, Problem] = {}
    for p, _, _ in units:
        problems.setdefault(p.id, p)
    pool.write_problems(problems.values())
    rows = []
    for p, seed, objs in units:
        for i, obj in enumerate(objs):
            text = obj if raw_texts else trace_for(p, obj)
            rows.append({"problem_id": p.id, "source_id": p.source_id or p.id, "seed": seed, "candidate_index": i,
                         "text": text, "finish_reason": "stop", "num_tokens": len(text.split()), "mean_logprob": -1.0})
    pool.append_candidates(rows)
    if freeze:
        pool.freeze()
    for name, sel in (selections or {}).items():
        pool.write_selection(name, sel)
    return pool


def truncated_trace_pool(root: Path, n_problems: int = 24, k: int = 6, seed: int = 0) -> Path:
    """A PRM training pool: each candidate is a canonical (score-6) trace cut after a random number of
    lines, so the verifier totals span 0-6."""
    rng = random.Random(seed)
    probs = generate("backdoor_set", n_problems, GenConfig(seed=seed, n_nodes=(4, 5)))
    pool = Pool(root)
    pool.write_manifest({"sampling": {"k": k}, "toy": "truncated canonical traces"})
    pool.write_problems(probs)
    rows = []
    for p in probs:
        lines = canonical_trace(p).splitlines()
        for j in range(k):
            rows.append({"problem_id": p.id, "source_id": p.source_id, "seed": 0, "candidate_index": j,
                         "text": "\n".join(lines[: rng.randint(0, len(lines))]), "finish_reason": "stop",
                         "num_tokens": 0, "mean_logprob": None})
    pool.append_candidates(rows)
    return root


# ---- pools sampled through `calver sample` (refinement, router, judge audits) -----------------
def level_problems(task: str, n_sources: int, seed: int = 0, levels: Sequence[int] = (1, 2, 3),
                   all_levels: bool = True, **gen: Any) -> list[Problem]:
    """Constructed-mode problems of ``task`` rendered at each level (``constructed_problems``,
    round-trip filtered); ``all_levels`` keeps only sources admitted at every level. Ids end in
    ``-L<level>``; source ids are shared."""
    base = generate(task, n_sources, GenConfig(seed=seed, **gen))
    by_level = {lv: constructed_problems(base, lv, random.Random(f"{seed}:{lv}"))[0] for lv in levels}
    keep = set.intersection(*({p.source_id for p in ps} for ps in by_level.values())) if all_levels else None
    return [p for lv in levels for p in by_level[lv] if keep is None or p.source_id in keep]


def demo_problems(task: str = "backdoor_set", n_supplied: int = 1, n_sources: int = 2, seed: int = 7,
                  levels: Sequence[int] = (1, 2, 3)) -> list[Problem]:
    """A small deterministic mix: ``n_supplied`` supplied-graph problems and ``n_sources`` sources
    rendered as constructed-mode L1/L2/L3 problems (the tiny-model pools of the tests)."""
    sup = generate(task, n_supplied, GenConfig(seed=seed + 1000)) if n_supplied else []
    return sup + level_problems(task, n_sources, seed=seed, levels=levels)


def sample_pool(problems: Sequence[Problem], out: str | Path, model: str | Path, *, sampler=None, k: int = 4,
                max_tokens: int = 48, seeds: Sequence[int] = (0,), temperature: float = 0.8, backend: str = "hf",
                log=lambda m: None) -> Pool:
    """Write ``problems`` (labels = their meta) and sample a frozen K-candidate pool at ``out`` through
    ``run_sample``; an existing complete pool with the same manifest is reused as is."""
    out = Path(out)
    src = out.parent / f"{out.name}.problems.jsonl"
    src.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"problem": p.to_dict(), "labels": dict(p.meta)}, sort_keys=True, default=list) + "\n"
                   for p in problems)
    if not src.exists() or src.read_text() != text:
        src.write_text(text)
    cfg = SampleConfig(problems=str(src), out=str(out), model=str(model), k=k, seeds=list(seeds), max_tokens=max_tokens,
                       temperature=temperature, backend=backend, model_hash="none", batch_units=4)
    return run_sample(cfg, sampler=sampler, log=log)


# ---- counting the verifier's score calls (score-once tests) ----------------------------------
# modules that bind ``score`` by name and run on a pool's candidates (imported before patching)
SCORE_USERS = ("calver.evaluation.units", "calver.evaluation.audit_runs", "calver.evaluation.audits",
               "calver.evaluation.policy", "calver.evaluation.grading", "calver.infer.refine.refine",
               "calver.infer.refine.feedback", "calver.infer.selectors.symbolic", "calver.train.prm",
               "calver.train.rewards", "calver.evaluation.evaluate")


def count_score_calls(monkeypatch) -> Counter:
    """Wrap ``calver.verifier.score`` wherever a calver module bound it; the Counter counts calls per
    (text, problem fingerprint)."""
    import importlib

    for name in SCORE_USERS:
        importlib.import_module(name)
    from calver.verifier import scoring

    original = scoring.score
    calls: Counter = Counter()

    def counting(text, problem):
        calls[(text, problem_fingerprint(problem))] += 1
        return original(text, problem)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("calver") and getattr(mod, "score", None) is original:
            monkeypatch.setattr(mod, "score", counting)
    return calls


def latent_projection(g: CausalGraph, no_out=()):
    """A networkx DiGraph of ``g`` with each bidirected edge as a latent parent ``L[a,b]`` of both ends, and
    the out-edges of ``no_out`` removed (the oracle graph for d-/m-separation via ``nx.is_d_separator``)."""
    import networkx as nx

    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    d.add_edges_from(e for e in g.directed if e[0] not in no_out)
    for a, b in g.bidirected:
        d.add_edges_from([(f"L[{a},{b}]", a), (f"L[{a},{b}]", b)])
    return d


def edges_as_read(block: str, encoding: str) -> tuple[list, list] | None:
    """The directed and bidirected edges of a rendered graph ``block`` in the order a reader meets them, read off
    the text itself (independent of the renderers): a parents map node by node, a matrix row by row; None for
    the formats that list their edges one by one."""
    directed: list = []
    bidirected: list = []
    if encoding == "json_parents":
        for child, entry in json.loads(block).items():
            directed += [(par, child) for par in entry["parents"]]
            bidirected += [tuple(sorted((child, s))) for s in entry.get("spouses", ())]
    elif encoding == "matrix":
        rows = [shlex.split(line) for line in block.split("\n")]
        for row in rows[1:]:
            for col, cell in zip(rows[0], row[1:]):
                if int(cell) & 1:
                    directed.append((row[0], col))
                if int(cell) & 2:
                    bidirected.append(tuple(sorted((row[0], col))))
    else:
        return None
    return list(dict.fromkeys(directed)), list(dict.fromkeys(bidirected))
