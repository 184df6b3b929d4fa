"""GRPO prompts filtered to mixed groups: only problems whose sampled candidates' rewards differ are kept."""

from __future__ import annotations

import json

import pytest
from fixtures import backdoor_problem, build_pool, claim_valid, trace_for
from testing_utils import require_modules

from calver.reward.spec import RewardSpec
from calver.train.prompt_filter import keep_mixed, mixed_problem_ids


def _pool(tmp_path):
    same = backdoor_problem("same", graph="Z -> X, Z -> Y, X -> Y")
    mixed = backdoor_problem("mixed", graph="Z -> X, Z -> Y, X -> Y, W -> X")
    bad = backdoor_problem("bad", graph="Z -> X, Z -> Y, X -> Y, X -> M, M -> Y")
    units = [(same, 0, [{"Z"}] * 3),  # valid every time
             (mixed, 0, [{"Z"}, {"Z", "W"}, set()]),  # the empty set misses Z's backdoor path
             (bad, 0, [claim_valid(trace_for(bad, {"M"}))] * 2 + ["no trace at all"])]
    rows = [(p, s, [o if isinstance(o, str) else trace_for(p, o) for o in objs]) for p, s, objs in units]
    return build_pool(str(tmp_path / "pool"), rows, raw_texts=True)


def test_keeps_the_problems_whose_rewards_differ(tmp_path):
    pool = _pool(tmp_path)
    ids, counts = mixed_problem_ids(str(pool.root), RewardSpec("strict"))
    # strict: the invalid {M} and the text with no slots both get 0, so "bad" is a group of equal rewards
    assert ids == {"mixed"} and counts == {"problems": 3, "mixed": 1, "all_same": 2}
    # fraction: the {M} trace earns its copy bits and the text none, so "bad" differs too
    assert mixed_problem_ids(str(pool.root), RewardSpec("fraction"))[0] == {"mixed", "bad"}


@require_modules("datasets")
def test_filters_a_dataset_by_problem_id():
    from datasets import Dataset

    ds = Dataset.from_list([{"problem_json": json.dumps({"id": i}), "prompt": i} for i in ("a", "b", "c")])
    assert keep_mixed(ds, {"b", "c"}, "problem_json")["prompt"] == ["b", "c"]


def test_unknown_problem_in_pool_is_an_error(tmp_path):
    pool = _pool(tmp_path)
    (pool.root / "problems.jsonl").write_text("")
    with pytest.raises(ValueError, match="problem 'same', which problems.jsonl lacks"):
        mixed_problem_ids(str(pool.root), RewardSpec("fraction"))


@require_modules("datasets")
def test_grpo_keeps_only_mixed_prompts_and_refuses_when_none_are(tmp_path):
    from types import SimpleNamespace

    from datasets import Dataset

    from calver.config import ConfigError
    from calver.train.grpo import mixed_prompts
    from calver.train.rewards import VerifierReward

    pool = _pool(tmp_path)
    ds = Dataset.from_list([{"problem_json": json.dumps({"id": i}), "prompt": i} for i in ("same", "mixed", "bad")])
    args = SimpleNamespace(mixed_groups_from=str(pool.root), problem_column="problem_json")
    assert mixed_prompts(ds, args, VerifierReward("strict"))["prompt"] == ["mixed"]
    with pytest.raises(ConfigError, match="no training prompt had mixed rewards"):
        mixed_prompts(ds.select([0]), args, VerifierReward("strict"))
    with pytest.raises(ConfigError, match="mixed_groups_from"):
        mixed_prompts(ds, SimpleNamespace(mixed_groups_from=str(tmp_path / "none"), problem_column="problem_json"),
                      VerifierReward("strict"))
