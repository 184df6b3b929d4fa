"""Prompt styles for sampling (``calver sample --prompt``): how one problem becomes one model input.

- ``zero_shot`` (default): :func:`~calver.data_gen.prompts.render_prompt`'s ``[system, user]`` chat.
- ``compact``: the same chat with a one-line system message (``system_prompt(task, "compact")``), for policies
  trained on rows written that way (``calver gen --system compact``, ``calver train ... --system_prompt
  compact``): the contract lives in their training data, not in every prompt.
- ``few_shot:N`` (N >= 1): the system turn, then N worked examples as user/assistant turns, then the
  problem. The examples are *training* problems of the item's own task family from the package's
  seeded generator (``generate(task, N + 1, GenConfig(seed=FEW_SHOT_SEED))``; knights_knaves goes
  through :func:`calver.data_gen.knights.generate_kk` inside it), each answered by the family's
  canonical trace as the SFT export writes it (:func:`calver.data_gen.export.to_sft_rows`, so it
  scores 6/6). N + 1 are drawn so that the first N differing from the item can always be shown.
- ``completion`` (base models): one plain string, :data:`COMPLETION_FORMAT` filled with the contract
  instructions, the problem and the family's first slot label (``GRAPH`` / ``CONSTRAINTS``). The
  sampler sends a ``str`` untemplated; :func:`response_prefix` is the label the prompt already wrote,
  which the sampler prepends to each completion so the stored trace is whole.

:func:`template_hash` is a sha256 over everything but the problem text (style, system prompts,
examples, completion format): the pool manifest records it so a resume under another template is refused.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Literal, Union

from calver.config import ConfigError

if TYPE_CHECKING:
    from calver.verifier.problem import Problem

# Eval sets use small seeds (configs/gen: 0-3, tests' fixtures: < 2000); generator items are seeded by
# the string f"calver-gen/{task}/{seed}/{idx}", so this seed shares no rng with any of them.
FEW_SHOT_SEED = 1_000_003
STYLES = ("zero_shot", "compact", "few_shot", "completion")
MAX_SHOTS = 64  # examples in one prompt: far past any context window, so a typo cannot build 10^30 of them
ALLOWED_FORMS = f"zero_shot | compact | few_shot:N (1 <= N <= {MAX_SHOTS}) | completion"
COMPLETION_FORMAT = "{instructions}\n\n### Problem\n{problem}\n\n### Response\n{label}:"
_FEW_SHOT = re.compile(r"few_shot:(\d+)")

Prompt = Union[str, list[dict[str, Any]]]  # what Sampler.generate takes (str: sent untemplated)


@dataclass(frozen=True)
class PromptStyle:
    """A parsed ``prompt`` setting; ``shots`` is N for ``few_shot`` and 0 otherwise."""

    kind: Literal["zero_shot", "compact", "few_shot", "completion"] = "zero_shot"
    shots: int = 0

    def __post_init__(self) -> None:
        if self.kind not in STYLES:
            raise ConfigError(f"prompt style must be {ALLOWED_FORMS}, got {self.kind!r}")
        if (self.kind == "few_shot") != (self.shots >= 1) or self.shots < 0:
            raise ConfigError(f"prompt style must be {ALLOWED_FORMS}, got {self.spec!r}")

    @property
    def spec(self) -> str:
        """The setting as written (``few_shot:3``)."""
        return f"few_shot:{self.shots}" if self.kind == "few_shot" else self.kind

    @property
    def chat(self) -> bool:
        return self.kind != "completion"

    @property
    def system(self) -> str:
        """The system message it uses (:func:`calver.data_gen.prompts.system_prompt`)."""
        return "compact" if self.kind == "compact" else "contract"


@dataclass(frozen=True)
class FewShotExample:
    problem_id: str
    user: str  # the example's user turn (its problem text)
    trace: str  # its canonical six-slot trace (the assistant turn)


def parse_prompt_style(spec: str) -> PromptStyle:
    """``"zero_shot"`` | ``"few_shot:N"`` (N >= 1) | ``"completion"``; anything else is a ConfigError."""
    if not isinstance(spec, str):
        raise ConfigError(f"prompt style must be {ALLOWED_FORMS}, got {spec!r}")
    m = _FEW_SHOT.fullmatch(spec)
    if m:
        if not 1 <= int(m.group(1)) <= MAX_SHOTS:
            raise ConfigError(f"prompt style {spec[:40]!r}: few_shot needs 1 <= N <= {MAX_SHOTS} ({ALLOWED_FORMS})")
        return PromptStyle("few_shot", int(m.group(1)))
    if spec in ("zero_shot", "compact", "completion"):
        return PromptStyle(spec)  # type: ignore[arg-type]
    raise ConfigError(f"prompt style must be {ALLOWED_FORMS}, got {spec!r}")


@functools.lru_cache(maxsize=128)
def example_pool(task: str, n: int) -> tuple[FewShotExample, ...]:
    """The ``n + 1`` candidate examples of ``task`` (seeded, so the same in every run and process)."""
    from calver.data_gen.export import to_sft_rows
    from calver.data_gen.generators import GENERATORS, GenConfig, generate

    if task not in GENERATORS:
        raise ValueError(f"few_shot: task {task!r} has no generator to draw training examples from "
                         f"(available: {', '.join(sorted(GENERATORS))}); use --prompt zero_shot")
    rows = to_sft_rows(generate(task, n + 1, GenConfig(seed=FEW_SHOT_SEED)))
    return tuple(FewShotExample(r["id"], r["messages"][1]["content"], r["messages"][2]["content"]) for r in rows)


def few_shot_examples(problem: Problem, n: int) -> tuple[FewShotExample, ...]:
    """The first ``n`` of :func:`example_pool` that are not ``problem`` itself (by id or by text)."""
    from calver.data_gen.prompts import user_text

    own = user_text(problem)
    return tuple(ex for ex in example_pool(problem.task, n) if ex.problem_id != problem.id and ex.user != own)[:n]


def _label(task: str) -> str:
    from calver.verifier.registry import get_family

    return get_family(task).graph_label


def response_prefix(problem: Problem, style: PromptStyle) -> str:
    """The start of the trace the prompt itself writes (prepend it to each completion): ``""`` for chat."""
    return "" if style.chat else f"{_label(problem.task)}:"


def build_prompt(problem: Problem, style: PromptStyle) -> Prompt:
    """The model input for ``problem`` under ``style`` (chat messages, or one string for ``completion``)."""
    from calver.data_gen.prompts import render_prompt, system_prompt, user_text

    if style.kind in ("zero_shot", "compact"):
        return render_prompt(problem, system=style.system)
    if style.kind == "completion":
        return COMPLETION_FORMAT.format(instructions=system_prompt(problem.task), problem=user_text(problem),
                                        label=_label(problem.task))
    shots: list[dict[str, Any]] = []
    for ex in few_shot_examples(problem, style.shots):
        shots += [{"role": "user", "content": ex.user}, {"role": "assistant", "content": ex.trace}]
    system, user = render_prompt(problem)
    return [system, *shots, user]


def template_hash(style: PromptStyle, tasks: Iterable[str]) -> str:
    """sha256 of the template for ``tasks`` (everything but the problems' own text): the style, each
    task's system prompt, its example pool (few_shot) and the format string (completion), in a fixed
    order, each part length-prefixed."""
    from calver.data_gen.prompts import system_prompt

    parts = [f"style={style.spec}"]
    if style.kind == "completion":
        parts.append(f"format={COMPLETION_FORMAT}")
    for task in sorted(set(tasks)):
        parts.append(f"system[{task}]={system_prompt(task, style.system)}")
        if style.kind == "completion":
            parts.append(f"label[{task}]={_label(task)}")
        if style.kind == "few_shot":
            for ex in example_pool(task, style.shots):
                parts += [f"example[{task}].user={ex.user}", f"example[{task}].trace={ex.trace}"]
    h = hashlib.sha256()
    for p in parts:
        b = p.encode()
        h.update(b"%d:" % len(b) + b)
    return "sha256:" + h.hexdigest()
