#!/usr/bin/env python3
"""A stand-in model server for inference services (docs/services.md): Python's standard library
only. It listens on $PORT (the platform gives each replica its own) and serves

  GET  /healthz        200 once READY_DELAY seconds passed since start; 500 if FAIL_READY=1
  POST /predict        {"instances": [x, ...]} -> {"predictions": [2x, ...]}; the work costs
                       BASE_MS + PER_ITEM_MS per instance and one "GPU" runs one batch at a
                       time, so that batching has something to win (Triton's model)
  GET  /slow?ms=N      answers after N ms
  GET  /whoami         the replica's job name and port
  POST /wrong          a batch answer of the wrong length (for the gateway's checks)

Environment: PORT (required), BASE_MS (default 20), PER_ITEM_MS (default 2), READY_DELAY
(default 0), FAIL_READY, WRONG_BATCH (then /predict answers one prediction too few).
"""
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BASE_MS = float(os.environ.get("BASE_MS", "20"))
PER_ITEM_MS = float(os.environ.get("PER_ITEM_MS", "2"))
READY_AT = time.monotonic() + float(os.environ.get("READY_DELAY", "0"))
GPU = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/healthz":
            ok = os.environ.get("FAIL_READY") != "1" and time.monotonic() >= READY_AT
            self.answer(200 if ok else 500, {"ready": ok})
        elif url.path == "/slow":
            ms = float(urllib.parse.parse_qs(url.query).get("ms", ["100"])[0])
            time.sleep(ms / 1000)
            self.answer(200, {"slept_ms": ms})
        elif url.path == "/whoami":
            self.answer(200, {"job": os.environ.get("GPUCLOUD_JOB", ""),
                              "port": os.environ["PORT"], "pid": os.getpid()})
        else:
            self.answer(404, {"error": f"no {url.path}"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            instances = json.loads(body)["instances"]
        except (ValueError, KeyError, TypeError):
            self.answer(400, {"error": "want {\"instances\": [...]}"})
            return
        with GPU:
            time.sleep((BASE_MS + PER_ITEM_MS * len(instances)) / 1000)
        predictions = [x * 2 if isinstance(x, (int, float)) else x for x in instances]
        if self.path == "/wrong" or os.environ.get("WRONG_BATCH") == "1":
            predictions = predictions[:-1]
        self.answer(200, {"predictions": predictions})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


if __name__ == "__main__":
    Server(("0.0.0.0", int(os.environ["PORT"])), Handler).serve_forever()
