"""``calver serve-reward``: the verifier behind OpenRLHF's HTTP reward protocol.

    calver serve-reward --port 5000                       # then, in OpenRLHF:
    --reward.remote_url http://127.0.0.1:5000/get_reward --data.label_key problem_json

OpenRLHF's agent executor POSTs ``{"query": [...], "prompts": [...], "labels": [...]}`` (decoded prompt +
response with special tokens, the prompts, the ``--data.label_key`` column: a ``calver gen`` problem JSON) and
reads ``rewards``, ``scores`` and ``extra_logs`` from the JSON answer::

    {"rewards": [r, ...], "scores": [r, ...],
     "extra_logs": {"calver/graph": [b1, ...], ..., "calver/answer": [b6, ...], "calver/unscorable": [0|1, ...]}}

The same scoring as the reward file (:mod:`calver.integrations.openrlhf`: response cut by chat markers,
end-of-turn tokens of any major template removed, options from the flags or the ``CALVER_REWARD_*``
environment). Requests are scored in threads and share one engine (and its worker pool with ``--workers``).
Binds 127.0.0.1 by default (no authentication); bodies over ``--max_body_mb`` get 413, more than
``--max_rows`` queries 413, a body that is not the protocol's JSON 400; a client that stalls mid-request is
dropped after ``--request_timeout_s``. Also runs standalone: ``python -m calver.integrations.openrlhf_server``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from calver.integrations.openrlhf import CHATML, ChatMarkers, columns, markers_from_tokenizer, score_queries
from calver.reward import RewardOptions

LOG = logging.getLogger("calver.serve_reward")
DEFAULT_PORT = 5000
PATH = "/get_reward"


def answer(payload: Any, markers: ChatMarkers, options: RewardOptions, max_rows: int) -> tuple[int, dict[str, Any]]:
    """``(HTTP status, JSON body)`` for one request body (already parsed)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), list):
        return 400, {"error": 'expected a JSON object with a "query" list (and "prompts", "labels" lists)'}
    queries = payload["query"]
    if len(queries) > max_rows:
        return 413, {"error": f"{len(queries)} queries in one request; at most {max_rows}"}
    for key in ("prompts", "labels"):
        if payload.get(key) is not None and not isinstance(payload[key], list):
            return 400, {"error": f'"{key}" must be a list'}
    results, spec = score_queries(queries, payload.get("prompts"), payload.get("labels"), markers, options)
    rewards, logs = columns(results, spec)
    return 200, {"rewards": rewards, "scores": rewards, "extra_logs": logs}


class RewardServer(ThreadingHTTPServer):
    daemon_threads = True  # a stalled client never keeps the process alive

    def __init__(self, address: tuple[str, int], options: RewardOptions, markers: ChatMarkers = CHATML, *,
                 max_body_bytes: int = 32 << 20, max_rows: int = 4096, request_timeout_s: float = 60.0) -> None:
        self.options, self.markers = options, markers
        self.max_body_bytes, self.max_rows = max_body_bytes, max_rows
        handler = type("Handler", (_Handler,), {"timeout": request_timeout_s})
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    server: RewardServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        LOG.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status >= 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": f"POST {PATH}"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path.split("?")[0] != PATH:
            self._send(404, {"error": f"unknown path; POST {PATH}"})
            return
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            self._send(411, {"error": "a Content-Length is required"})
            return
        if length < 0 or length > self.server.max_body_bytes:
            self._send(413, {"error": f"body of {length} bytes; at most {self.server.max_body_bytes}"})
            return
        try:
            payload = json.loads(self.rfile.read(length))
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self._send(400, {"error": f"body is not JSON: {type(e).__name__}"})
            return
        status, body = answer(payload, self.server.markers, self.server.options, self.server.max_rows)
        self._send(status, body)


def serve_in_thread(server: RewardServer) -> threading.Thread:
    """Run ``server`` in a daemon thread (tests, notebooks); ``server.shutdown()`` stops it."""
    t = threading.Thread(target=server.serve_forever, name="calver-serve-reward", daemon=True)
    t.start()
    return t


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("serve-reward", help="serve the verifier as an OpenRLHF HTTP reward (localhost)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: no authentication)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--variant", default=None, help="fraction | strict | weighted | validity (default: environment, "
                   "else fraction)")
    p.add_argument("--weights", default=None, help="six comma-separated per-bit weights (variant weighted)")
    p.add_argument("--budget_s", type=float, default=None, help="per-completion time budget (worker processes)")
    p.add_argument("--workers", type=int, default=None, help="scoring worker processes (default 0: in-process)")
    p.add_argument("--allow_ungrounded", action="store_true", default=None,
                   help="score constructed-mode problems without their source graph")
    p.add_argument("--tokenizer", default=None, help="a local tokenizer whose chat template gives the markers "
                   "(default: ChatML plus every major template's end-of-turn tokens)")
    p.add_argument("--max_body_mb", type=float, default=32.0, help="largest request body (default 32)")
    p.add_argument("--max_rows", type=int, default=4096, help="most queries per request (default 4096)")
    p.add_argument("--request_timeout_s", type=float, default=60.0, help="drop a client that stalls this long")
    p.add_argument("--log_level", default="warning", help="debug | info | warning (default warning)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING))
    try:
        options = RewardOptions.parse({k: getattr(args, k) for k in ("variant", "weights", "budget_s", "workers",
                                                                     "allow_ungrounded")},
                                      base=RewardOptions.from_env())
        markers = CHATML
        if args.tokenizer:
            from transformers import AutoTokenizer

            markers = markers_from_tokenizer(AutoTokenizer.from_pretrained(args.tokenizer))
        server = RewardServer((args.host, args.port), options, markers, max_body_bytes=int(args.max_body_mb * 2**20),
                              max_rows=args.max_rows, request_timeout_s=args.request_timeout_s)
    except (ValueError, OSError, ImportError) as e:
        print(f"calver serve-reward: error: {e}", file=sys.stderr)
        return 2
    print(f"calver serve-reward: http://{args.host}:{server.server_address[1]}{PATH} ({options.variant})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calver.integrations.openrlhf_server", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
