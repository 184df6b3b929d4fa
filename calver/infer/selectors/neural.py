"""Neural comparators: model confidence, LLM judge, reward model, distilled PRM.

Each takes its model handle through the constructor. Without one it re-selects from the scores an
earlier run stored in the pool (``view.stored[name]``) and raises ``SelectorError`` if there are
none. Each scorer selects the earliest candidate attaining its maximum score; a score that could not
be computed (unparsable judge reply) is NaN and never wins. torch/transformers load lazily.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from calver.infer.firewall import SelectorView
from calver.infer.selectors.base import Selection, Selector, SelectorError, earliest_max

CONFIDENCE_QUESTION = (
    "Is the final answer in your response above correct? Reply with exactly one word: yes or no."
)
JUDGE_SYSTEM = (
    "You are a careful grader of causal-reasoning traces. You are given a causal graph (or its "
    "description), a query and a candidate trace. Judge only whether the trace's final answer is a "
    "valid answer to the query on that graph. No reference answer is available."
)
JUDGE_INSTRUCTION = "Rate the validity of the final answer from 0 (certainly invalid) to 10 (certainly valid). Reply as: SCORE: <0-10>"


class _Neural(Selector):
    neural = True

    def __init__(self) -> None:
        self._ready = False

    def has_model(self) -> bool:
        return False

    def score_pairs(self, views: Sequence[SelectorView], pairs: list[tuple[int, str]]) -> list[float]:
        """Scores for (view position, candidate text) pairs."""
        raise NotImplementedError

    def select(self, view: SelectorView) -> Selection:
        return self.select_many([view])[0]

    def select_many(self, views: Sequence[SelectorView]) -> list[Selection]:
        if not self.has_model():
            out = []
            for v in views:
                s = v.stored.get(self.name)
                if s is None:
                    raise SelectorError(
                        f"selector {self.name!r} has no model and the pool stores no {self.name!r} scores "
                        f"for unit {v.problem_id}/{v.seed}; pass a model (see `calver select --help`)"
                    )
                out.append(Selection(earliest_max(s), tuple(s)))
            return out
        pairs: list[tuple[int, str]] = []
        where: list[list[int]] = []
        for vi, v in enumerate(views):  # score each distinct text of a unit once
            seen: dict[str, int] = {}
            row = []
            for t in v.texts:
                if t not in seen:
                    seen[t] = len(pairs)
                    pairs.append((vi, t))
                row.append(seen[t])
            where.append(row)
        flat = self.score_pairs(views, pairs) if pairs else []
        out = []
        for row in where:
            s = tuple(float(flat[j]) for j in row)
            out.append(Selection(earliest_max(s), s))
        return out


def _prompt_messages(view: SelectorView) -> list[dict[str, str]]:
    from calver.infer.sample import prompt_messages

    return prompt_messages(view.problem)


# ---- policy self-evaluation ------------------------------------------------------------------
def parse_yes_no(text: str) -> float:
    m = re.search(r"\b(yes|no|true|false|correct|incorrect)\b", text.lower())
    if not m:
        return 0.0
    return 1.0 if m.group(1) in ("yes", "true", "correct") else 0.0


class _AskedThroughSampler(_Neural):
    """A selector that asks a model one greedy question per candidate through the shared sampler."""

    default_max_tokens = 16

    def __init__(self, sampler: Any = None, max_tokens: int | None = None) -> None:
        super().__init__()
        self.sampler = sampler
        self.max_tokens = max_tokens or self.default_max_tokens

    def has_model(self) -> bool:
        return self.sampler is not None

    def messages(self, view: SelectorView, trace: str) -> list[dict[str, str]]:
        raise NotImplementedError

    def parse(self, text: str) -> float:
        raise NotImplementedError

    def score_pairs(self, views, pairs):
        from calver.infer.sampler import SamplingConfig

        prompts = [self.messages(views[vi], t) for vi, t in pairs]
        cfg = SamplingConfig(temperature=0.0, max_tokens=self.max_tokens, n=1, logprobs=False)
        res = self.sampler.generate(prompts, cfg, seeds=[0] * len(prompts), progress=False)
        return [self.parse(r[0].text) for r in res]


class ConfidenceSelector(_AskedThroughSampler):
    """The policy's own binary self-evaluation (yes = 1), asked through the shared sampler (greedy)."""

    name = "confidence"
    default_max_tokens = 4

    def messages(self, view, trace):
        return _prompt_messages(view) + [{"role": "assistant", "content": trace},
                                         {"role": "user", "content": CONFIDENCE_QUESTION}]

    def parse(self, text):
        return parse_yes_no(text)


# ---- LLM judge ----------------------------------------------------------------------------------
def parse_judge_score(text: str) -> float:
    m = re.search(r"score\s*[:=]?\s*(-?\d+(?:\.\d+)?)", text, re.IGNORECASE) or re.search(r"(-?\d+(?:\.\d+)?)", text)
    if not m:
        return math.nan
    return min(10.0, max(0.0, float(m.group(1)))) / 10.0


def judge_messages(view: SelectorView, trace: str) -> list[dict[str, str]]:
    from calver.infer.sample import user_text

    body = user_text(view.problem)  # supplied mode: includes the graph; constructed: the text only
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"{body}\n\nCandidate trace:\n{trace}\n\n{JUDGE_INSTRUCTION}"},
    ]


class JudgeSelector(_AskedThroughSampler):
    """Reference-free LLM judge (graph + query + trace -> SCORE 0..10, scaled to [0, 1])."""

    name = "judge"

    def messages(self, view, trace):
        return judge_messages(view, trace)

    def parse(self, text):
        return parse_judge_score(text)


# ---- sequence-classification reward model ------------------------------------------------------
class SeqClsScorer:
    """Any HF ``AutoModelForSequenceClassification`` (e.g. Skywork-Reward-V2): logit 0 is the reward.

    ``with_problem``: score the chat [user: prompt, assistant: trace] (chat template when the
    tokenizer has one); otherwise the trace alone.
    """

    def __init__(self, path: str | Path, *, device: str | None = None, batch_size: int = 8, max_length: int = 4096):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path = str(path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tok = AutoTokenizer.from_pretrained(self.path)
        self.tok.truncation_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.model = AutoModelForSequenceClassification.from_pretrained(self.path, num_labels=1, dtype=dtype)
        self.model.config.pad_token_id = self.tok.pad_token_id
        self.model.to(self.device).eval()
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, int(limit))
        self.batch_size = batch_size

    def text(self, prompt: str | None, trace: str) -> str:
        if prompt is None:
            return trace
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(
                [{"role": "user", "content": prompt}, {"role": "assistant", "content": trace}], tokenize=False
            )
        return f"{prompt}\n\n{trace}"

    def score_texts(self, texts: list[str]) -> list[float]:
        import torch

        out: list[float] = []
        for i in range(0, len(texts), self.batch_size):
            enc = self.tok(texts[i : i + self.batch_size], return_tensors="pt", padding=True, truncation=True,
                           max_length=self.max_length, add_special_tokens=False).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            out += [float(x) for x in logits[:, 0].tolist()]
        return out

    def score(self, problem_text: str | None, trace: str) -> float:
        return self.score_texts([self.text(problem_text, trace)])[0]


class RewardModelSelector(_Neural):
    """Reward model; ``with_problem=False`` gives the trace-only variant (name ``reward_model_trace``)."""

    name = "reward_model"

    def __init__(self, model_path: str | Path | None = None, *, with_problem: bool = True, scorer: SeqClsScorer | None = None,
                 **kwargs: Any) -> None:
        super().__init__()
        self.with_problem = with_problem
        self.name = "reward_model" if with_problem else "reward_model_trace"
        self.scorer = scorer if scorer is not None else (SeqClsScorer(model_path, **kwargs) if model_path else None)

    def has_model(self) -> bool:
        return self.scorer is not None

    def score_pairs(self, views, pairs):
        from calver.infer.sample import user_text

        prompts = {}
        texts = []
        for vi, t in pairs:
            p = None
            if self.with_problem:
                if vi not in prompts:
                    prompts[vi] = user_text(views[vi].problem)
                p = prompts[vi]
            texts.append(self.scorer.text(p, t))
        return self.scorer.score_texts(texts)


# ---- distilled PRM -------------------------------------------------------------------------------
@runtime_checkable
class PRMScorer(Protocol):
    """The distilled process reward model's interface: one scalar per (problem text, trace)."""

    def score(self, problem_text: str, trace: str) -> float: ...


def load_prm(path: str | Path, **kwargs: Any) -> PRMScorer:
    """Load a PRM from ``path``: a directory written by ``calver train prm`` (it holds
    ``calver_prm.json``) goes through ``calver.train.prm.load_prm``; any other directory is read as
    an HF sequence-classification model scoring (problem text, trace)."""
    try:
        from calver.train import prm as train_prm  # type: ignore[attr-defined]
    except ImportError:
        train_prm = None
    meta = getattr(train_prm, "PRM_META_FILE", "calver_prm.json")
    if train_prm is not None and hasattr(train_prm, "load_prm") and (Path(path) / meta).exists():
        return train_prm.load_prm(path, **kwargs)
    return SeqClsScorer(path, **kwargs)


class PRMSelector(_Neural):
    name = "prm"

    def __init__(self, scorer: PRMScorer | None = None, *, model_path: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__()
        self.scorer = scorer if scorer is not None else (load_prm(model_path, **kwargs) if model_path else None)

    def has_model(self) -> bool:
        return self.scorer is not None

    def score_pairs(self, views, pairs):
        from calver.infer.sample import user_text

        prompts: dict[int, str] = {}
        items = []
        for vi, t in pairs:
            if vi not in prompts:
                prompts[vi] = user_text(views[vi].problem)
            items.append((prompts[vi], t))
        if hasattr(self.scorer, "score_many"):  # batched forward passes when the scorer offers them
            return [float(x) for x in self.scorer.score_many(items)]
        return [float(self.scorer.score(p, t)) for p, t in items]
