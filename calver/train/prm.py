"""``calver train prm``: a distilled process reward model that regresses the verifier's 0-6 score.

Input: :func:`calver.infer.selectors.scorers.prm_text` of the problem's user text
(``calver.data_gen.prompts.user_text``, exactly what the infer ``prm`` selector passes) and the
candidate trace: a user turn with the chat template's generation prompt, then the trace
(left-truncated to ``max_length``). Label: ``score(trace, problem).total``, read from the pool's score
table (:mod:`calver.infer.score_table`: scored once on the firewall-stripped problem, stored beside the
pool) when that score was grounded; a constructed-mode candidate the stripped view cannot ground is
scored on the full problem (its source graph).
Model: ``AutoModelForSequenceClassification`` (num_labels=1, problem_type regression, pad token set)
on a frozen base with a LoRA adapter of task type SEQ_CLS (PEFT trains and saves the ``score`` head
with it). ``loss: mse`` (default): a transformers ``Trainer`` regresses the total. ``loss: ranking``: a
pairwise logistic loss between candidates of the same problem with different totals (a selector only
compares a pool's candidates, so only their order matters), each batch holding whole problems
(:class:`ProblemBatchSampler`). Either way it reports, every epoch, validation RMSE (and the RMSE of
predicting the training mean) and the within-problem pair accuracy (the share of same-problem pairs
with different totals that the PRM orders as the verifier does; 0.5 is chance), and keeps the best
checkpoint (by RMSE, or by pair accuracy under ``ranking``).

Output dir: the adapter (+ head), the tokenizer, ``calver_prm.json`` (base model, input format) and
``calver_train_summary.json``. Inference lives on the infer side:
``calver.infer.selectors.load_prm(path).score(problem_text, trace) -> float`` (on the 0-6 scale).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterable, Sequence

from calver.infer.selectors.scorers import INPUT_FORMAT, PRM_META_FILE, load_seq_cls, prm_text
from calver.train.common import (
    ConfigError,
    TrainRun,
    check_precision,
    load_tokenizer,
    model_init_kwargs,
    peft_config,
    quantization_config,
    resolve_mode,
    step_timer,
    trainable_parameter_count,
    write_summary,
)


# ---- examples -----------------------------------------------------------------------------------
def prm_examples(pool_paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """One example per pool candidate: ``problem_id``, ``problem_text``, ``trace``, ``label`` (0-6)."""
    from calver.data_gen.prompts import user_text
    from calver.infer.pool import PoolError
    from calver.infer.score_table import source_verdicts

    out: list[dict[str, Any]] = []
    for root in pool_paths:
        try:
            verdicts = source_verdicts(root)
        except PoolError as e:
            raise ConfigError(f"pool {root}: {e}") from None
        texts: dict[str, str] = {}
        for row, prob, verdict in verdicts:
            pid = row["problem_id"]
            if pid not in texts:
                texts[pid] = user_text(prob)
            out.append({"problem_id": f"{root}::{pid}", "problem_text": texts[pid], "trace": row.get("text") or "",
                        "label": float(verdict.total)})
    if not out:
        raise ConfigError(f"no candidates in pool(s) {list(map(str, pool_paths))}")
    return out


def split_by_problem(examples: list[dict[str, Any]], eval_fraction: float, seed: int):
    """(train, eval): whole problems are held out, so no problem is seen on both sides."""
    if not 0.0 < eval_fraction < 1.0:
        raise ConfigError(f"field 'eval_fraction' must be in (0, 1), got {eval_fraction}")
    pids = sorted({e["problem_id"] for e in examples})
    if len(pids) < 2:
        raise ConfigError("the PRM needs candidates of at least 2 problems to hold one out")
    random.Random(seed).shuffle(pids)
    n_eval = min(len(pids) - 1, max(1, round(eval_fraction * len(pids))))
    held = set(pids[:n_eval])
    return [e for e in examples if e["problem_id"] not in held], [e for e in examples if e["problem_id"] in held]


def problem_groups(examples: list[dict[str, Any]]) -> list[int]:
    """Each example's problem as a small integer (first-seen order)."""
    index: dict[str, int] = {}
    return [index.setdefault(e["problem_id"], len(index)) for e in examples]


def _tokenize(tokenizer, examples: list[dict[str, Any]], max_length: int, with_groups: bool = False):
    from datasets import Dataset

    texts = [prm_text(tokenizer, e["problem_text"], e["trace"]) for e in examples]
    enc = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=False)
    cols = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "labels": [float(e["label"]) for e in examples]}
    if with_groups:
        cols["group"] = problem_groups(examples)
    return Dataset.from_dict(cols)


def pair_accuracy(preds: Sequence[float], labels: Sequence[float], groups: Sequence[int]) -> float:
    """Share of same-group pairs with different labels that ``preds`` order as ``labels`` do (a tie counts
    one half); NaN without such a pair. The within-problem AUROC of a multi-level label."""
    import numpy as np

    p, y, g = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (preds, labels, groups))
    right = total = 0.0
    for grp in np.unique(g):
        m = g == grp
        dp = p[m][:, None] - p[m][None, :]
        higher = y[m][:, None] > y[m][None, :]
        total += higher.sum()
        right += (dp[higher] > 0).sum() + 0.5 * (dp[higher] == 0).sum()
    return float(right / total) if total else float("nan")


def regression_metrics(train_mean: float, eval_groups: Sequence[int]):
    """``compute_metrics`` for the Trainer: RMSE, MAE, the RMSE of always predicting ``train_mean``, and the
    within-problem pair accuracy (``eval_groups``: the eval examples' problems, in eval-set order)."""
    import numpy as np

    def compute(eval_pred) -> dict[str, float]:
        preds, labels = eval_pred
        preds = np.asarray(preds, dtype=np.float64).reshape(-1)
        labels = np.asarray(labels, dtype=np.float64).reshape(-1)
        return {"rmse": float(np.sqrt(np.mean((preds - labels) ** 2))),
                "mae": float(np.mean(np.abs(preds - labels))),
                "rmse_mean_baseline": float(np.sqrt(np.mean((train_mean - labels) ** 2))),
                "pair_accuracy": pair_accuracy(preds, labels, eval_groups)}

    return compute


class ProblemBatchSampler:
    """Batches of whole problems (a problem with more candidates than ``batch_size`` is cut into chunks), packed
    once (first fit, largest first: the batch count, which the Trainer's schedule reads, stays fixed) and
    visited in a fresh seeded order each epoch: a pairwise loss needs a problem's candidates side by side."""

    def __init__(self, groups: Sequence[int], batch_size: int, seed: int = 0) -> None:
        if batch_size < 2:
            raise ConfigError(f"loss 'ranking' needs per_device_train_batch_size >= 2, got {batch_size}")
        self.seed, self.epoch = seed, 0
        members: dict[int, list[int]] = {}
        for i, g in enumerate(groups):
            members.setdefault(int(g), []).append(i)
        chunks = [idx[k:k + batch_size] for idx in members.values() for k in range(0, len(idx), batch_size)]
        self.batches: list[list[int]] = []
        for chunk in sorted(chunks, key=len, reverse=True):
            home = next((b for b in self.batches if len(b) + len(chunk) <= batch_size), None)
            if home is None:
                self.batches.append(list(chunk))
            else:
                home.extend(chunk)

    def __iter__(self):
        order = list(self.batches)
        random.Random(self.seed + self.epoch).shuffle(order)
        self.epoch += 1
        return iter(order)

    def __len__(self) -> int:
        return len(self.batches)


def _ranking_trainer_class():
    import torch
    from transformers import Trainer

    class RankingTrainer(Trainer):
        """Pairwise logistic loss between candidates of one problem: -log sigmoid(s_i - s_j) for every pair whose
        verifier totals say i > j, averaged over the batch's pairs."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            inputs = dict(inputs)
            labels, groups = inputs.pop("labels"), inputs.pop("group")
            outputs = model(**inputs)
            s = outputs.logits.reshape(-1).float()
            pairs = (groups[:, None] == groups[None, :]) & (labels[:, None] > labels[None, :])
            loss = (torch.nn.functional.softplus(-(s[:, None] - s[None, :]))[pairs].mean() if pairs.any()
                    else s.sum() * 0.0)  # a batch without a pair: no signal, the graph kept for DDP
            return (loss, outputs) if return_outputs else loss

        def get_train_dataloader(self):
            from torch.utils.data import DataLoader

            data = self.train_dataset
            sampler = ProblemBatchSampler(data["group"], self._train_batch_size, self.args.seed)
            return self.accelerator.prepare(DataLoader(data, batch_sampler=sampler, collate_fn=self.data_collator,
                                                       num_workers=self.args.dataloader_num_workers,
                                                       pin_memory=self.args.dataloader_pin_memory))

    return RankingTrainer


# ---- model --------------------------------------------------------------------------------------
def build_prm_trainer(script_args, training_args, model_args, callbacks: Sequence[Any] = ()):
    """(Trainer, mode, info) for the distilled PRM; ``info`` holds split sizes and the mean baseline."""
    from peft import get_peft_model, prepare_model_for_kbit_training
    from transformers import DataCollatorWithPadding, Trainer

    if not script_args.pool_paths:
        raise ConfigError("field 'pool_paths' must list at least one candidate pool directory")
    if not model_args.model_name_or_path:
        raise ConfigError("field 'model_name_or_path' is required (the PRM base, e.g. Qwen/Qwen2.5-0.5B-Instruct)")
    mode = resolve_mode(script_args, model_args)
    check_precision(training_args)
    base = model_args.model_name_or_path
    examples = prm_examples(script_args.pool_paths)
    train_ex, eval_ex = split_by_problem(examples, script_args.eval_fraction, script_args.split_seed)
    if script_args.max_examples is not None:
        train_ex = train_ex[: script_args.max_examples]
    tok = load_tokenizer(base, script_args.trust_remote_code, model_args.model_revision)
    tok.truncation_side = "left"  # keep the trace's end, where RESULT/ANSWER sit
    kw = model_init_kwargs(model_args, script_args)
    q = quantization_config(model_args)
    if q is not None:
        kw["quantization_config"] = q
    model = load_seq_cls(base, tok, **kw)
    if mode != "full":
        if q is not None:
            model = prepare_model_for_kbit_training(
                model, use_gradient_checkpointing=training_args.gradient_checkpointing)
        model = get_peft_model(model, peft_config(model_args, task_type="SEQ_CLS"))
    train_mean = sum(e["label"] for e in train_ex) / len(train_ex)
    ranking = script_args.loss == "ranking"
    training_args.metric_for_best_model = training_args.metric_for_best_model or \
        ("pair_accuracy" if ranking else "rmse")
    training_args.greater_is_better = training_args.metric_for_best_model not in ("rmse", "eval_rmse", "mae",
                                                                                   "eval_mae")
    if ranking:
        training_args.remove_unused_columns = False  # the loss reads the `group` column
    trainer = (_ranking_trainer_class() if ranking else Trainer)(
        model=model,
        args=training_args,
        train_dataset=_tokenize(tok, train_ex, script_args.max_length, with_groups=ranking),
        eval_dataset=_tokenize(tok, eval_ex, script_args.max_length, with_groups=ranking),
        processing_class=tok,
        data_collator=DataCollatorWithPadding(tok),
        compute_metrics=regression_metrics(train_mean, problem_groups(eval_ex)),
        callbacks=list(callbacks),
    )
    info = {"loss": script_args.loss, "train_examples": len(train_ex), "eval_examples": len(eval_ex),
            "train_label_mean": train_mean,
            "eval_problems": len({e["problem_id"] for e in eval_ex}),
            "label_histogram": {str(k): sum(1 for e in examples if e["label"] == k) for k in range(7)}}
    return trainer, mode, info


def run_prm(script_args, training_args, model_args) -> TrainRun:
    timer = step_timer()
    trainer, mode, info = build_prm_trainer(script_args, training_args, model_args, callbacks=[timer])
    trainable, total = trainable_parameter_count(trainer.model)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    final = trainer.evaluate()  # the kept (best) checkpoint when load_best_model_at_end
    out = Path(training_args.output_dir)
    trainer.save_model(str(out))
    history = [{"epoch": h.get("epoch"), "eval_rmse": h["eval_rmse"], "eval_mae": h.get("eval_mae"),
                "eval_pair_accuracy": h.get("eval_pair_accuracy")} for h in timer.log_history if "eval_rmse" in h]
    summary = {
        "trainer": "prm",
        "mode": mode,
        "model": model_args.model_name_or_path,
        "output_dir": str(out),
        "trainable_params": trainable,
        "total_params": total,
        **info,
        "eval_rmse_per_epoch": history[:-1] if history and len(history) > 1 else history,
        "best_eval_rmse": final.get("eval_rmse"),
        "eval_rmse_mean_baseline": final.get("eval_rmse_mean_baseline"),
        "best_eval_pair_accuracy": final.get("eval_pair_accuracy"),
        "best_checkpoint": trainer.state.best_model_checkpoint,
        **timer.summary(),
    }
    if trainer.accelerator.is_main_process:
        (out / PRM_META_FILE).write_text(json.dumps({
            "base_model": str(Path(model_args.model_name_or_path).resolve())
            if Path(model_args.model_name_or_path).exists() else model_args.model_name_or_path,
            "mode": mode, "input_format": INPUT_FORMAT, "max_length": script_args.max_length,
            "label_range": [0, 6], "trust_remote_code": script_args.trust_remote_code,
        }, indent=2))
        write_summary(out, summary)
    return TrainRun(trainer, summary)


def main(argv: Sequence[str] | None = None, config: str | None = None) -> TrainRun:
    """Entry point for ``accelerate launch -m calver.train.prm --config FILE [--field value ...]``."""
    from calver.train.common import split_config_arg
    from calver.train.prm_config import load_prm_config

    config, overrides = split_config_arg(argv, config)
    return run_prm(*load_prm_config(config, overrides))


if __name__ == "__main__":
    main()
