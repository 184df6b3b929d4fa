"""The verifier as a reward for other RL trainers, each spoken exactly as that trainer speaks it:
verl (:mod:`.verl`: ``compute_score`` / ``compute_score_async`` and the parquet exporter), OpenRLHF
(:mod:`.openrlhf`: the reward file; :mod:`.openrlhf_server`: its HTTP ``/get_reward``) and OpenEnv
(:mod:`.openenv_env`, served by ``calver serve-env``). TRL's adapter is :mod:`calver.train.rewards`.

Every adapter is a thin module over :mod:`calver.reward` (the verdict type, the reward spec, the scoring
engine, the options parser and the counters); the configuration lines for each trainer are in
``docs/integrations.md``. Torch-free at import (the OpenRLHF reward imports torch inside the call, only to
build its tensors).
"""
