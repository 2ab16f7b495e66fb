#!/usr/bin/env python3
"""The Grafana dashboard of gpucloud's own metrics, its queries run by a real Prometheus.

Usage: grafana_test.py METRICS_TEXT_BINARY DASHBOARD_JSON [GPUCLOUD_BINARY]

Starts Debian's `prometheus` on loopback with a temporary directory of its own, scraping the
server's and the agent's metrics text as their real rendering code writes it (`metrics_text`,
see prometheus_text_test.py) from a small HTTP server here, which makes every cumulative family
(counter, histogram, summary) grow with each scrape so that rate() has something to say. Then
every query of every panel of DASHBOARD_JSON (Grafana's $__rate_interval and the dashboard's
$node variable put in) must parse and return at least one series with a finite value, and the
$node variable's label_values query must find the agent's node.

With GPUCLOUD_BINARY, also `gpucloud up --metrics-listen`: the one-machine cluster serves its
agent's GPU metrics, labelled with the node's name (--node-name, not the OS host name), with
the per-GPU health gauge.

Exits 0 when every check passes, 1 naming every failure, 77 (a skip for CTest) when the
prometheus binary is missing (scripts/install-deps installs Debian's `prometheus`).
"""
import http.server
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

from metrics_util import agent_text, stop_process
from upcluster import wait_for

SKIP = 77
CUMULATIVE = {"counter", "histogram", "summary"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grown(text, n):
    """`text` with the value of every sample of a cumulative family times n (the n-th scrape):
    counters count on, histograms stay histograms (every bucket, _sum and _count scaled)."""
    out, kind = [], None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            kind = line.split()[3]
        elif line and not line.startswith("#") and kind in CUMULATIVE:
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) * n!r}"
        out.append(line)
    return "\n".join(out) + "\n"


def serve(texts):
    """An HTTP server on loopback: GET /NAME/metrics answers texts[NAME], grown per scrape."""
    scrapes = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.strip("/").split("/")[0]
            if name not in texts or not self.path.endswith("/metrics"):
                self.send_error(404)
                return
            with lock:
                scrapes[name] = scrapes.get(name, 0) + 1
                n = scrapes[name]
            body = grown(texts[name], n).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def panel_queries(dashboard):
    """(panel title, refId, expr) of every target of every panel, rows' panels too."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t.get("refId", "?"), t["expr"]))
            walk(p.get("panels", []))

    walk(dashboard.get("panels", []))
    return out


def instantiate(expr):
    """The query as Grafana sends it here: $__rate_interval a few scrapes long, $node all."""
    q = expr.replace("$__rate_interval", "15s").replace("$node", ".*")
    left = re.findall(r"\$\{?\w+", q)
    if left:
        raise ValueError(f"unknown dashboard variables {left}")
    return q


def query(base, q):
    """The Prometheus query API's answer: (ok, result or error)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.load(r)
    except urllib.error.HTTPError as e:  # 400 bad_data: the query does not parse
        answer = json.load(e)
    if answer.get("status") != "success":
        return False, f"{answer.get('errorType')}: {answer.get('error')}"
    return True, answer["data"]["result"]


def finite_series(result):
    return [s for s in result if math.isfinite(float(s["value"][1]))]


def check_dashboard(prometheus, helper, dashboard_path, work):
    errors = []
    with open(dashboard_path) as f:
        dashboard = json.load(f)
    queries = panel_queries(dashboard)
    if len(queries) < 10:
        errors.append(f"{dashboard_path}: only {len(queries)} panel queries")
    server_text = subprocess.run([helper, "server"], check=True, capture_output=True,
                                 text=True).stdout
    texts = {"server": server_text, "agent": agent_text(helper)}
    http_server = serve(texts)
    port = free_port()
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
        for name in texts:
            f.write(f"  - job_name: gpucloud-{name}\n    metrics_path: /{name}/metrics\n"
                    f"    static_configs:\n      - targets: "
                    f"['127.0.0.1:{http_server.server_address[1]}']\n")
    log = open(os.path.join(work, "prometheus.log"), "w")
    p = subprocess.Popen([prometheus, f"--config.file={work}/prometheus.yml",
                          f"--storage.tsdb.path={work}/data", f"--web.listen-address=127.0.0.1:{port}",
                          "--web.enable-lifecycle"], stdout=log, stderr=subprocess.STDOUT,
                         cwd=work)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=5).status == 200, 60,
             "prometheus to be ready")
        instantiated = []
        for title, ref, expr in queries:
            try:
                q = instantiate(expr)
            except ValueError as e:
                errors.append(f"panel {title!r} {ref}: {e}")
                continue
            ok, why = query(base, q)
            if not ok:  # a parse error shows at once, before any data
                errors.append(f"panel {title!r} {ref}: Prometheus rejects {q!r}: {why}")
                continue
            instantiated.append((title, ref, q))

        def missing():
            return [(t, r, q) for t, r, q in instantiated if not finite_series(query(base, q)[1])]

        try:  # rate() over 15 s needs a few scrapes of each target
            wait_for(lambda: not missing(), 60, "every panel's query to return data")
        except TimeoutError:
            for title, ref, q in missing():
                errors.append(f"panel {title!r} {ref}: no finite data for {q!r}: "
                              f"{query(base, q)[1]}")
        url = f"{base}/api/v1/label/Hostname/values?" + urllib.parse.urlencode(
            {"match[]": "DCGM_FI_DEV_GPU_TEMP"})
        with urllib.request.urlopen(url, timeout=10) as r:
            nodes = json.load(r)["data"]
        if nodes != ["node-a"]:
            errors.append(f"$node: label_values(DCGM_FI_DEV_GPU_TEMP, Hostname) is {nodes}")
        print(f"dashboard: {len(instantiated)} of {len(queries)} queries parse")
    finally:
        stop_process(p)
        http_server.shutdown()
        log.close()
    if errors:
        with open(os.path.join(work, "prometheus.log"), errors="replace") as f:
            print("--- prometheus.log\n" + f.read()[-2000:])
    return errors


def check_up(gpucloud, work):
    """`gpucloud up --metrics-listen`: the agent's metrics, with the node's name as Hostname."""
    errors = []
    log_path = os.path.join(work, "up.log")
    log = open(log_path, "w")
    p = subprocess.Popen([gpucloud, "up", "--simulate", "2xH100", "--node-name", "up-node-x",
                          "--data-dir", os.path.join(work, "up"), "--listen", "127.0.0.1:0",
                          "--metrics-listen", "127.0.0.1:0"], stdout=log,
                         stderr=subprocess.STDOUT)

    def read_log():
        with open(log_path, errors="replace") as f:
            return f.read()

    try:
        m = wait_for(lambda: re.search(r"metrics: (http://127\.0\.0\.1:\d+/metrics)", read_log()), 60,
                 "gpucloud up to print its metrics address")

        def metrics():
            with urllib.request.urlopen(m.group(1), timeout=10) as r:
                t = r.read().decode()
            return "DCGM_FI_DEV_GPU_TEMP{" in t and t

        text = wait_for(metrics, 60, "the agent's first GPU sample")
        for needle in ['DCGM_FI_DEV_GPU_TEMP{gpu="0"', 'Hostname="up-node-x"',
                       "DCGM_FI_DEV_MEMORY_TEMP{", 'gpucloud_gpu_healthy{gpu="1"']:
            if needle not in text:
                errors.append(f"gpucloud up --metrics-listen: expected {needle!r} in\n{text}")
        if socket.gethostname() != "up-node-x" and f'Hostname="{socket.gethostname()}"' in text:
            errors.append("gpucloud up --metrics-listen: the OS host name labels the GPUs")
    except TimeoutError as e:
        errors.append(f"gpucloud up --metrics-listen: {e}\n{read_log()[-3000:]}")
    finally:
        stop_process(p)
        log.close()
    return errors


def main():
    prometheus = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None)
    if prometheus is None:
        print("SKIP: no prometheus binary (Debian package `prometheus`: scripts/install-deps)")
        return SKIP
    errors = []
    with tempfile.TemporaryDirectory(prefix="grafana_test.") as work:
        os.chmod(work, 0o711)  # the agent's tasks run as unprivileged users and pass through it
        errors += check_dashboard(prometheus, sys.argv[1], sys.argv[2], work)
        if len(sys.argv) > 3:
            errors += check_up(sys.argv[3], work)
    for e in errors:
        print("FAIL", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
