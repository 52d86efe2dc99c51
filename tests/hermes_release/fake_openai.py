# usage: python fake_openai.py [PORT] [--stall] [--log FILE]
#
# A stand-in for an OpenAI-compatible model provider, on 127.0.0.1 only, so a real
# `hermes` process can start and run a turn without any network. Stdlib only.
# PORT 0 (the default) picks a free port; the first stdout line is the port.
#
#   GET  /v1/models                 one model, "fake-model" (any id asked for is echoed)
#   GET  /v1/models/ID              that model
#   POST /v1/chat/completions       a short assistant reply "ok"; with "stream": true as
#                                   server-sent events (role chunk, content chunk, finish
#                                   chunk with usage, then "data: [DONE]")
#   anything else                   404 with an OpenAI-style error body
#
# --stall makes /v1/chat/completions hold the request open (sending SSE keep-alive
# comments when streaming) until the client goes away: a turn that never ends.
# The stall can also be switched at run time (for a long-lived client such as a gateway):
#
#   POST /_stall                    from now on completions stall, as with --stall
#   POST /_unstall                  stop stalling: completions answer at once again, and
#                                   the ones being held open now get their reply
#                                   (within 0.2 s) instead of waiting for the client to go
#   GET  /_stall                    {"stalled": true|false, "held": N (requests held now)}
#
# Both POSTs answer {"stalled": ..., "held": N}. Without them --stall behaves as before.
# Every request is logged as one line to --log (default stderr): METHOD PATH [stream].
import json
import select
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"
REPLY = "ok"

args = sys.argv[1:]
stalled = threading.Event()  # set: completions are held open (--stall, POST /_stall)
if "--stall" in args:
    stalled.set()
held_lock = threading.Lock()
held = [0]  # completions being held open right now
log_path = None
if "--log" in args:
    log_path = args[args.index("--log") + 1]
    del args[args.index("--log"):args.index("--log") + 2]
args = [a for a in args if a != "--stall"]
port = int(args[0]) if args else 0
log_lock = threading.Lock()
log_fh = open(log_path, "a", encoding="utf-8", buffering=1) if log_path else sys.stderr


def log(line):
    with log_lock:
        log_fh.write(line + "\n")
        log_fh.flush()


def stall_state():
    with held_lock:
        return {"stalled": stalled.is_set(), "held": held[0]}


class Held:
    # Counts a completion while it is held open.
    def __enter__(self):
        with held_lock:
            held[0] += 1

    def __exit__(self, *exc):
        with held_lock:
            held[0] -= 1


def model_obj(model_id):
    return {"id": model_id, "object": "model", "created": 1700000000, "owned_by": "fake",
            "context_length": 131072, "max_model_len": 131072}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # the request log is ours, one line each
        pass

    def _send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_found(self):
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error",
                                        "code": "not_found"}})

    def _path(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") or path == "/v1" else path

    def do_GET(self):
        log(f"GET {self.path}")
        path = self._path()
        if path == "/models":
            self._send_json(200, {"object": "list", "data": [model_obj(MODEL)]})
        elif path.startswith("/models/"):
            self._send_json(200, model_obj(path[len("/models/"):]))
        elif path in ("", "/health"):
            self._send_json(200, {"status": "ok"})
        elif path == "/_stall":
            self._send_json(200, stall_state())
        else:
            self._not_found()

    def do_HEAD(self):
        log(f"HEAD {self.path}")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = None
        stream = isinstance(req, dict) and bool(req.get("stream"))
        log(f"POST {self.path}" + (" stream" if stream else ""))
        if self._path() in ("/_stall", "/_unstall"):
            if self._path() == "/_stall":
                stalled.set()
            else:
                stalled.clear()
            self._send_json(200, stall_state())
            return
        if self._path() != "/chat/completions":
            self._not_found()
            return
        if not isinstance(req, dict):
            self._send_json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        model = req.get("model") or MODEL
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        if req.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def chunk(delta, finish=None, with_usage=False):
                obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                if with_usage:
                    obj["usage"] = usage
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

            try:
                chunk({"role": "assistant", "content": ""})
                if stalled.is_set():
                    with Held():
                        last = 0.0
                        while stalled.is_set():  # until /_unstall (or the client goes: write fails)
                            if time.monotonic() - last >= 1:
                                self.wfile.write(b": keep-alive\n\n")
                                self.wfile.flush()
                                last = time.monotonic()
                            time.sleep(0.2)
                chunk({"content": REPLY})
                chunk({}, "stop", with_usage=True)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if stalled.is_set():
            with Held():
                try:
                    # Hold until the client goes away (its end reads as EOF) or /_unstall.
                    while stalled.is_set():
                        readable, _, _ = select.select([self.connection], [], [], 0.2)
                        if readable and not self.connection.recv(1, socket.MSG_PEEK):
                            return
                except OSError:
                    return
        self._send_json(200, {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY},
                         "finish_reason": "stop"}],
            "usage": usage,
        })


def main():
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
