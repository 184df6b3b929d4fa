"""``calver serve-env``'s server: OpenEnv's FastAPI app for :class:`~calver.integrations.openenv_env.CalverEnvironment`,
behind a guard that keeps one client from locking the others out.

OpenEnv's ``create_app`` serves ``/ws`` sessions (what ``EnvClient`` uses), stateless ``/reset`` and ``/step``,
``/state``, ``/schema``, ``/metadata`` and ``/health``. Left alone, its sessions never expire and ``/mcp`` creates
sessions over plain HTTP that hold no connection: 64 idle WebSockets or 64 POSTs locked every other client out
(verifier audit 2026-12-03, M1). :class:`Guard`, a plain ASGI middleware around the app:

- closes a WebSocket that sends nothing for ``idle_timeout_s``, or nothing at all within ``first_message_s`` of
  connecting (the app sees the client go and frees the session; OpenEnv's own idle reaper gets the same timeout);
- caps open WebSockets per client address (``max_sessions_per_client``) and in all (``max_sessions``); when a
  cap is reached, a new connection evicts the longest-idle one of that client (or of all) if it has been idle
  ``evict_idle_s`` (or silent since it connected, 1 s), so idle connections cannot lock active clients out
  (on loopback every client has the same address); only when every session is active is a newcomer refused
  (HTTP 403);
- refuses ``/mcp`` (this environment has no MCP tools; its session-create needs no connection to hold a slot);
- bounds every HTTP body (``max_body_bytes``, HTTP 413) and every WebSocket message (uvicorn's ``ws_max_size``);
- validates ``POST /reset``'s arguments, so an odd ``index`` or ``problem_id`` gets HTTP 422 with a message,
  never a 500 and a server traceback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from typing import Any, Awaitable, Callable

from calver.integrations.openenv_env import (
    ENV_NAME,
    MAX_TRACE_CHARS,
    CalverEnvironment,
    CalverObservation,
    ProblemSet,
    TraceAction,
    check_pick_args,
)
from calver.reward import RewardEngine, RewardSpec

MAX_SESSIONS = 64
IDLE_TIMEOUT_S = 300.0  # a rollout's generation happens between reset and step: minutes on a CPU
FIRST_MESSAGE_S = 10.0  # a connection that has not sent its first message (its reset) by then is closed
EVICT_IDLE_S = 15.0  # when full, a new connection evicts the longest-idle one if it has been idle this long
SILENT_EVICT_S = 1.0  # ... or one that has sent nothing at all for this long

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def body_limit(max_trace_chars: int) -> int:
    """Bytes of one request: a trace of ``max_trace_chars`` characters at 4 UTF-8 bytes each, JSON-escaped
    (up to 6 bytes a character), plus the envelope."""
    return 6 * max_trace_chars + 64 * 1024


class _Conn:
    """One open WebSocket: its client address, when it last sent something, and how it is to end."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.last = time.monotonic()
        self.talked = False  # sent a message yet
        self.evicted = False
        self.closed = False  # closed by the guard: the app's later sends are dropped
        self.wake = asyncio.Event()
        self.gone = asyncio.Event()


class Guard:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app: Any, *, problems: ProblemSet, max_sessions: int = MAX_SESSIONS,
                 max_sessions_per_client: int = MAX_SESSIONS, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 first_message_s: float = FIRST_MESSAGE_S, evict_idle_s: float = EVICT_IDLE_S,
                 max_body_bytes: int = body_limit(MAX_TRACE_CHARS)) -> None:
        self.app = app
        self.problems = problems
        self.max_total = int(max_sessions)
        self.max_per_client = int(max_sessions_per_client)
        self.idle_timeout_s = float(idle_timeout_s)
        self.first_message_s = float(first_message_s)
        self.evict_idle_s = float(evict_idle_s)
        self.max_body = int(max_body_bytes)
        self._conns: list[_Conn] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind, path = scope.get("type"), scope.get("path", "")
        if kind in ("http", "websocket") and (path == "/mcp" or path.startswith("/mcp/")):
            return await self._refuse(scope, send, 404, "this environment serves no MCP endpoint")
        if kind == "websocket":
            return await self._websocket(scope, receive, send)
        if kind == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            return await self._http_body(scope, receive, send)
        return await self.app(scope, receive, send)

    # -- WebSocket: a cap per client and in all, an idle timeout, eviction of the longest idle --
    def _admit(self, host: str) -> tuple[_Conn | None, _Conn | None]:
        """(the new connection, or None when refused; the connection evicted to make room, if any)."""
        with self._lock:
            mine = [c for c in self._conns if c.host == host]
            pool = mine if len(mine) >= self.max_per_client else self._conns if len(self._conns) >= self.max_total \
                else None
            victim = None
            if pool is not None:
                now = time.monotonic()
                # a client sends its reset right after connecting: one that has said nothing for a second holds
                # a slot for nothing; one that talked and then went quiet for evict_idle_s is the next candidate
                idle = [c for c in pool if not c.evicted and now - c.last >= (self.evict_idle_s if c.talked else
                                                                               SILENT_EVICT_S)]
                if not idle:
                    return None, None
                victim = min(idle, key=lambda c: c.last)
                victim.evicted = True
            conn = _Conn(host)
            self._conns.append(conn)
        return conn, victim

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        host = str((scope.get("client") or ("?",))[0])
        conn, victim = self._admit(host)
        if conn is None:
            await receive()  # the websocket.connect event, then refuse before accepting (HTTP 403 to the client)
            return await send({"type": "websocket.close", "code": 1013, "reason": "server busy: every session is "
                               "active (at most {} per client)".format(self.max_per_client)})
        try:
            if victim is not None:
                victim.wake.set()
                try:  # its session is freed when the app sees it go: wait for that before opening another
                    await asyncio.wait_for(victim.gone.wait(), 10.0)
                except asyncio.TimeoutError:
                    pass
            await self._serve_ws(conn, scope, receive, send)
        finally:
            with self._lock:
                self._conns.remove(conn)
            conn.gone.set()

    async def _serve_ws(self, conn: _Conn, scope: Scope, receive: Receive, send: Send) -> None:
        async def tracked_receive() -> dict[str, Any]:
            message = await receive()  # awaited in the app's own task: uvicorn's WebSocket keeps working as is
            conn.last = time.monotonic()
            if message.get("type") == "websocket.receive":
                conn.talked = True
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            if conn.closed:
                return
            if message.get("type") != "websocket.close":
                return await send(message)
            try:  # closing a socket the client already closed is a no-op (OpenEnv's endpoint always closes)
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected
                pass

        async def watchdog() -> None:
            while True:
                now = time.monotonic()
                limit = self.idle_timeout_s if conn.talked else min(self.first_message_s, self.idle_timeout_s)
                why = "evicted: the server is full and this session was the longest idle" if conn.evicted else \
                    "idle timeout" if now - conn.last >= limit else ""
                if why:
                    conn.closed = True  # the client's close reply ends the app's receive: it frees the session
                    try:
                        await send({"type": "websocket.close", "code": 1001, "reason": why})
                    except OSError:
                        pass
                    return
                try:
                    await asyncio.wait_for(conn.wake.wait(), min(limit - (now - conn.last), 5.0) + 0.01)
                except asyncio.TimeoutError:
                    pass

        dog = asyncio.create_task(watchdog())
        try:
            await self.app(scope, tracked_receive, guarded_send)
        finally:
            dog.cancel()

    # -- HTTP: a bounded body, and /reset's arguments checked --
    async def _http_body(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            return await self._refuse(scope, send, 413, f"request body over {self.max_body} bytes")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await self._refuse(scope, send, 413, f"request body over {self.max_body} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if scope.get("path") == "/reset":
            why = self._bad_reset(body)
            if why:
                return await self._refuse(scope, send, 422, why)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    def _bad_reset(self, body: bytes) -> str:
        """Why ``POST /reset``'s JSON arguments are unusable, or "" (bad JSON is left to OpenEnv: its 422)."""
        try:
            args = json.loads(body) if body.strip() else {}
        except (ValueError, RecursionError):
            return ""
        if not isinstance(args, dict):
            return ""
        try:
            check_pick_args(problem_id=args.get("problem_id"), index=args.get("index"), seed=args.get("seed"))
        except ValueError as e:
            return str(e)
        pid = args.get("problem_id")
        if pid is not None and pid not in self.problems.by_id:
            return f"unknown problem_id {pid[:80]!r} ({len(self.problems)} problems served)"
        return ""

    @staticmethod
    async def _refuse(scope: Scope, send: Send, status: int, why: str) -> None:
        if scope.get("type") == "websocket":
            return await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
        body = json.dumps({"detail": why}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def build_app(problems: ProblemSet, *, reward: str = "fraction", max_sessions: int = MAX_SESSIONS,
              max_sessions_per_client: int | None = None, idle_timeout_s: float = IDLE_TIMEOUT_S,
              max_trace_chars: int = MAX_TRACE_CHARS, budget_s: float | None = None, workers: int = 0) -> Guard:
    """OpenEnv's app (``create_app``) for this environment, wrapped in :class:`Guard`. ``max_sessions_per_client``
    defaults to three quarters of ``max_sessions``, so one address cannot take every session."""
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.types import ConcurrencyConfig

    RewardSpec(reward)  # raises on an unknown variant (or one that needs weights)
    per_client = max(1, (3 * max_sessions) // 4) if max_sessions_per_client is None else max_sessions_per_client
    engine = RewardEngine(allow_ungrounded=problems.allow_ungrounded, budget_s=budget_s, workers=workers)
    factory = functools.partial(CalverEnvironment, problems, reward=reward, max_trace_chars=max_trace_chars,
                                engine=engine)  # one engine: every session shares its problem cache and workers
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s)
    app = create_app(factory, TraceAction, CalverObservation, env_name=ENV_NAME, concurrency_config=config)
    return Guard(app, problems=problems, max_sessions=max_sessions, max_sessions_per_client=per_client,
                 idle_timeout_s=idle_timeout_s, max_body_bytes=body_limit(max_trace_chars))


def serve(problems: ProblemSet, *, host: str = "127.0.0.1", port: int = 8008, reward: str = "fraction",
          max_sessions: int = MAX_SESSIONS, max_sessions_per_client: int | None = None,
          idle_timeout_s: float = IDLE_TIMEOUT_S, max_trace_chars: int = MAX_TRACE_CHARS,
          budget_s: float | None = None, workers: int = 0, log_level: str = "warning") -> None:
    """Run the server (blocking) with uvicorn, as OpenEnv's environment servers run."""
    import uvicorn

    app = build_app(problems, reward=reward, max_sessions=max_sessions, max_sessions_per_client=max_sessions_per_client,
                    idle_timeout_s=idle_timeout_s, max_trace_chars=max_trace_chars, budget_s=budget_s, workers=workers)
    uvicorn.run(app, host=host, port=port, log_level=log_level, ws_max_size=body_limit(max_trace_chars))
