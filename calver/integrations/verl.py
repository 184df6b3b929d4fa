"""The verifier as a verl custom reward function, and a ``calver gen`` dataset in verl's parquet layout.

verl calls ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)`` once
per response (``solution_str`` is the decoded response, special tokens skipped); a dict return must hold
``"score"`` and its other keys are kept per sample (logged, dumped with generations, and read by the GDPO
advantage estimator through ``algorithm.gdpo_reward_keys``). Configure it with::

    reward.custom_reward_function.path=pkg://calver.integrations.verl
    reward.custom_reward_function.name=compute_score

Return value (every key always present, every value a number, so verl's per-key columns stay aligned)::

    {"score": float, "graph": 0|1, "query": 0|1, "strategy": 0|1, "derivation": 0|1, "result": 0|1,
     "answer": 0|1, "unscorable": 0|1}

``score`` is the reward variant's value (:class:`calver.reward.RewardSpec`: ``variant="fraction"`` S/6,
``"strict"``, ``"weighted"`` with ``weights``, ``"validity"``; pass them as ``reward_kwargs``, with
``budget_s``/``workers``/``allow_ungrounded``; a bad one raises, and verl stops the run naming it). An
unscorable row gets ``score`` 0.0, all bits 0 and ``unscorable`` 1 (verl has no per-sample None; see
:mod:`calver.reward.spec` for why 0.0).

``compute_score_async`` is the same as a coroutine (``reward.custom_reward_function.name=compute_score_async``):
verl awaits it in its reward loop instead of running it in the loop's default executor; scoring runs in a
thread, and concurrent samples share the worker pool when ``budget_s``/``workers`` are set.

What verl logs when (0.9.1): the bit keys become training metrics only under ``algorithm.adv_estimator=gdpo``
for the keys in ``algorithm.gdpo_reward_keys``; otherwise they appear in validation metrics (per
``data_source``) and in the rollout dumps when ``trainer.rollout_data_dir`` is set.

Prompt length: verl's default ``data.max_prompt_length`` is 512 tokens, and its agent loop left-truncates a
longer prompt with only a warning, cutting the contract's system message first. Set
``data.max_prompt_length=2048 data.max_response_length=1024`` (or ``data.filter_overlong_prompts=True``);
:func:`write_parquet` warns when prompts exceed ``max_prompt_tokens``.

Where the problem travels: ``extra_info["problem_json"]`` (``Problem.to_dict()`` as JSON, the ``calver gen``
``problem_json`` column). When it is missing, a ``ground_truth`` that is itself a problem JSON object is used.
The exporter writes ``reward_model.ground_truth`` as the row's validity class (every valid answer, JSON), for
people reading verl's dumps; the reward never needs it.

Parquet layout (one row per problem; verl's ``data_source``, chat-list ``prompt``, ``ability``,
``reward_model {style, ground_truth}``, ``extra_info``)::

    data_source   "calver/<task>"        (verl's validation metrics are split by it: per task)
    prompt        [{"role": "system", ...}, {"role": "user", ...}]
    ability       "causal_reasoning"
    reward_model  {"style": "rule", "ground_truth": <validity class JSON or "">}
    extra_info    {"index", "split", "id", "task", "source_id", "problem_json"}

Export: ``export_parquet(problems, path)`` or, from a ``calver gen --out DIR`` folder,
``python -m calver.integrations.verl --from DIR --out train.parquet``. Torch-free.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from calver.reward import ADAPTER_STATS, UNSCORABLE_REWARD, RewardOptions, score_batch
from calver.reward.options import FIELDS
from calver.reward.problems import check_grounded
from calver.verifier import BIT_KEYS, RowResult, Unscorable

logger = logging.getLogger(__name__)

DATA_SOURCE_PREFIX = "calver/"
ABILITY = "causal_reasoning"
RESULT_KEYS = ("score", *BIT_KEYS, "unscorable")
VERL_DEFAULT_PROMPT_TOKENS = 512  # verl 0.9.1's data.max_prompt_length
CHARS_PER_TOKEN = 3.5  # a conservative estimate for English + graph notation without a tokenizer


def _result(r: RowResult, options: RewardOptions) -> dict[str, float | int]:
    if isinstance(r, Unscorable):
        return _unscorable_result()
    return {"score": float(options.spec.value(r.bits)), **r.bit_map, "unscorable": 0}


def _unscorable_result() -> dict[str, float | int]:
    return {"score": UNSCORABLE_REWARD, **{k: 0 for k in BIT_KEYS}, "unscorable": 1}


def _problem_of(ground_truth: Any, extra_info: Any) -> Any:
    """The problem JSON for a row: ``extra_info["problem_json"]``, else a ``ground_truth`` holding one."""
    if isinstance(extra_info, dict):
        pj = extra_info.get("problem_json")
        if pj is not None:
            return pj
    if isinstance(ground_truth, dict) and "task" in ground_truth:
        return ground_truth
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            data = json.loads(ground_truth)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and "task" in data:
            return ground_truth
    return None


def compute_score(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                  extra_info: Any = None, **kwargs: Any) -> dict[str, float | int]:
    """verl's per-sample custom reward (see the module docstring for the returned dict).

    ``kwargs``: verl's own extras (ignored) and the reward options from
    ``reward.custom_reward_function.reward_kwargs`` (:class:`calver.reward.RewardOptions`: ``variant``,
    ``weights``, ``allow_ungrounded``, ``budget_s``, ``workers``). Raises ``ValueError`` only for a bad
    option (a configuration error); never for a row."""
    try:
        options = _options(tuple((k, _hashable(kwargs.get(k))) for k in FIELDS))
    except TypeError:  # an unhashable option value: parsed uncached (a bad one raises, naming it)
        options = RewardOptions.parse(kwargs)
    try:
        if not isinstance(solution_str, str):  # verl decodes a string; anything else is no response
            ADAPTER_STATS.add([Unscorable(f"solution_str is a {type(solution_str).__name__}, not text")])
            return _unscorable_result()
        problem = _problem_of(ground_truth, extra_info)  # None: an unscorable row ("no problem_json")
        return _result(score_batch([solution_str], [problem], options)[0], options)
    except Exception:  # noqa: BLE001 - verl stops the run on a raising reward; a bad row scores as unscorable
        logger.exception("calver verl reward: unexpected error")
        return _unscorable_result()


@functools.lru_cache(maxsize=64)
def _options(values: tuple[tuple[str, Any], ...]) -> RewardOptions:
    """The parsed options of one ``reward_kwargs`` set: verl passes the same ones with every sample."""
    return RewardOptions.parse(dict(values))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


async def compute_score_async(data_source: Any = None, solution_str: Any = None, ground_truth: Any = None,
                              extra_info: Any = None, **kwargs: Any) -> dict[str, float | int]:
    """:func:`compute_score` as a coroutine (scored in a thread; verl awaits it)."""
    return await asyncio.to_thread(compute_score, data_source, solution_str, ground_truth, extra_info, **kwargs)


# ---- export -------------------------------------------------------------------------------------
def to_verl_rows(grpo_rows: Iterable[dict[str, Any]], split: str = "train") -> list[dict[str, Any]]:
    """verl rows from ``calver gen`` GRPO rows (``calver.data_gen.export.to_grpo_rows`` / ``grpo.jsonl``)."""
    out = []
    for i, r in enumerate(grpo_rows):
        out.append({
            "data_source": DATA_SOURCE_PREFIX + str(r["task"]),
            "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in r["prompt"]],
            "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": r.get("validity_class_json") or ""},
            "extra_info": {"index": i, "split": split, "id": str(r.get("id") or ""), "task": str(r["task"]),
                           "source_id": str(r.get("source_id") or ""), "problem_json": r["problem_json"]},
        })
    return out


def _schema():
    import pyarrow as pa

    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(msg)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("index", pa.int64()), ("split", pa.string()), ("id", pa.string()),
                                  ("task", pa.string()), ("source_id", pa.string()),
                                  ("problem_json", pa.string())])),
    ])


def _check_grounded(grpo_rows: Sequence[dict[str, Any]]) -> None:
    from calver.verifier import Problem, prepare

    for r in grpo_rows:
        check_grounded(prepare(Problem.from_dict(json.loads(r["problem_json"]))))  # UngroundedProblemError


def check_prompt_lengths(grpo_rows: Sequence[dict[str, Any]], max_prompt_tokens: int, tokenizer: Any = None) -> int:
    """How many prompts exceed ``max_prompt_tokens`` (verl's ``data.max_prompt_length``), counted with
    ``tokenizer`` (its chat template) when given, else estimated at 3.5 characters per token; warns naming the
    longest. verl left-truncates a longer prompt, cutting the contract's system message first."""
    lengths = []
    for r in grpo_rows:
        msgs = r["prompt"]
        if tokenizer is not None:
            n = len(tokenizer.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True))
        else:
            n = int(sum(len(str(m.get("content", ""))) for m in msgs) / CHARS_PER_TOKEN) + 8 * len(msgs)
        lengths.append(n)
    over = [n for n in lengths if n > max_prompt_tokens]
    if over:
        logger.warning("verl export: %d of %d prompts exceed %d tokens (longest %d%s): verl left-truncates them, "
                       "cutting the system message first; set data.max_prompt_length=%d (or "
                       "data.filter_overlong_prompts=True)", len(over), len(lengths), max_prompt_tokens, max(over),
                       "" if tokenizer is not None else ", estimated", _round_up(max(over)))
    return len(over)


def _round_up(n: int) -> int:
    p = 512
    while p < n:
        p *= 2
    return p


def write_parquet(grpo_rows: Sequence[dict[str, Any]], path: str | Path, split: str = "train",
                  allow_ungrounded: bool = False, max_prompt_tokens: int = VERL_DEFAULT_PROMPT_TOKENS,
                  tokenizer: Any = None) -> int:
    """Write ``calver gen`` GRPO rows as a verl parquet file; returns the row count. Refuses an ungrounded
    problem (unless ``allow_ungrounded``): a data error is cheaper to stop here than to train on."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(f"the verl export needs pyarrow ({e}); install it with: pip install 'calver[data]'") from None
    grpo_rows = list(grpo_rows)
    if not grpo_rows:
        raise ValueError("verl export: no rows to write")
    if not allow_ungrounded:
        _check_grounded(grpo_rows)
    check_prompt_lengths(grpo_rows, max_prompt_tokens, tokenizer)
    table = pa.Table.from_pylist(to_verl_rows(grpo_rows, split), schema=_schema())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path))
    return table.num_rows


def export_parquet(problems: Iterable[Any], path: str | Path, *, split: str = "train", encoding: str | None = None,
                   allow_ungrounded: bool = False) -> int:
    """Write ``Problem`` objects as a verl parquet file (prompts as ``calver gen`` renders them)."""
    from calver.data_gen.export import to_grpo_rows

    return write_parquet(to_grpo_rows(list(problems), encoding), path, split, allow_ungrounded)


def read_gen_rows(source: str | Path) -> list[dict[str, Any]]:
    """GRPO rows of a ``calver gen --out DIR`` dataset: ``DIR/grpo.jsonl`` (the exact prompts it wrote), else
    ``DIR/problems.jsonl`` rendered again; ``source`` may also name one of those files."""
    src = Path(source)
    if src.is_dir():
        cand = [src / "grpo.jsonl", src / "problems.jsonl"]
        found = next((c for c in cand if c.is_file()), None)
        if found is None:
            raise FileNotFoundError(f"{src} holds neither grpo.jsonl nor problems.jsonl (is it a `calver gen` "
                                    "output folder?)")
        src = found
    lines = [ln for ln in src.read_text(encoding="utf-8").splitlines() if ln.strip()]
    rows = [json.loads(ln) for ln in lines]
    if rows and "problem_json" in rows[0]:
        return rows
    from calver.data_gen.export import to_grpo_rows
    from calver.verifier import Problem

    return to_grpo_rows([Problem.from_dict(r) for r in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calver.integrations.verl",
                                 description="Write a `calver gen` dataset as a verl parquet file.")
    ap.add_argument("--from", dest="source", required=True,
                    help="a `calver gen --out` folder (or its grpo.jsonl / problems.jsonl)")
    ap.add_argument("--out", required=True, help="the parquet file to write")
    ap.add_argument("--split", default="train", help="written to extra_info.split (default: train)")
    ap.add_argument("--allow_ungrounded", action="store_true",
                    help="export constructed-mode problems without their source graph")
    ap.add_argument("--max_prompt_tokens", type=int, default=VERL_DEFAULT_PROMPT_TOKENS,
                    help="warn for prompts longer than this (verl's data.max_prompt_length; default 512)")
    args = ap.parse_args(argv)
    try:
        n = write_parquet(read_gen_rows(args.source), args.out, args.split, args.allow_ungrounded,
                          args.max_prompt_tokens)
    except (OSError, ValueError, KeyError, ImportError) as e:
        print(f"calver verl export: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {n} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
