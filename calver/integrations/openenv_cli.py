"""``calver serve-env``: the verifier as an OpenEnv environment server (:mod:`calver.integrations.openenv_env`).

    calver serve-env --tasks backdoor_set --n 100 --seed 0              # generated, as `calver gen` makes them
    calver serve-env --problems data/bd                                  # a `calver gen --out` folder or a JSONL
    calver serve-env --tasks all --n 20 --seed 1 --port 8008 --reward strict

One episode per problem: reset -> the prompt and a one-use ticket; step(trace) -> reward (S/6, or strict 0/1),
done, the six bits and the names of the failed slots. One scored step per episode; the verifier's reasons go to
the server log (``--log_level info``), never to the client. Clients: OpenEnv's EnvClient
(``calver.integrations.openenv_env.CalverEnvClient``) over the WebSocket ``/ws``; OpenEnv's HTTP ``/reset``,
``/step`` (stateless: pass the reset's ``ticket`` in the action), ``/state``, ``/schema``, ``/metadata`` and
``/health`` are served too. WebSockets idle for ``--idle_timeout_s`` are closed; each client address may hold
at most ``--max_sessions_per_client`` sessions.

Binds 127.0.0.1 by default: the server has no authentication; give ``--host`` another address only on a network you
trust. Needs OpenEnv (``openenv`` 0.10; ``docs/integrations.md`` has the lean install). Also runs standalone:
``python -m calver.integrations.openenv_cli`` with the same flags.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

DEFAULT_PORT = 8008
DEFAULT_N = 100


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("serve-env", help="serve the verifier as a single-step OpenEnv environment (localhost)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run_serve_env)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--problems", metavar="PATH",
                     help="problems.jsonl (or a folder holding one, e.g. a `calver gen --out` folder)")
    src.add_argument("--tasks", "--task", nargs="+", metavar="TASK",
                     help="generate problems of these tasks ('all': every task with a generator)")
    p.add_argument("--n", type=int, default=DEFAULT_N, help=f"with --tasks: problems per task (default {DEFAULT_N})")
    p.add_argument("--seed", type=int, default=0, help="with --tasks: the generator seed (default 0)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--reward", choices=("fraction", "strict", "validity"), default="fraction",
                   help="fraction: S/6 (default); strict: 1.0 only when all six bits pass; validity: STRATEGY and "
                   "ANSWER weigh most")
    p.add_argument("--max_sessions", "--max-sessions", type=int, default=64,
                   help="concurrent WebSocket sessions (default 64)")
    p.add_argument("--max_sessions_per_client", "--max-sessions-per-client", type=int, default=None,
                   help="WebSocket sessions one client address may hold (default: 3/4 of --max_sessions)")
    p.add_argument("--idle_timeout_s", "--idle-timeout-s", type=float, default=300.0,
                   help="close a WebSocket that sends nothing for this long (default 300 s)")
    p.add_argument("--max_trace_chars", "--max-trace-chars", type=int, default=32_000,
                   help="longer traces are unscorable (default 32000)")
    p.add_argument("--budget_s", "--budget-s", type=float, default=None,
                   help="per-step scoring budget in seconds: steps score on worker processes, and a trace over it "
                   "gets reward 0.0 (default: none, in-process)")
    p.add_argument("--workers", type=int, default=0,
                   help="scoring worker processes, shared by every session (default 0: in each session's thread)")
    p.add_argument("--allow_ungrounded", "--allow-ungrounded", action="store_true",
                   help="also serve constructed-mode problems without their source graph (their reward measures "
                        "a trace's self-consistency, not correctness)")
    p.add_argument("--log_level", "--log-level", default="warning",
                   choices=("critical", "error", "warning", "info", "debug", "trace"), help="uvicorn's log level")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_serve_env(args: argparse.Namespace) -> int:
    try:
        from calver.integrations import openenv_env as oe
        from calver.integrations.openenv_server import serve
    except ImportError as e:
        print(f"calver serve-env: error: OpenEnv is not importable ({e}); install it as docs/integrations.md "
              "says (`pip install -e .[env]` then `pip install --no-deps openenv==0.10.0`), or run "
              "scripts/setup_env.sh", file=sys.stderr)
        return 2
    for name in ("n", "port", "max_sessions", "max_sessions_per_client", "max_trace_chars"):
        value = getattr(args, name)
        if value is not None and (value < (0 if name == "port" else 1) or (name == "port" and value > 65535)):
            print(f"calver serve-env: error: --{name} {value} is out of range", file=sys.stderr)
            return 2
    if args.workers < 0 or (args.budget_s is not None and not 0 < args.budget_s <= 3600):
        print(f"calver serve-env: error: --workers {args.workers} / --budget_s {args.budget_s} out of range",
              file=sys.stderr)
        return 2
    if not 0 < args.idle_timeout_s <= 86_400:
        print(f"calver serve-env: error: --idle_timeout_s {args.idle_timeout_s} is out of range (0, 86400]",
              file=sys.stderr)
        return 2
    try:
        if args.problems:
            problems = oe.ProblemSet.from_file(args.problems, allow_ungrounded=args.allow_ungrounded)
            source = args.problems
        elif args.tasks:
            problems = oe.ProblemSet.generated(args.tasks, args.n, args.seed)
            source = f"generated: tasks {' '.join(args.tasks)}, n {args.n} each, seed {args.seed}"
        else:
            print("calver serve-env: error: pass --problems PATH or --tasks TASK [...] (with --n, --seed)",
                  file=sys.stderr)
            return 2
    except (OSError, ValueError, KeyError, RuntimeError) as e:  # ConfigError is a ValueError
        print(f"calver serve-env: error: {e}", file=sys.stderr)
        return 2
    if not _is_loopback(args.host):
        print(f"calver serve-env: warning: binding {args.host}, not a loopback address: anyone who reaches it can "
              "use the server (it has no authentication)", file=sys.stderr)
    print(f"calver serve-env: {len(problems)} problems ({source}; tasks {', '.join(problems.tasks())}), reward "
          f"{args.reward}; OpenEnv server on http://{args.host}:{args.port} (WebSocket /ws; /reset /step /state "
          "/schema /metadata /health)", file=sys.stderr, flush=True)
    logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("calver.serve_env").setLevel(args.log_level.upper() if args.log_level != "trace" else "DEBUG")
    try:
        serve(problems, host=args.host, port=args.port, reward=args.reward, max_sessions=args.max_sessions,
              max_sessions_per_client=args.max_sessions_per_client, idle_timeout_s=args.idle_timeout_s,
              max_trace_chars=args.max_trace_chars, budget_s=args.budget_s, workers=args.workers,
              log_level=args.log_level)
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    from calver.config import ArgumentParser

    p = ArgumentParser(prog="calver serve-env", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run_serve_env(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
