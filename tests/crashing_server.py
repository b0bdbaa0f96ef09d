"""A stand-in for the llama.cpp server that crashes the way a bad build does (issue 41).

`python -m tests.crashing_server --model PATH --host H --port P [other server flags]`: it answers
`/v1/models` at once, then completes `crash_after` requests (chat or plain completions, the
start's one-token check included) and on the next one prints what llama.cpp prints before an AMX
crash and reads address 0: a real SIGSEGV in the thread that serves the call, as in the real server. The behaviour is read from the
"model" file: b"GGUF" followed by JSON, e.g. {"crash_after": 0}. Each start appends its pid to
PATH.spawns, so a test can count restarts.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    with open(args.model, "rb") as f:
        behaviour = json.loads(f.read()[4:] or b"{}")
    crash_after = int(behaviour.get("crash_after", 0))
    with open(args.model + ".spawns", "a") as f:
        f.write(f"{os.getpid()}\n")
    print("llama_model_loader: loaded meta data (stand-in)", file=sys.stderr, flush=True)
    lock, answered = threading.Lock(), [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):  # quiet
            pass

        def _send(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": args.model, "object": "model"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:  # one call at a time, as llama-cpp-python's server answers
                self._answer()

        def _answer(self):
            answered[0] += 1
            if answered[0] > crash_after:
                print(
                    "ggml_backend_amx_mul_mat: repacked Q4_1 weights (stand-in)\n"
                    "Segmentation fault in ggml_compute_forward_mul_mat",
                    file=sys.stderr,
                    flush=True,
                )
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
                ctypes.string_at(0)  # a real SIGSEGV, in this thread: no answer goes out
            usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
            if self.path.endswith("/chat/completions"):
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": '{"answer": 1}'},
                    "finish_reason": "stop",
                }
                kind = "chat.completion"
            else:
                choice = {"index": 0, "text": "1", "finish_reason": "length", "logprobs": None}
                kind = "text_completion"
            self._send(
                {
                    "id": f"x-{answered[0]}",
                    "object": kind,
                    "model": args.model,
                    "choices": [choice],
                    "usage": usage,
                }
            )

    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
