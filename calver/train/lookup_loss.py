"""A heavier loss on the rationale's looked-up edges, in the trace's own context (``--lookup_loss_weight``).

A rule rationale (``Rule: adjust for the parents of F. Edges into F: O -> F, Y -> F.``) writes the lookup every
family's answer waits on; a 135M policy learns every other line of its rows and not that one, and drills that ask
for the lookup alone are learned as drills without moving the lookups inside traces. This weights the tokens of
each lookup's edge list (what ``calver.data_gen.rationales.LOOKUP_RE`` reads back: ``O -> F, Y -> F`` or ``none``)
``weight`` times in TRL's token-mean loss, where the trace uses them, at no extra forward pass: the loss is
``sum(w_t * nll_t) / N`` over the N trained tokens, so a weight of 1 is TRL's own loss, term for term.

TRL tokenizes and masks the rows as usual; the weights are added after, from the rendered chat text's character
offsets, which must tokenize to the very ids TRL trained on (checked per row).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from calver.config import ConfigError
from calver.data_gen.rationales import LOOKUP_RE

WEIGHTS = "loss_weights"


def lookup_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the edge lists the lookups in ``text`` state (``LOOKUP_RE``'s fourth group)."""
    return [m.span(4) for m in LOOKUP_RE.finditer(text)]


def token_weights(offsets: Sequence[tuple[int, int]], labels: Sequence[int], spans: Sequence[tuple[int, int]],
                  weight: float) -> list[float]:
    """Per-token loss weights: 0 where the label is ignored (-100), ``weight`` for a token that overlaps a lookup
    span, 1 otherwise. ``offsets[i]`` is token i's character span in the text the spans index."""
    out = []
    for (a, b), label in zip(offsets, labels):
        if label == -100:
            out.append(0.0)
        elif any(a < e and s < b for s, e in spans):
            out.append(float(weight))
        else:
            out.append(1.0)
    return out


def check_weight(weight: float, args) -> None:
    """A clear error for a weight the loss cannot use, or a batching mode that would drop the weights."""
    if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
        raise ConfigError(f"lookup_loss_weight must be a finite number > 0, got {weight!r}")
    if weight != 1 and (getattr(args, "packing", False) or getattr(args, "padding_free", False)):
        raise ConfigError("lookup_loss_weight other than 1 needs padded batches: set packing and padding_free "
                          "to false (packing and padding-free batches drop the per-token weights)")
    if weight != 1 and getattr(args, "truncation_mode", "keep_start") != "keep_start":
        raise ConfigError("lookup_loss_weight other than 1 places its weights from each row's start: set "
                          "truncation_mode to keep_start")


def _row_weights(example: dict[str, Any], tokenizer, chat_template, weight: float) -> dict[str, list[float]]:
    messages = example["messages"]
    text = tokenizer.apply_chat_template(messages, tokenize=False, chat_template=chat_template)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, labels = example["input_ids"], example["labels"]
    if enc["input_ids"][: len(ids)] != list(ids):
        raise RuntimeError("lookup_loss_weight: the rendered chat text does not tokenize to the ids TRL trained on "
                           f"(row starting {text[:80]!r}); the weights cannot be placed on its tokens")
    content = messages[-1]["content"]
    base = text.rfind(content)
    if messages[-1].get("role") != "assistant" or base < 0:
        raise RuntimeError("lookup_loss_weight: a row's last message is not an assistant turn rendered verbatim "
                           f"(row starting {text[:80]!r})")
    spans = [(base + s, base + e) for s, e in lookup_spans(content)]
    return {WEIGHTS: token_weights(enc["offset_mapping"][: len(ids)], labels, spans, weight)}


def add_loss_weights(dataset, tokenizer, chat_template, weight: float, num_proc: int | None = None):
    """``dataset`` (TRL-prepared: ``input_ids``, ``labels`` and the source ``messages``) with a ``loss_weights``
    column aligned to ``input_ids``."""
    if "messages" not in dataset.column_names or "labels" not in dataset.column_names:
        raise RuntimeError("lookup_loss_weight needs chat rows ('messages') that TRL tokenized and labelled; got "
                           f"columns {dataset.column_names}")
    return dataset.map(_row_weights, fn_kwargs={"tokenizer": tokenizer, "chat_template": chat_template,
                                                "weight": weight}, num_proc=num_proc,
                       desc="Weighting the rationale's lookups")


def weight_counts(weights: Sequence[Sequence[float]], weight: float) -> dict[str, int]:
    """How many tokens carry loss (``trained_tokens``) and how many of them weigh ``weight`` (``lookup_tokens``)."""
    return {"trained_tokens": sum(1 for row in weights for x in row if x > 0),
            "lookup_tokens": sum(1 for row in weights for x in row if x == weight)}


class WeightPaddingCollator:
    """Wraps TRL's collator: pads each row's ``loss_weights`` with zeros to the batch's ``input_ids`` width."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch
        from trl.trainer.utils import pad

        if not examples or WEIGHTS not in examples[0]:
            return self.inner(examples)
        batch = self.inner([{k: v for k, v in ex.items() if k != WEIGHTS} for ex in examples])
        # each row's weights are as long as its input ids, so TRL's own padding gives the batch's width
        batch[WEIGHTS] = pad([torch.tensor(ex[WEIGHTS], dtype=torch.float32) for ex in examples], padding_value=0.0,
                             padding_side="right", pad_to_multiple_of=getattr(self.inner, "pad_to_multiple_of", None))
        return batch


def weighted_sft_trainer_class():
    """``SFTTrainer`` whose training loss weights each token by the batch's ``loss_weights`` (built lazily: the
    core install has no torch)."""
    from trl import SFTTrainer

    class LookupWeightedSFTTrainer(SFTTrainer):
        """TRL's SFTTrainer plus the lookup weights; evaluation keeps TRL's plain loss."""

        def __init__(self, *args, lookup_loss_weight: float, **kwargs) -> None:
            self.lookup_loss_weight = float(lookup_loss_weight)
            super().__init__(*args, **kwargs)
            if self.compute_loss_func is not None or self.label_smoother is not None or self.args.loss_type != "nll":
                raise ConfigError("lookup_loss_weight weights TRL's plain token loss: it needs loss_type nll, no "
                                  "label smoothing and no compute_loss_func")
            if self._skip_prepare_dataset:
                raise ConfigError("lookup_loss_weight needs TRL's dataset preparation (the weights are placed on "
                                  "its tokens): drop dataset_kwargs' skip_prepare_dataset")
            self.data_collator = WeightPaddingCollator(self.data_collator)

        def _prepare_dataset(self, dataset, processing_class, args, packing, formatting_func, dataset_name):
            prepared = super()._prepare_dataset(dataset, processing_class, args, packing, formatting_func,
                                                dataset_name)
            if dataset_name != "train":
                return prepared
            weighted = add_loss_weights(prepared, getattr(processing_class, "tokenizer", processing_class),
                                        self.chat_template, self.lookup_loss_weight, args.dataset_num_proc)
            self.token_counts = weight_counts(weighted[WEIGHTS], self.lookup_loss_weight)
            return weighted

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            if WEIGHTS not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, WEIGHTS]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weights = inputs.pop(WEIGHTS, None)
            if weights is None or not model.training:
                return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                            num_items_in_batch=num_items_in_batch)
            # TRL's fused forward yields per-token log-probabilities; catch them rather than run a second forward
            seen: list[Any] = []
            handle = model.register_forward_hook(lambda _m, _a, out: seen.append(out))
            try:
                loss = super().compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)
            finally:
                handle.remove()
            log_probs = getattr(seen[0], "log_probs", None) if len(seen) == 1 else None
            if log_probs is None:
                raise RuntimeError("lookup_loss_weight: TRL's training forward returned no per-token log-probabilities "
                                   "(a loss path other than the fused LM head's is in use)")
            # [batch, seq - 1], aligned with labels[:, 1:]; ignored and padded positions weigh 0 and log-prob 0
            extra = weights[:, 1:].to(log_probs.device, log_probs.dtype) - 1.0
            if extra.shape != log_probs.shape:
                raise RuntimeError(f"lookup weights {tuple(extra.shape)} do not align with the per-token "
                                   f"log-probabilities {tuple(log_probs.shape)}")
            n = seen[0].label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            added = (-log_probs * extra).sum() / _at_least_one(n)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                added = added * (self.accelerator.num_processes // self.get_tp_size())
            loss = loss + added
            return (loss, seen[0]) if return_outputs else loss

    return LookupWeightedSFTTrainer


def _at_least_one(n):
    """``n`` (a tensor or an int) as a tensor, at least 1 (a batch with no trained token adds 0, not 0 / 0)."""
    import torch

    return torch.as_tensor(n).clamp(min=1)
