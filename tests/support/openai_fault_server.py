"""A small OpenAI-style chat server on 127.0.0.1 that misbehaves on purpose, for the `openai`
engine's fault tests: 429, 5xx, slow replies, connections closed mid-request, a server that
dies. It answers like a server with constrained choice (vLLM's `structured_outputs`, or a
`response_format` enum schema) and no `/tokenize`, so the engine takes structured choice; with
`tokenize=True` it also tokenises as vLLM does (`/tokenize`, `/detokenize`, word by word) and
answers a step restricted to `allowed_token_ids` with their log-probabilities, so the engine
reads first tokens. `path_faults` holds actions for the start-up routes, by path.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fault-model"


class FaultServer:
    """`faults`: actions for the next chat requests, one each, consumed in arrival order:
    ("status", code[, retry_after]), ("slow", seconds), ("close",), ("die",), ("hang",).
    Once empty, requests are answered normally. `choice_support`: False answers free text
    whatever is asked (a server that can neither constrain nor give log-probabilities)."""

    def __init__(self, port: int = 0, choice_support: bool = True, key: str | None = None, die_after: int | None = None,
                 tokenize: bool = False):
        self.faults: list[tuple] = []
        # ("status", code), ("close",) or ("ok",) for the next requests to a path ("/tokenize", ...)
        self.path_faults: dict[str, list[tuple]] = {}
        self.hits: dict[str, int] = {}  # requests per path, every route
        self.tokenize = tokenize
        self.vocab: dict[str, int] = {}  # word (with its leading space) -> token id, as first seen
        self.requests: list[dict] = []  # chat bodies, in arrival order
        self.auth: list[str | None] = []
        self.in_flight = self.max_in_flight = 0
        self.choice_support, self.key, self.die_after = choice_support, key, die_after
        self.lock = threading.Lock()
        self.hung = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.hung.set()
        self.stop()

    def encode(self, text: str) -> list[int]:
        with self.lock:
            return [self.vocab.setdefault(w, len(self.vocab) + 100) for w in re.findall(r"\s*\S+", text)]

    def decode(self, ids: list[int]) -> str:
        words = {i: w for w, i in self.vocab.items()}
        return "".join(words.get(i, "") for i in ids)

    def answer(self, body: dict) -> str:
        """What a constrained server would say: the first allowed label (free text otherwise)."""
        if self.choice_support and "structured_outputs" in body:
            return body["structured_outputs"]["choice"][0]
        if self.choice_support and "response_format" in body:
            schema = body["response_format"]["json_schema"]["schema"]
            return json.dumps({"verdict": schema["properties"]["verdict"]["enum"][0]})
        return "Hello there, nice to meet you!"


def _handler(server: FaultServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def reply(self, code: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:  # the client gave up waiting (a timeout under test): nothing to say
                self.close_connection = True

        def authorised(self) -> bool:
            got = self.headers.get("Authorization")
            with server.lock:
                server.auth.append(got)
            if server.key is not None and got != f"Bearer {server.key}":
                # Some servers echo what they were sent: the engine must not repeat it.
                self.reply(401, {"error": {"message": f"invalid API key: {got}"}})
                return False
            return True

        def path_fault(self) -> bool:
            """Act out the next fault planted for this path; True if it answered."""
            with server.lock:
                server.hits[self.route] = server.hits.get(self.route, 0) + 1
                queue = server.path_faults.get(self.route) or []
                fault = queue.pop(0) if queue else None
            if fault is None or fault[0] == "ok":
                return False
            if fault[0] == "status":
                self.reply(fault[1], {"error": {"message": f"fault {fault[1]}"}})
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            return True

        @property
        def route(self) -> str:  # the path without a query string (which may carry a key)
            return self.path.partition("?")[0]

        def do_GET(self):
            if not self.authorised() or self.path_fault():
                return
            if self.route == "/v1/models":
                self.reply(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "tests"}]})
            elif self.route == "/version":
                self.reply(200, {"version": "fault-0.1"})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.authorised() or self.path_fault():
                return
            if server.tokenize and self.route == "/tokenize":
                text = body.get("prompt") if "prompt" in body else ""  # a chat: its template adds nothing
                self.reply(200, {"tokens": server.encode(text), "count": 0, "max_model_len": 4096})
                return
            if server.tokenize and self.route == "/detokenize":
                self.reply(200, {"prompt": server.decode(body.get("tokens", []))})
                return
            if self.route != "/v1/chat/completions":
                self.reply(404, {"error": "not found"})
                return
            with server.lock:
                server.requests.append(body)
                n = len(server.requests)
                fault = server.faults.pop(0) if server.faults else ("ok",)
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                self.act(fault, body, n)
            finally:
                with server.lock:
                    server.in_flight -= 1

        def act(self, fault: tuple, body: dict, n: int) -> None:
            kind = fault[0]
            if server.die_after is not None and n > server.die_after:
                kind = "die"
            if kind == "status":
                headers = {"Retry-After": str(fault[2])} if len(fault) > 2 else None
                self.reply(fault[1], {"error": {"message": f"fault {fault[1]}"}}, headers)
                return
            if kind in ("close", "die"):
                self.connection.shutdown(socket.SHUT_RDWR)  # no reply: the client sees the connection drop
                self.close_connection = True
                if kind == "die":
                    threading.Thread(target=server.stop, daemon=True).start()
                return
            if kind == "hang":
                server.hung.wait(60)
                return
            if kind == "slow":
                time.sleep(fault[1])
            choice = {"index": 0, "message": {"role": "assistant", "content": server.answer(body)},
                      "finish_reason": "stop"}
            allowed = body.get("allowed_token_ids")
            if server.tokenize and allowed and body.get("logprobs"):
                # A restricted step, processed log-probabilities: the first allowed token likeliest.
                lps = [-0.1] + [-4.0] * (len(allowed) - 1)
                top = [{"token": f"token_id:{t}", "logprob": lp} for t, lp in zip(allowed, lps)]
                choice["message"]["content"] = server.decode(allowed[:1])
                choice["logprobs"] = {"content": [{"token": f"token_id:{allowed[0]}", "logprob": -0.1,
                                                   "top_logprobs": top[:body.get("top_logprobs", 20)]}]}
            self.reply(200, {"id": f"c{n}", "object": "chat.completion", "model": MODEL,
                             "choices": [choice],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})

    return Handler
