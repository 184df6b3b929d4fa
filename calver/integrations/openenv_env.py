"""The verifier as a single-step OpenEnv environment (``calver serve-env``).

One episode is one problem: ``reset()`` draws a problem and returns its prompt; ``step(TraceAction(trace=...))``
scores the trace with :func:`calver.verifier.score` and ends the episode (``done=True``) with the reward,
the six bits and the reasons. Served by OpenEnv's own HTTP/WebSocket server (``create_app``); clients use
OpenEnv's ``EnvClient`` (:class:`CalverEnvClient`, or ``.sync()`` for blocking code)::

    calver serve-env --tasks backdoor_set --n 100 --seed 0 --port 8008      # or --problems DIR_OR_JSONL

    from calver.integrations.openenv_env import CalverEnvClient, TraceAction
    with CalverEnvClient(base_url="http://127.0.0.1:8008").sync() as env:
        r = env.reset()                                   # r.observation.prompt: [system, user] messages
        r = env.step(TraceAction(trace=completion_text))  # r.reward, r.done, r.observation.bits / .reasons

Observations (:class:`CalverObservation`). ``reset`` gives ``problem_id``, ``task``, ``prompt`` (chat
messages from :func:`calver.data_gen.prompts.render_prompt`) and ``problem`` (the problem as JSON), all
built from the firewall-stripped problem (:func:`calver.infer.firewall.strip_problem`): no meta, no labels,
no validity class, no source graph in constructed mode. ``step`` gives ``bits`` (``{"graph": b1, ...,
"answer": b6}``), ``total`` (S), ``reasons`` (slot -> why its bit failed, as ``score()`` gives them),
``unscorable`` and ``error``. Scoring uses the full problem (with its source graph): the reward is grounded,
as in :mod:`calver.train.rewards`; problems that cannot be judged against a source (constructed mode without
its graph) are refused at load unless ``allow_ungrounded``.

Reward: ``"fraction"`` (S/6, default) or ``"strict"`` (1.0 only at 6/6), computed by :class:`VerifierRubric`,
an OpenEnv ``Rubric`` of six named parts ``graph``, ``query``, ``strategy``, ``derivation``, ``result``,
``answer`` (part ``graph`` is bit b1/slot GRAPH, and so on; ``env.rubric.named_rubrics()`` lists them,
each with its ``last_score``).

Never raises on an action: a trace that is no text (nor a chat completion whose assistant turns are text),
one over ``max_trace_chars``, a step with no problem (no ``reset`` first, an unknown ``problem_id``), a second
step in the same episode or a scorer error gives an *unscorable* observation: ``unscorable=True``, ``error``
saying why, all bits 0, ``reward=None`` (OpenEnv's "no reward"; TRL likewise drops a ``None`` reward from its
group baseline). A garbage trace is not unscorable: it is scored and earns 0/6. Only a payload that breaks
the action's schema (an unknown field) is refused by OpenEnv itself (HTTP 422 / a WebSocket error message).

Stateless use: ``TraceAction(trace=..., problem_id=ID)`` scores against problem ``ID`` without a ``reset`` (for
OpenEnv's HTTP ``POST /step``, where every request gets a fresh environment). ``reset`` also takes
``problem_id=`` (that problem), ``index=`` (the i-th, modulo the set) or ``seed=`` (a seeded draw); with none
of them, successive resets walk the problem set round robin (shared by all sessions).

Needs OpenEnv (``openenv-core``; see ``docs/integrations.md`` for the lean install).
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import threading
import uuid
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
from calver.verifier import SLOTS, PreparedProblem, Problem, prepare, score

PART_NAMES: tuple[str, ...] = tuple(s.lower() for s in SLOTS)  # graph, query, strategy, derivation, result, answer
REWARD_VARIANTS = ("fraction", "strict")
MAX_TRACE_CHARS = 200_000
ENV_NAME = "calver"

# The verifier's memos (per-problem slot memos, the shared byte budget) are plain dicts, written without
# locks; OpenEnv runs each session's step in its own thread. Scoring is CPU-bound Python under the GIL, so
# one lock around it costs no throughput and keeps the memos consistent.
_SCORE_LOCK = threading.Lock()


# ---- wire types ---------------------------------------------------------------------------------------------
class TraceAction(Action):
    """The policy's answer: its completion (a six-slot contract trace)."""

    trace: Any = Field(default=None, json_schema_extra={"type": ["string", "array"]},
                       description="the trace text; a chat completion (a list of messages, whose assistant "
                       "contents are joined) is accepted too")
    problem_id: str | None = Field(default=None, description="score against this problem instead of the one reset() "
                                   "drew (stateless use, e.g. HTTP POST /step)")


class CalverObservation(Observation):
    """What the policy sees at reset (the prompt) and what the verifier says at the step (bits and reasons)."""

    problem_id: str = Field(default="", description="the problem's id")
    task: str = Field(default="", description="the problem's task family")
    prompt: list[dict[str, str]] = Field(default_factory=list, description="reset: chat messages [system, user]")
    problem: dict[str, Any] = Field(default_factory=dict, description="reset: the firewall-stripped problem (JSON)")
    bits: dict[str, int] = Field(default_factory=dict, description="step: the six verifier bits by part name")
    total: int = Field(default=0, description="step: S, the number of bits that pass (0..6)")
    reasons: dict[str, str] = Field(default_factory=dict, description="step: slot -> why its bit failed")
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
    """The verifier's reward as an OpenEnv rubric of six named parts (``graph`` .. ``answer``, in slot order).

    ``variant="fraction"``: the mean of the parts (S/6); ``"strict"``: 1.0 only when all six pass."""

    def __init__(self, variant: str = "fraction") -> None:
        super().__init__()
        if variant not in REWARD_VARIANTS:
            raise ValueError(f"reward variant must be one of {REWARD_VARIANTS}, got {variant!r}")
        self.variant = variant
        for name in PART_NAMES:
            setattr(self, name, VerifierBit(name))

    def forward(self, action: Any, observation: Any) -> float:
        parts = [child(action, observation) for child in self.children()]
        if self.variant == "strict":
            return 1.0 if all(p == 1.0 for p in parts) else 0.0
        return sum(parts) / len(parts)

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
    prepared: PreparedProblem  # the full problem, prepared once: scoring is grounded on its source


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
    if not (allow_ungrounded or prepared.grounded):
        raise ValueError(f"problem {pid!r} ({problem.task}) is in constructed mode without its source graph: its "
                         "reward would measure the trace's consistency with its own GRAPH, not correctness "
                         "(pass allow_ungrounded to serve it anyway)")
    return ServedProblem(pid, problem.task, prompt, view, prepared)


class ProblemSet:
    """The problems an environment server draws from (shared, read-only, by every session)."""

    def __init__(self, problems: Iterable[Problem], *, allow_ungrounded: bool = False) -> None:
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
        from calver.data_gen.cli import resolve_tasks
        from calver.data_gen.gen_config import GenConfig
        from calver.data_gen.generators import generate

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
        Raises ``ValueError`` for an unknown id."""
        if problem_id is not None:
            hit = self.by_id.get(str(problem_id))
            if hit is None:
                raise ValueError(f"unknown problem_id {problem_id!r} ({len(self)} problems served)")
            return hit
        if index is not None:
            return self.items[int(index) % len(self.items)]
        if seed is not None:
            return self.items[random.Random(f"calver-env/{int(seed)}").randrange(len(self.items))]
        with self._lock:
            i = next(self._cursor)
        return self.items[i % len(self.items)]


# ---- the environment ----------------------------------------------------------------------------------------
def _trace_text(trace: Any) -> tuple[str | None, str]:
    """``(text, "")`` or ``(None, why)``: a string as is; a chat completion's assistant contents joined."""
    if isinstance(trace, str):
        return trace, ""
    if trace is None:
        return None, "no trace in the action"
    if not isinstance(trace, list):
        return None, f"the trace is a {type(trace).__name__}, not text or a list of chat messages"
    from calver.train.rewards import read_completion  # torch-free; TRL's completion shapes

    text, why = read_completion(trace)
    return text, (why if text is None else "")


class CalverEnvironment(Environment[TraceAction, CalverObservation, CalverState]):
    """Single-step verifier environment over a shared :class:`ProblemSet` (one instance per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # sessions share only the read-only problem set

    def __init__(self, problems: ProblemSet, reward: str = "fraction", max_trace_chars: int = MAX_TRACE_CHARS
                 ) -> None:
        super().__init__(rubric=VerifierRubric(reward))
        self.problems = problems
        self.max_trace_chars = int(max_trace_chars)
        self._problem: ServedProblem | None = None
        self._state = CalverState()

    # -- OpenEnv API --
    def reset(self, seed: int | None = None, episode_id: str | None = None, problem_id: str | None = None,
              index: int | None = None, **kwargs: Any) -> CalverObservation:
        """Start an episode on one problem (see :meth:`ProblemSet.pick`); extra keyword arguments (e.g. a
        dataset row's other columns) are ignored."""
        self._reset_rubric()
        sp = self.problems.pick(problem_id=problem_id, index=index, seed=seed)
        self._problem = sp
        self._state = CalverState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, problem_id=sp.id,
                                  task=sp.task, done=False)
        return CalverObservation(problem_id=sp.id, task=sp.task, prompt=[dict(m) for m in sp.prompt],
                                 problem=json.loads(sp.view), done=False, reward=None)

    def step(self, action: TraceAction, timeout_s: float | None = None, **kwargs: Any) -> CalverObservation:
        """Score the trace; the episode ends (``done=True``). Never raises (see the module doc)."""
        self._state.step_count += 1
        try:
            return self._step(action)
        except Exception as e:  # noqa: BLE001 - an action must never fail the session
            return self._unscorable(f"environment error: {type(e).__name__}: {e}", self._problem)

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
        named = getattr(action, "problem_id", None)
        if named is not None:  # a self-contained single-step episode on the named problem
            sp = self.problems.by_id.get(str(named))
            if sp is None:
                return self._unscorable(f"unknown problem_id {named!r}", None, problem_id=str(named))
        else:
            sp = self._problem
            if sp is None:
                return self._unscorable("no problem: call reset() first (or name problem_id in the action)", None)
            if self._state.done:
                return self._unscorable("the episode is over (one step per episode): call reset()", sp)
        self._state.done = True
        text, why = _trace_text(getattr(action, "trace", None))
        if text is None:
            return self._unscorable(f"unscorable trace: {why}", sp)
        if len(text) > self.max_trace_chars:
            return self._unscorable(f"trace is {len(text)} characters, over the limit of {self.max_trace_chars}", sp)
        try:
            with _SCORE_LOCK:
                ts = score(text, sp.prepared)
        except Exception as e:  # noqa: BLE001 - a scorer bug: this action is unscorable, the server goes on
            return self._unscorable(f"scorer error: {type(e).__name__}: {e}"[:300], sp)
        obs = CalverObservation(problem_id=sp.id, task=sp.task, bits=dict(zip(PART_NAMES, map(int, ts.bits))),
                                total=int(ts.total), reasons={str(k): str(v) for k, v in ts.reasons.items()},
                                done=True)
        obs.reward = float(self._apply_rubric(action, obs))
        return obs

    def _unscorable(self, why: str, sp: ServedProblem | None, problem_id: str = "") -> CalverObservation:
        self._reset_rubric()
        self._state.done = True
        return CalverObservation(problem_id=sp.id if sp else problem_id, task=sp.task if sp else "",
                                 bits=dict.fromkeys(PART_NAMES, 0), total=0, unscorable=True, error=why[:500],
                                 done=True, reward=None)


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


# ---- the server ---------------------------------------------------------------------------------------------
def build_app(problems: ProblemSet, *, reward: str = "fraction", max_sessions: int = 64,
              max_trace_chars: int = MAX_TRACE_CHARS):
    """The FastAPI app of OpenEnv's server (``create_app``) for this environment: ``/ws`` sessions (what
    ``EnvClient`` uses), stateless ``/reset`` and ``/step``, ``/state``, ``/schema``, ``/metadata``, ``/health``."""
    from openenv.core.env_server.http_server import create_app

    if reward not in REWARD_VARIANTS:
        raise ValueError(f"reward variant must be one of {REWARD_VARIANTS}, got {reward!r}")
    factory = functools.partial(CalverEnvironment, problems, reward=reward, max_trace_chars=max_trace_chars)
    return create_app(factory, TraceAction, CalverObservation, env_name=ENV_NAME, max_concurrent_envs=max_sessions)


def serve(problems: ProblemSet, *, host: str = "127.0.0.1", port: int = 8008, reward: str = "fraction",
          max_sessions: int = 64, max_trace_chars: int = MAX_TRACE_CHARS, log_level: str = "warning") -> None:
    """Run the server (blocking) with uvicorn, as OpenEnv's environment servers run."""
    import uvicorn

    app = build_app(problems, reward=reward, max_sessions=max_sessions, max_trace_chars=max_trace_chars)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


# ---- a TRL environment_factory adapter -----------------------------------------------------------------------
class TRLVerifierEnv:
    """An environment for TRL's ``GRPOTrainer(environment_factory=...)`` backed by a ``calver serve-env`` server.

    TRL (1.16) pools instances, calls ``reset(**row)`` before each rollout and ``get_reward()`` after it, and exposes
    public methods as tools: here one, :meth:`submit_trace`. ``reset`` uses the row's ``id`` (the ``calver gen``
    GRPO dataset's column) to score against that problem; without a dataset it takes the server's next problem and
    returns its prompt text, which TRL appends to the (empty) user turn. ``environment_factory`` is experimental
    in TRL and needs a chat template that can call tools. Each instance holds one WebSocket session: start the
    server with ``--max_sessions`` at least the number of rollouts TRL runs at once."""

    def __init__(self, base_url: str = "http://127.0.0.1:8008") -> None:
        self._client = CalverEnvClient(base_url=base_url).sync()
        self._reward: float | None = 0.0
        self._problem_id: str | None = None

    def reset(self, **row: Any) -> str | None:
        self._reward = 0.0  # a rollout that never submits a trace earns what a garbage trace earns
        pid = row.get("id")
        result = self._client.reset(**({"problem_id": str(pid)} if pid else {}))
        self._problem_id = result.observation.problem_id
        if pid:  # the row's own prompt is the problem's: nothing to add
            return None
        # no dataset row: TRL appends this to an empty user turn, so it carries the contract instructions too
        return "\n\n".join(m["content"] for m in result.observation.prompt)

    def submit_trace(self, trace: str) -> str:
        """Submit the final six-slot contract trace for verification.

        Args:
            trace: The complete trace (GRAPH, QUERY, STRATEGY, DERIVATION, RESULT and ANSWER slots).

        Returns:
            The verifier's verdict: the bits that passed and why the others failed.
        """
        result = self._client.step(TraceAction(trace=trace, problem_id=self._problem_id))
        obs = result.observation
        self._reward = result.reward
        if obs.unscorable:
            return f"unscorable: {obs.error}"
        return json.dumps({"bits": obs.bits, "reasons": obs.reasons})

    def get_reward(self) -> float | None:
        """The last submission's reward (the last one counts); 0.0 without one; None when it was unscorable."""
        return self._reward

    def _close(self) -> None:
        self._client.close()
