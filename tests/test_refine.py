"""``calver refine`` on a tiny-model pool (slow): real sampling for units without a max-score
candidate, immediate stop for units whose round-0 pool already holds one (a canonical trace put
into the pool), verifier feedback in the revision prompt, and the token-matched best-of-K'."""

from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

from fixtures import demo_problems, sample_pool  # noqa: E402

from calver.evaluation.audit_judges import canonical_for  # noqa: E402
from calver.evaluation.refine_eval import run_refine  # noqa: E402
from calver.infer.firewall import strip_problem  # noqa: E402
from calver.infer.pool import Pool  # noqa: E402
from calver.infer.refine.feedback import feedback_for  # noqa: E402
from calver.infer.refine.refine import RefineConfig  # noqa: E402


class Recording:
    """Forwards to the real sampler and keeps every prompt it was given."""

    def __init__(self, sampler):
        self.inner, self.calls = sampler, []

    def generate(self, prompts, cfg=None, seeds=None, **kw):
        self.calls.append((list(prompts), cfg))
        return self.inner.generate(prompts, cfg, seeds, **kw)

    def encode(self, prompt):
        return self.inner.encode(prompt)


@pytest.fixture(scope="module")
def pools(tiny_model_dir, tmp_path_factory):
    shared = sample_pool(demo_problems(), tmp_path_factory.getbasetemp() / "refine_shared_pool", tiny_model_dir,
                         k=2, max_tokens=12)
    root = tmp_path_factory.mktemp("refine") / "pool"
    shutil.copytree(shared.root, root)
    (root / "FROZEN").unlink()
    pool = Pool(root)
    problems, labels = pool.problems(), pool.labels()
    solved = sorted(problems)[::2]  # every other problem gets a max-score trace at candidate 1
    rows = list(pool.candidate_rows())
    for r in rows:
        if r["problem_id"] in solved and r["candidate_index"] == 1:
            from calver.evaluation.grading import grading_problem

            r["text"] = canonical_for(grading_problem(problems[r["problem_id"]], labels.get(r["problem_id"])))
    pool.rewrite_candidates(rows)
    return pool, set(solved)


def test_refine_stops_at_max_score_and_feeds_back(pools, tiny_model_dir, tmp_path):
    from calver.infer.sampler import make_sampler

    pool, solved = pools
    rec = Recording(make_sampler(tiny_model_dir, backend="hf"))
    res = run_refine(pool, rec, RefineConfig(rounds=2, max_tokens=12, draws=200), tmp_path / "out")
    units = {u["problem_id"]: u for u in res["units"]}
    assert len(units) == 7 and solved
    for pid, u in units.items():
        if pid in solved:  # round 0 already has a max-score candidate: no revision is sampled
            assert u["stop"] == "pool_max" and u["rounds"] == []
            assert u["refine"]["score"] == 6 and u["refine"]["correct"] and u["refine"]["index"] == 1
            assert u["best_of_K'"]["tokens"] == u["calver@K"]["tokens"]  # nothing to match
        else:  # the random tiny model never reaches 6: all T rounds run
            assert u["stop"] == "rounds" and [r["round"] for r in u["rounds"]] == [1, 2]
            assert all(r["feedback"] for r in u["rounds"])
            spent = u["refine"]["tokens"] - u["calver@K"]["tokens"]
            assert spent > 0 and u["best_of_K'"]["tokens"] - u["calver@K"]["tokens"] >= spent
            assert u["best_of_K'"]["tokens"] - u["calver@K"]["tokens"] < spent + 12  # overshoot < one sample
    # the revision prompts carry the verifier feedback on the revised candidate, as the last user turn
    problems = {pid: strip_problem(p) for pid, p in pool.problems().items()}
    rev_calls = [c for c in rec.calls if any(len(p) == 4 for p in c[0])]
    assert len(rev_calls) == 2  # one batched call per round
    unsolved = sorted(set(units) - solved)
    first = rev_calls[0][0]
    assert len(first) == len(unsolved)
    texts = {u.problem_id: u.texts for u in pool.units()}
    for pid, msgs in zip([u for u in units if u not in solved], first):
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
        revised = texts[pid][units[pid]["rounds"][0]["revised"]]
        assert msgs[2]["content"] == revised
        assert msgs[3]["content"] == feedback_for(revised, problems[pid]) == units[pid]["rounds"][0]["feedback"]
        assert "STRATEGY" in msgs[3]["content"] and "Expected in" in msgs[3]["content"]
    s = res["summary"]
    assert s["stops"] == {"pool_max": len(solved), "rounds": len(unsolved)}
    assert s["arms"]["refine"]["max_score_rate"] == pytest.approx(len(solved) / 7)
    md = (tmp_path / "out" / "refine.md").read_text()
    assert "| refine |" in md and "| best_of_K' |" in md
    assert json.loads((tmp_path / "out" / "refine.json").read_text())["summary"]["units"] == 7


def test_refine_cli(pools, tiny_model_dir, tmp_path):
    from calver.cli import main

    pool, solved = pools
    out = tmp_path / "cli"
    rc = main(["refine", "--pool", str(pool.root), "--model", str(tiny_model_dir), "--backend", "hf", "--rounds", "1",
               "--max-tokens", "8", "--no-baseline", "--out", str(out)])
    assert rc == 0
    units = [json.loads(x) for x in (out / "refine_units.jsonl").read_text().splitlines()]
    assert {u["problem_id"] for u in units if u["stop"] == "pool_max"} == solved
    assert all(len(u["rounds"]) == 1 for u in units if u["stop"] != "pool_max")
    assert "best_of_K'" not in units[0]
