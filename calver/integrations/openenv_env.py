"""The verifier as a single-step OpenEnv environment (``calver serve-env``).

One episode is one problem: ``reset()`` draws a problem and returns its prompt and a one-use ``ticket``;
``step(TraceAction(trace=...))`` scores the trace with :func:`calver.verifier.score` and ends the episode
(``done=True``) with the reward and the six bits. Served by OpenEnv's own HTTP/WebSocket server
(:mod:`calver.integrations.openenv_server`); clients use OpenEnv's ``EnvClient`` (:class:`CalverEnvClient`,
or ``.sync()`` for blocking code)::

    calver serve-env --tasks backdoor_set --n 100 --seed 0 --port 8008      # or --problems DIR_OR_JSONL

    from calver.integrations.openenv_env import CalverEnvClient, TraceAction
    with CalverEnvClient(base_url="http://127.0.0.1:8008").sync() as env:
        r = env.reset()                                   # r.observation.prompt: [system, user] messages
        r = env.step(TraceAction(trace=completion_text))  # r.reward, r.done, r.observation.bits / .failed

The environment cannot be queried for the answer. A policy under RL finds any way to a high score, and a
verifier that answers repeated questions is an oracle: it would learn to probe, not to solve. So:

- one scored step per episode, enforced on the server: ``reset`` opens an episode with a one-use ticket
  (:class:`ProblemSet` keeps them, shared by every session and transport); a step claims it, and every
  later step of that episode (or with that ticket) is unscorable. A step cannot name a problem by id.
- the observation carries the bits and the names of the slots that failed (``failed``), never the
  verifier's reasons: they name hidden answers, edges, paths and effects (the ATE reason prints θ, a
  constructed-mode b1 reason lists the source graph's missing edges). The full reasons go to the server's
  log (logger ``calver.serve_env``, INFO) and to ``calver eval``.

Observations (:class:`CalverObservation`). ``reset`` gives ``problem_id``, ``task``, ``prompt`` (chat
messages from :func:`calver.data_gen.prompts.render_prompt`), ``problem`` (the problem as JSON) and ``ticket``,
all built from the firewall-stripped problem (:func:`calver.infer.firewall.strip_problem`): no meta, no labels,
no validity class, no source graph in constructed mode. ``step`` gives ``bits`` (``{"graph": b1, ...,
"answer": b6}``), ``total`` (S), ``failed`` (the parts whose bit is 0), ``unscorable`` and ``error``. Scoring
uses the full problem (with its source graph): the reward is grounded, as in :mod:`calver.train.rewards`;
problems that cannot be judged against a source (constructed mode without its graph) are refused at load
unless ``allow_ungrounded``.

Reward: ``"fraction"`` (S/6, default) or ``"strict"`` (1.0 only at 6/6), computed by :class:`VerifierRubric`,
an OpenEnv ``Rubric`` of six named parts ``graph``, ``query``, ``strategy``, ``derivation``, ``result``,
``answer`` (part ``graph`` is bit b1/slot GRAPH, and so on; ``env.rubric.named_rubrics()`` lists them,
each with its ``last_score``).

Never raises on an action: a trace that is no text (nor a chat completion whose assistant turns are text),
one over ``max_trace_chars``, a step without an open episode (no ``reset`` first, an unknown, expired or used
ticket), a second step in the same episode or a scorer error gives an *unscorable* observation:
``unscorable=True``, ``error`` saying why, all bits 0, ``reward=None`` (OpenEnv's "no reward"; TRL likewise
drops a ``None`` reward from its group baseline). A garbage trace is not unscorable: it is scored and earns
0/6. Only a payload that breaks the action's schema (an unknown field) is refused by OpenEnv itself (HTTP
422 / a WebSocket error message).

Stateless use (OpenEnv's HTTP ``POST /reset`` and ``POST /step``, where every request gets a fresh environment):
pass the reset's ``ticket`` in the action, ``TraceAction(trace=..., ticket=...)``. ``reset`` also takes
``problem_id=`` (that problem), ``index=`` (the i-th, modulo the set) or ``seed=`` (a seeded draw); with none
of them, successive resets walk the problem set round robin (shared by all sessions).

Needs OpenEnv (``openenv`` 0.10; see ``docs/integrations.md`` for the lean install).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import secrets
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from openenv.core.rubrics.base import Rubric
from pydantic import Field

import calver
from calver.reward import POLICY_FAULTS, UNSCORABLE_REWARD, RewardEngine, RewardSpec
from calver.reward.completions import read_completion
from calver.reward.problems import check_grounded
from calver.verifier import BIT_KEYS, Problem, Unscorable, prepare

PART_NAMES: tuple[str, ...] = BIT_KEYS  # graph, query, strategy, derivation, result, answer
# A policy's contract trace is a few KB; a 32,000-character trace scores in tens of milliseconds, the 128 KB
# adjacency matrices the 2026-12-03 audit used to slow other clients take ~0.25 s (scoring is thread-safe and
# runs in each session's thread, no global lock: the GIL shares the CPU between clients).
MAX_TRACE_CHARS = 32_000
EPISODE_TTL_S = 1800.0  # an unscored episode's ticket expires after this (a rollout's generation fits in it)
MAX_OPEN_EPISODES = 100_000  # open tickets kept (the oldest is dropped first)
ENV_NAME = "calver"
LOG = logging.getLogger("calver.serve_env")


# ---- wire types ---------------------------------------------------------------------------------------------
class TraceAction(Action):
    """The policy's answer: its completion (a six-slot contract trace)."""

    trace: Any = Field(default=None, json_schema_extra={"type": ["string", "array"]},
                       description="the trace text; a chat completion (a list of messages, whose assistant "
                       "contents are joined) is accepted too")
    ticket: str | None = Field(default=None, max_length=64,
                               description="the one-use ticket reset() returned: for stateless use (HTTP POST "
                               "/step, a fresh environment per request); a WebSocket session needs none")


class CalverObservation(Observation):
    """What the policy sees at reset (the prompt) and what the verifier says at the step (bits and failed slots)."""

    problem_id: str = Field(default="", description="the problem's id")
    task: str = Field(default="", description="the problem's task family")
    prompt: list[dict[str, str]] = Field(default_factory=list, description="reset: chat messages [system, user]")
    problem: dict[str, Any] = Field(default_factory=dict, description="reset: the firewall-stripped problem (JSON)")
    ticket: str = Field(default="", description="reset: the episode's one-use ticket (one scored step)")
    bits: dict[str, int] = Field(default_factory=dict, description="step: the six verifier bits by part name")
    total: int = Field(default=0, description="step: S, the number of bits that pass (0..6)")
    failed: list[str] = Field(default_factory=list, description="step: the parts whose bit is 0 (no reasons: they "
                              "would reveal hidden answers)")
    unscorable: bool = Field(default=False, description="step: the action could not be scored (see error)")
    error: str = Field(default="", description="step: why the action is unscorable")


class CalverState(State):
    """The episode: its problem, and whether its one step was taken."""

    problem_id: str | None = Field(default=None, description="the episode's problem")
    task: str | None = Field(default=None, description="its task family")
    done: bool = Field(default=False, description="whether the episode's one step was taken")


# ---- rubric -------------------------------------------------------------------------------------------------
class VerifierBit(Rubric):
    """One named part of :class:`VerifierRubric`: its bit (0.0 / 1.0) from the step's observation."""

    def __init__(self, part: str) -> None:
        super().__init__()
        self.part = part

    def forward(self, action: Any, observation: Any) -> float:
        return float(observation.bits.get(self.part, 0))


class VerifierRubric(Rubric):
    """The verifier's reward as an OpenEnv rubric of six named parts (``graph`` .. ``answer``, in slot order),
    combined by :class:`calver.reward.RewardSpec` (``fraction`` S/6, ``strict``, ``validity``, or ``weighted``
    with ``weights``)."""

    def __init__(self, variant: str = "fraction", weights: Sequence[float] | None = None) -> None:
        super().__init__()
        self.spec = RewardSpec(variant, tuple(weights) if weights is not None else None)
        self.variant = variant
        for name in PART_NAMES:
            setattr(self, name, VerifierBit(name))

    def forward(self, action: Any, observation: Any) -> float:
        return self.spec.value([int(child(action, observation)) for child in self.children()])

    def reset(self) -> None:
        """Forget the last scores (of the whole rubric and of each part)."""
        for r in (self, *self.rubrics()):
            object.__setattr__(r, "last_score", None)


# ---- problems -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServedProblem:
    """One problem as the environment serves it: the policy's view, and what scoring uses."""

    id: str
    task: str
    prompt: tuple[dict[str, str], ...]  # render_prompt of the stripped problem
    view: str  # the stripped problem as JSON text (a fresh dict per observation)
    key: str  # the full problem as JSON: the reward engine scores against it, grounded on its source


def serve_problem(problem: Problem, *, allow_ungrounded: bool = False) -> ServedProblem:
    """``problem`` prepared for serving. Raises ``ValueError`` naming the problem when it cannot be served."""
    from calver.data_gen.export import problem_json
    from calver.data_gen.prompts import render_prompt
    from calver.infer.firewall import strip_problem

    pid = problem.id
    if not pid:
        raise ValueError(f"a {problem.task} problem has no id")
    try:
        prepared = prepare(problem)
        stripped = strip_problem(problem)
        prompt = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in render_prompt(stripped))
        view = problem_json(stripped)
    except (KeyError, ValueError, RuntimeError) as e:  # unregistered task, ProblemError, FirewallError
        raise ValueError(f"problem {pid!r} cannot be served: {type(e).__name__}: {e}") from None
    check_grounded(prepared, allow_ungrounded)  # UngroundedProblemError (a ValueError) names the problem
    return ServedProblem(pid, problem.task, prompt, view, problem_json(problem))


class ProblemSet:
    """The problems an environment server draws from (shared, read-only, by every session), and the ledger of
    open episodes: each reset's one-use ticket, which one step may claim (:meth:`open_episode`, :meth:`claim`)."""

    def __init__(self, problems: Iterable[Problem], *, allow_ungrounded: bool = False,
                 episode_ttl_s: float = EPISODE_TTL_S, max_open: int = MAX_OPEN_EPISODES) -> None:
        self.allow_ungrounded = bool(allow_ungrounded)
        self.items: list[ServedProblem] = [serve_problem(p, allow_ungrounded=allow_ungrounded) for p in problems]
        if not self.items:
            raise ValueError("no problems to serve")
        self.by_id: dict[str, ServedProblem] = {}
        for it in self.items:
            if it.id in self.by_id:
                raise ValueError(f"duplicate problem id {it.id!r}")
            self.by_id[it.id] = it
        self._cursor = itertools.count()
        self._lock = threading.Lock()
        self.episode_ttl_s = float(episode_ttl_s)
        self.max_open = int(max_open)
        self._open: OrderedDict[str, tuple[ServedProblem, float]] = OrderedDict()  # ticket -> (problem, opened)

    def open_episode(self, sp: ServedProblem) -> str:
        """A fresh one-use ticket for an episode on ``sp`` (unguessable; the oldest open one is dropped past
        ``max_open``)."""
        ticket = secrets.token_urlsafe(18)
        with self._lock:
            self._open[ticket] = (sp, time.monotonic())
            while len(self._open) > self.max_open:
                self._open.popitem(last=False)
        return ticket

    def claim(self, ticket: str) -> ServedProblem | str:
        """The episode's problem, once: the ticket is spent. Why not (a str) for an unknown, used or expired one."""
        with self._lock:
            hit = self._open.pop(ticket, None)
        if hit is None:
            return "no open episode for this ticket (unknown, already scored, or expired): call reset()"
        sp, opened = hit
        if time.monotonic() - opened > self.episode_ttl_s:
            return f"the episode expired ({self.episode_ttl_s:.0f} s after reset): call reset()"
        return sp

    @classmethod
    def from_file(cls, path: str | Path, *, allow_ungrounded: bool = False) -> "ProblemSet":
        """From a ``problems.jsonl`` (rows ``Problem.to_dict()`` or ``{"problem": ..., "labels": ...}``; labels are
        never read) or a folder holding one (``calver gen --out DIR``)."""
        from calver.infer.sample import load_problem_rows

        rows = load_problem_rows(path)
        return cls((Problem.from_dict(r["problem"]) for r in rows), allow_ungrounded=allow_ungrounded)

    @classmethod
    def generated(cls, tasks: Sequence[str], n: int, seed: int) -> "ProblemSet":
        """``n`` problems of each of ``tasks`` (``"all"``: every task with a generator), as ``calver gen``
        makes them with ``--seed seed`` and otherwise default settings."""
        from calver.data_gen.gen_config import GenConfig
        from calver.data_gen.generators import generate, resolve_tasks

        cfg = GenConfig(seed=seed)
        problems: list[Problem] = []
        for task in resolve_tasks(tuple(tasks)):
            problems += generate(task, n, cfg)
        return cls(problems)

    def __len__(self) -> int:
        return len(self.items)

    def tasks(self) -> list[str]:
        return sorted({it.task for it in self.items})

    def pick(self, *, problem_id: str | None = None, index: int | None = None, seed: int | None = None
             ) -> ServedProblem:
        """The named problem, the ``index``-th (modulo the set), a ``seed``-ed draw, or the next one round robin.
        Raises ``ValueError`` (with a message for the client) for an unknown id or an argument of the wrong type."""
        check_pick_args(problem_id=problem_id, index=index, seed=seed)
        if problem_id is not None:
            hit = self.by_id.get(problem_id)
            if hit is None:
                raise ValueError(f"unknown problem_id {problem_id[:80]!r} ({len(self)} problems served)")
            return hit
        if index is not None:
            return self.items[index % len(self.items)]
        if seed is not None:
            return self.items[random.Random(f"calver-env/{seed}").randrange(len(self.items))]
        with self._lock:
            i = next(self._cursor)
        return self.items[i % len(self.items)]


MAX_PROBLEM_ID_CHARS = 256
MAX_SEED = 2**63 - 1


def check_pick_args(*, problem_id: Any = None, index: Any = None, seed: Any = None) -> None:
    """ValueError naming the first bad ``reset`` argument: ``problem_id`` a string (at most 256 characters),
    ``index`` and ``seed`` integers (not booleans; ``seed`` in [0, 2^63))."""
    if problem_id is not None and (not isinstance(problem_id, str) or len(problem_id) > MAX_PROBLEM_ID_CHARS):
        raise ValueError(f"problem_id must be a string of at most {MAX_PROBLEM_ID_CHARS} characters")
    for name, value in (("index", index), ("seed", seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be an integer, got {type(value).__name__}")
    if index is not None and abs(index) > MAX_SEED:
        raise ValueError("index is out of range")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}]")


# ---- the environment ----------------------------------------------------------------------------------------
def _trace_text(trace: Any) -> tuple[str | None, str]:
    """``(text, "")`` or ``(None, why)``: a string as is; a chat completion's assistant contents joined."""
    if isinstance(trace, str):
        return trace, ""
    if trace is None:
        return None, "no trace in the action"
    if not isinstance(trace, list):
        return None, f"the trace is a {type(trace).__name__}, not text or a list of chat messages"
    text, why = read_completion(trace)
    return text, (why if text is None else "")


class CalverEnvironment(Environment[TraceAction, CalverObservation, CalverState]):
    """Single-step verifier environment over a shared :class:`ProblemSet` (one instance per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # sessions share only the read-only problem set

    def __init__(self, problems: ProblemSet, reward: str = "fraction", max_trace_chars: int = MAX_TRACE_CHARS,
                 engine: RewardEngine | None = None) -> None:
        super().__init__(rubric=VerifierRubric(reward))
        self.problems = problems
        # the reward core's one scoring loop: in-process by default; a budgeted engine (calver serve-env
        # --budget_s/--workers) scores on worker processes shared by every session
        self.engine = engine if engine is not None else RewardEngine(allow_ungrounded=problems.allow_ungrounded)
        self.max_trace_chars = int(max_trace_chars)
        self._ticket: str | None = None  # this session's open episode
        self._state = CalverState()

    # -- OpenEnv API --
    def reset(self, seed: int | None = None, episode_id: str | None = None, problem_id: str | None = None,
              index: int | None = None, **kwargs: Any) -> CalverObservation:
        """Start an episode on one problem (see :meth:`ProblemSet.pick`); extra keyword arguments (e.g. a
        dataset row's other columns) are ignored. A previous unscored episode of this session stays claimable
        by its ticket until it expires."""
        self._reset_rubric()
        sp = self.problems.pick(problem_id=problem_id, index=index, seed=seed)
        self._ticket = self.problems.open_episode(sp)
        self._state = CalverState(episode_id=str(episode_id)[:255] if episode_id else uuid.uuid4().hex, step_count=0,
                                  problem_id=sp.id, task=sp.task, done=False)
        return CalverObservation(problem_id=sp.id, task=sp.task, prompt=[dict(m) for m in sp.prompt],
                                 problem=json.loads(sp.view), ticket=self._ticket, done=False, reward=None)

    def step(self, action: TraceAction, timeout_s: float | None = None, **kwargs: Any) -> CalverObservation:
        """Score the trace; the episode ends (``done=True``). Never raises (see the module doc)."""
        self._state.step_count += 1
        try:
            return self._step(action)
        except Exception as e:  # noqa: BLE001 - an action must never fail the session
            LOG.warning("step failed: %s: %s", type(e).__name__, e)
            return self._unscorable(f"environment error: {type(e).__name__}", None)

    @property
    def state(self) -> CalverState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=ENV_NAME, version=calver.__version__,
            description=f"CALVER symbolic causal verifier: one problem per episode, the reward scores a six-slot "
                        f"contract trace ({len(self.problems)} problems: {', '.join(self.problems.tasks())}; "
                        f"reward {self.rubric.variant})")

    # -- internals --
    def _step(self, action: TraceAction) -> CalverObservation:
        ticket = getattr(action, "ticket", None)
        if ticket is None:
            if self._ticket is None:
                if self._state.done:
                    return self._unscorable("the episode is over (one scored step per episode): call reset()", None)
                return self._unscorable("no episode: call reset() first (or pass its ticket in the action)", None)
            ticket, self._ticket = self._ticket, None
        elif ticket == self._ticket:
            self._ticket = None
        sp = self.problems.claim(str(ticket))
        if isinstance(sp, str):
            return self._unscorable(sp, None)
        self._state.done = True
        text, why = _trace_text(getattr(action, "trace", None))
        if text is None:
            return self._unscorable(f"unscorable trace: {why}", sp)
        if len(text) > self.max_trace_chars:
            return self._unscorable(f"trace is {len(text)} characters, over the limit of {self.max_trace_chars}", sp)
        ts = self.engine.score([text], [sp.key])[0]  # thread-safe: sessions score in their own threads
        if isinstance(ts, Unscorable):
            LOG.warning("%s on %s", ts.reason, sp.id)
            if ts.reason in POLICY_FAULTS:  # the trace itself stalled or crashed the verifier: the floor, 0.0
                obs = self._unscorable(ts.reason, sp)
                obs.reward = UNSCORABLE_REWARD
                return obs
            return self._unscorable("scorer error", sp)  # a scorer bug: unscorable, the server goes on
        bits = ts.bit_map
        if LOG.isEnabledFor(logging.INFO):  # the reasons stay here: they name hidden answers
            LOG.info("episode %s problem %s bits %s reasons %s", self._state.episode_id, sp.id, ts.bits,
                     json.dumps(ts.reasons, ensure_ascii=False))
        obs = CalverObservation(problem_id=sp.id, task=sp.task, bits=bits, total=int(ts.total),
                                failed=[k for k, b in bits.items() if not b], done=True)
        obs.reward = float(self._apply_rubric(action, obs))
        return obs

    def _unscorable(self, why: str, sp: ServedProblem | None) -> CalverObservation:
        self._reset_rubric()
        self._state.done = True
        return CalverObservation(problem_id=sp.id if sp else "", task=sp.task if sp else "",
                                 bits=dict.fromkeys(PART_NAMES, 0), total=0, failed=list(PART_NAMES), unscorable=True,
                                 error=why[:500], done=True, reward=None)


# ---- the client ---------------------------------------------------------------------------------------------
class CalverEnvClient(EnvClient[TraceAction, CalverObservation, CalverState]):
    """OpenEnv client of a ``calver serve-env`` server (WebSocket session; ``.sync()`` for blocking use)."""

    def _step_payload(self, action: TraceAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"}, exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CalverObservation]:
        obs = CalverObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> CalverState:
        return CalverState(**payload)


# ---- a TRL environment_factory adapter -----------------------------------------------------------------------
class TRLVerifierEnv:
    """An environment for TRL's ``GRPOTrainer(environment_factory=...)`` backed by a ``calver serve-env`` server.

    TRL (1.16) pools instances, calls ``reset(**row)`` before each rollout and ``get_reward()`` after it, and exposes
    public methods as tools: here one, :meth:`submit_trace`. ``reset`` uses the row's ``id`` (the ``calver gen``
    GRPO dataset's column) to score against that problem; without a dataset it takes the server's next problem and
    returns its prompt text, which TRL appends to the (empty) user turn. ``environment_factory`` is experimental
    in TRL and needs a chat template that can call tools. Each instance holds one WebSocket session: start the
    server with ``--max_sessions`` at least the number of rollouts TRL runs at once.

    The reward is the *first* submission's: the server scores one step per episode, and the tool's answer is the
    bits and the names of the failed slots, never the verifier's reasons, so resubmitting cannot turn the verifier
    into an answer key. Calls past ``max_calls`` per episode get a refusal without a server round trip (set TRL's
    ``max_tool_calling_iterations`` too, so a rollout stops calling)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8008", max_calls: int = 2) -> None:
        self._client = CalverEnvClient(base_url=base_url).sync()
        self.max_calls = int(max_calls)
        self._reward: float | None = 0.0
        self._submitted = False
        self._calls = 0

    def reset(self, **row: Any) -> str | None:
        self._reward = 0.0  # a rollout that never submits a trace earns what a garbage trace earns
        self._submitted, self._calls = False, 0
        pid = row.get("id")
        result = self._client.reset(**({"problem_id": str(pid)} if pid else {}))
        if pid:  # the row's own prompt is the problem's: nothing to add
            return None
        # no dataset row: TRL appends this to an empty user turn, so it carries the contract instructions too
        return "\n\n".join(m["content"] for m in result.observation.prompt)

    def submit_trace(self, trace: str) -> str:
        """Submit the final six-slot contract trace for verification (once: only the first submission counts).

        Args:
            trace: The complete trace (GRAPH, QUERY, STRATEGY, DERIVATION, RESULT and ANSWER slots).

        Returns:
            The verifier's verdict: which of the six slots passed.
        """
        self._calls += 1
        if self._submitted:
            if self._calls > self.max_calls:
                return "refused: too many calls in this episode"
            return "already submitted: only the first submission of an episode is scored"
        self._submitted = True
        result = self._client.step(TraceAction(trace=trace))
        obs = result.observation
        self._reward = result.reward
        if obs.unscorable:
            return f"unscorable: {obs.error}"
        return json.dumps({"bits": obs.bits, "failed": obs.failed})

    def get_reward(self) -> float | None:
        """The first submission's reward; 0.0 without one; None when it was unscorable."""
        return self._reward

    def _close(self) -> None:
        self._client.close()
