"""Neural comparators: model confidence, LLM judge, reward model, distilled PRM.

Each takes its model handle through the constructor. Without one it re-selects from the scores an
earlier run stored in the pool (``view.stored[name]``) and raises ``SelectorError`` if there are
none. Each scorer selects the earliest candidate attaining its maximum score; a score that could not
be computed (unparsable judge reply, non-finite logit) is NaN and never wins. The reward model and
the PRM score through :mod:`calver.infer.selectors.scorers`; torch/transformers load lazily.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

from calver.data_gen.prompts import render_prompt, user_text
from calver.infer.firewall import SelectorView
from calver.infer.selectors.base import Selection, Selector, SelectorError, earliest_max
from calver.infer.selectors.scorers import PRMScorer, SeqClsScorer, load_prm

CONFIDENCE_QUESTION = (
    "Is the final answer in your response above correct? Reply with exactly one word: yes or no."
)
JUDGE_SYSTEM = (
    "You are a careful grader of causal-reasoning traces. You are given a causal graph (or its "
    "description), a query and a candidate trace. Judge only whether the trace's final answer is a "
    "valid answer to the query on that graph. No reference answer is available."
)
JUDGE_INSTRUCTION = (
    "Rate the validity of the final answer from 0 (certainly invalid) to 10 (certainly valid). Reply as: SCORE: <0-10>"
)


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
        return render_prompt(view.problem) + [{"role": "assistant", "content": trace},
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
class RewardModelSelector(_Neural):
    """Reward model; ``with_problem=False`` gives the trace-only variant (name ``reward_model_trace``)."""

    name = "reward_model"

    def __init__(self, model_path: str | Path | None = None, *, with_problem: bool = True,
                 scorer: SeqClsScorer | None = None, **kwargs: Any) -> None:
        super().__init__()
        self.with_problem = with_problem
        self.name = "reward_model" if with_problem else "reward_model_trace"
        self.scorer = scorer if scorer is not None else (SeqClsScorer(model_path, **kwargs) if model_path else None)

    def has_model(self) -> bool:
        return self.scorer is not None

    def score_pairs(self, views, pairs):
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
class PRMSelector(_Neural):
    name = "prm"

    def __init__(self, scorer: PRMScorer | None = None, *, model_path: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__()
        self.scorer = scorer if scorer is not None else (load_prm(model_path, **kwargs) if model_path else None)

    def has_model(self) -> bool:
        return self.scorer is not None

    def score_pairs(self, views, pairs):
        prompts: dict[int, str] = {}
        items = []
        for vi, t in pairs:
            if vi not in prompts:
                prompts[vi] = user_text(views[vi].problem)
            items.append((prompts[vi], t))
        if hasattr(self.scorer, "score_many"):  # batched forward passes when the scorer offers them
            return [float(x) for x in self.scorer.score_many(items)]
        return [float(self.scorer.score(p, t)) for p, t in items]
