#!/usr/bin/env python3
"""Inference services end to end (CTest label `e2e`, issue 23; docs/services.md): a real
`gpucloud up --gateway-listen` (server, gateway and agent, simulated GPUs, host processes) and
a stand-in model server (examples/services/model_server.py) behind the gateway.

  1. scale from zero: a service with min 0 has no replica; the first request waits for one,
     is answered, and the time is printed;
  2. a step of load (8 clients, 100 ms requests, target 2 in flight per replica) takes it to
     its max of 3 replicas, balanced; one replica killed mid-load costs no request (GETs are
     retried on another replica); p50/p99 and the time to 3 ready replicas printed; a
     lower-priority training job on 2 of the 4 GPUs is preempted for the third replica;
  3. when the load stops it goes back to zero, its replica jobs deleted, and the training job
     runs again (its next attempt);
  4. no token is 401; a tenant of another namespace is 403 naming services:Invoke; an unknown
     service 404; `gpuctl get services` and `describe service` show it;
  5. bad replicas and requests: a service whose readiness check fails answers 503 within its
     request timeout; a replica slower than the timeout is 504; a body over maxRequestBytes
     413; a batch answered with the wrong length 502 naming it;
  6. dynamic batching: 16 clients on a service whose work is 40 ms + 1 ms per instance, with and
     without batching: every caller gets its own predictions, and batching's throughput is
     printed and must be at least 3x;
  7. a service scaled on p95 latency (target 100 ms) under 300 ms answers adds replicas, its
     scaling event and status naming the latency;
  8. /metrics has the gateway's and the service controller's series.

Needs root (tasks run as unprivileged users). Exit 0 on pass, 1 on a failure, 77 to skip.
Usage: services.py BUILD_DIR SOURCE_DIR
"""
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
from upcluster import Checks, UpCluster, wait_for  # noqa: E402

PREFIX = "/apis/gpucloud/v1"


def log(msg):
    print(f"services: {msg}", flush=True)


class Gateway:
    """Keep-alive HTTPS clients of the gateway, one per thread."""

    def __init__(self, url, ca, token):
        m = re.match(r"https://([^:]+):(\d+)", url)
        self.host, self.port = m.group(1), int(m.group(2))
        self.ssl = ssl.create_default_context(cafile=ca)
        self.token = token
        self.local = threading.local()

    def call(self, method, path, body=None, token=None, timeout=30):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl,
                                               timeout=timeout)
            self.local.conn = conn
        headers = {}
        tok = self.token if token is None else token
        if tok:
            headers["Authorization"] = f"Bearer {tok}"
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        except (OSError, http.client.HTTPException):
            conn.close()
            self.local.conn = None
            raise


def service(name, script, replicas, env, gpu=True, extra=None):
    spec = {
        "template": {
            "name": "server",
            "command": ["python3", script],
            "env": [{"name": k, "value": v} for k, v in env.items()],
        },
        "readinessPath": "/healthz",
        "replicas": {"min": replicas[0], "max": replicas[1]},
    }
    if gpu:
        spec["template"]["resources"] = {"gpu": {"count": 1}}
    spec.update(extra or {})
    return {"apiVersion": "gpucloud/v1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def api(up, method, path, body=None):
    req = urllib.request.Request(up.url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {up.token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=up.ssl, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def status_of(up, name):
    return up.get(f"{PREFIX}/namespaces/default/inferenceservices/{name}").get("status", {})


def replica_jobs(up, name):
    jobs = up.get(f"{PREFIX}/namespaces/default/jobs?labelSelector=gpucloud.io/service={name}")
    return jobs.get("items", [])


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def drive(gw, seconds, clients, request):
    """`clients` threads calling request(gw) for `seconds`: (latencies of 2xx, failures)."""
    lat, fails, lock = [], [], threading.Lock()
    stop = time.monotonic() + seconds

    def worker():
        while time.monotonic() < stop:
            t0 = time.monotonic()
            try:
                code, _, body = request(gw)
            except Exception as e:  # noqa: BLE001
                code, body = -1, str(e).encode()
            with lock:
                if 200 <= code < 300:
                    lat.append(time.monotonic() - t0)
                else:
                    fails.append((code, body[:200]))

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, fails


def kill_replica_process(port):
    """SIGKILL the model server listening on `port` (found by its PORT environment)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if f"PORT={port}".encode() in env and b"model_server.py" in cmd:
            os.kill(int(entry), signal.SIGKILL)
            return int(entry)
    return None


def test_scale_from_zero_and_load(up, gw, c, script):
    code, body = api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
                     service("echo", script, (0, 3), {"BASE_MS": "10"}, extra={
                         "autoscaling": {"target": 2, "stableWindow": "6s", "panicWindow": "2s",
                                         "scaleToZeroAfter": "3s"},
                         "requestTimeout": "30s", "retries": 2}))
    c.check("an InferenceService is created", code == 201, (code, body))
    time.sleep(1.5)
    c.check("min 0: no replica before a request", not replica_jobs(up, "echo"),
            replica_jobs(up, "echo"))
    t0 = time.monotonic()
    code, headers, body = gw.call("GET", "/default/echo/whoami")
    first = time.monotonic() - t0
    c.check("the first request waits for a replica and is answered", code == 200, (code, body))
    c.check("it names the replica", headers.get("X-Gpucloud-Replica", "").startswith("echo-"),
            headers)
    log(f"scale from zero to first answer: {first:.2f} s")
    # Training beside it: 2 of the 4 GPUs, a lower priority than the service's.
    code, body = api(up, "POST", f"{PREFIX}/namespaces/default/jobs", {
        "apiVersion": "gpucloud/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"priority": -10, "tasks": [{
            "name": "main", "command": ["sh", "-c", "while :; do sleep 1; done"],
            "resources": {"gpu": {"count": 2}}}]}})
    c.check("a training job is submitted", code == 201, (code, body))
    wait_for(lambda: up.get(f"{PREFIX}/namespaces/default/jobs/train")["status"]["phase"] ==
             "Running", 30, "the training job to run")
    kill = {"done": False, "pid": None}

    def request(g):
        return g.call("GET", "/default/echo/slow?ms=100")

    step = {"t0": time.monotonic(), "ready3": None}

    def killer():
        # Once the step has its 3 replicas ready: kill one's process mid-load.
        try:
            wait_for(lambda: status_of(up, "echo").get("readyReplicas") == 3, 25, "3 ready")
        except TimeoutError:
            return
        step["ready3"] = time.monotonic() - step["t0"]
        time.sleep(1)
        ep = status_of(up, "echo")["endpoints"][0]
        kill["pid"] = kill_replica_process(ep["address"].rsplit(":", 1)[1])
        kill["done"] = True

    k = threading.Thread(target=killer)
    k.start()
    lat, fails = drive(gw, 15, 8, request)
    k.join()
    log(f"load step to 3 ready replicas (one preempting training): {step['ready3']} s")
    train = up.get(f"{PREFIX}/namespaces/default/jobs/train")["status"]
    c.check("the training job was preempted for the service",
            train.get("interruptions", 0) >= 1, train)
    st = status_of(up, "echo")
    log(f"load step: {len(lat)} requests, p50 {percentile(lat, 0.5) * 1000:.0f} ms, "
        f"p99 {percentile(lat, 0.99) * 1000:.0f} ms, replicas {st.get('replicas')}")
    c.check("the load took the service to its max of 3 replicas",
            any(h.get("to") == 3 for h in st.get("history", [])), st.get("history"))
    c.check("a replica was killed mid-load", kill["pid"] is not None, kill)
    c.check("no request failed (the killed replica's were retried)", not fails, fails[:5])
    c.check("every request was served", len(lat) > 200, len(lat))
    # The load stops: back to zero, the replica jobs deleted.
    try:
        wait_for(lambda: status_of(up, "echo").get("desiredReplicas") == 0 and
                 not replica_jobs(up, "echo"), 60, "echo to scale to zero")
        ok = True
    except TimeoutError as e:
        ok, st = False, (e, status_of(up, "echo"))
    c.check("idle, it scales back to zero and its replicas' jobs go", ok, "" if ok else st)
    try:
        wait_for(lambda: up.get(f"{PREFIX}/namespaces/default/jobs/train")["status"]["phase"] ==
                 "Running", 60, "the training job to run again")
        ok = True
    except TimeoutError:
        ok = False
    train = up.get(f"{PREFIX}/namespaces/default/jobs/train")["status"]
    c.check("the training job runs again once the service gave its GPUs back",
            ok and train.get("attempt", 0) >= 2, train)
    api(up, "DELETE", f"{PREFIX}/namespaces/default/jobs/train")


def test_auth(up, gw, c, build, tmp):
    code, _, body = gw.call("GET", "/default/echo/whoami", token="")
    c.check("no token: 401", code == 401, (code, body))
    code, _, body = gw.call("GET", "/default/echo/whoami", token="not-a-token")
    c.check("a bad token: 401", code == 401, (code, body))
    gpuctl = os.path.join(build, "apps", "gpuctl")
    env = dict(os.environ, GPUCLOUD_CONFIG=up.config)
    p = subprocess.run([gpuctl, "create", "user", "mallory", "--namespace", "team-m", "--policy",
                        "gpucloud:tenant"], env=env, capture_output=True, timeout=30)
    p = subprocess.run([gpuctl, "create", "token", "--user", "mallory", "-o", "json"], env=env,
                       capture_output=True, timeout=30)
    token = json.loads(p.stdout).get("status", {}).get("token") if p.returncode == 0 else None
    c.check("a tenant gets a token", bool(token), p.stderr)
    p = subprocess.run([gpuctl, "get", "services"], env=env, capture_output=True, timeout=30)
    c.check("gpuctl get services lists it", p.returncode == 0 and b"echo" in p.stdout and
            b"READY" in p.stdout, (p.returncode, p.stdout, p.stderr))
    p = subprocess.run([gpuctl, "describe", "service", "echo"], env=env, capture_output=True,
                       timeout=30)
    c.check("gpuctl describe service shows its scaling events",
            p.returncode == 0 and b"Scaling events:" in p.stdout and b"-> 3" in p.stdout,
            (p.returncode, p.stdout, p.stderr))
    code, _, body = gw.call("GET", "/default/echo/whoami", token=token)
    c.check("another namespace's tenant: 403 naming services:Invoke",
            code == 403 and b"services:Invoke" in body, (code, body))
    code, _, body = gw.call("GET", "/default/no-such-service/x")
    c.check("an unknown service: 404", code == 404 and b"no InferenceService" in body,
            (code, body))
    code, _, body = gw.call("GET", "/healthz", token="")
    c.check("the gateway's own /healthz", code == 200, code)


def test_bad(up, gw, c, script):
    api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
        service("broken", script, (1, 1), {"FAIL_READY": "1"}, gpu=False,
                extra={"requestTimeout": "2s"}))
    api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
        service("wrong", script, (1, 1), {"WRONG_BATCH": "1", "BASE_MS": "1"}, gpu=False,
                extra={"requestTimeout": "3s", "maxRequestBytes": 1024,
                       "batching": {"path": "/predict", "maxBatchSize": 4,
                                    "maxQueueDelayMs": 5}}))
    wait_for(lambda: status_of(up, "wrong").get("readyReplicas") == 1, 60, "wrong to be ready")
    t0 = time.monotonic()
    code, _, body = gw.call("GET", "/default/broken/whoami")
    took = time.monotonic() - t0
    c.check("a replica that never gets ready: 503 within the request timeout",
            code == 503 and b"NoReadyReplica" in body and took < 5, (code, body, took))
    code, _, body = gw.call("GET", "/default/wrong/slow?ms=5000")
    c.check("a replica slower than requestTimeout: 504", code == 504, (code, body))
    code, _, body = gw.call("POST", "/default/wrong/predict",
                            json.dumps({"instances": ["x" * 2000]}))
    c.check("a body over maxRequestBytes: 413", code == 413, (code, body))
    code, _, body = gw.call("POST", "/default/wrong/predict", json.dumps({"instances": [1, 2]}))
    c.check("a batch answered with the wrong length: 502 naming it",
            code == 502 and b"predictions for" in body, (code, body))
    code, _, body = gw.call("POST", "/default/wrong/predict", b"not json")
    c.check("a batch request that is not JSON: 400", code == 400, (code, body))
    for name in ("broken", "wrong"):
        api(up, "DELETE", f"{PREFIX}/namespaces/default/inferenceservices/{name}")


def test_batching(up, gw, c, script):
    base = {"BASE_MS": "40", "PER_ITEM_MS": "1"}
    api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
        service("batched", script, (1, 1), base, gpu=False,
                extra={"batching": {"path": "/predict", "maxBatchSize": 16,
                                    "maxQueueDelayMs": 10}}))
    api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
        service("single", script, (1, 1), base, gpu=False))
    for name in ("batched", "single"):
        wait_for(lambda: status_of(up, name).get("readyReplicas") == 1, 60, f"{name} ready")
    counter = iter(range(10**9))
    lock = threading.Lock()
    wrong = []

    def request(name):
        def go(g):
            with lock:
                n = next(counter)
            code, h, b = g.call("POST", f"/default/{name}/predict",
                                json.dumps({"instances": [n, n + 0.5]}))
            if code == 200 and json.loads(b).get("predictions") != [2 * n, 2 * n + 1]:
                wrong.append((n, b[:100]))
            return code, h, b
        return go

    rates = {}
    for name in ("single", "batched"):
        lat, fails = drive(gw, 4, 16, request(name))
        rates[name] = len(lat) / 4
        log(f"{name}: {rates[name]:.0f} requests/s, p50 {percentile(lat, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(lat, 0.99) * 1000:.0f} ms, {len(fails)} failed")
        c.check(f"{name}: no request failed", not fails, fails[:3])
    c.check("every caller got its own predictions", not wrong, wrong[:3])
    c.check("batching raises throughput at least 3x", rates["batched"] >= 3 * rates["single"],
            rates)


def test_latency(up, gw, c, script):
    """A service scaled on p95 latency: answers slower than its target add replicas."""
    code, body = api(up, "POST", f"{PREFIX}/namespaces/default/inferenceservices",
                     service("slowpoke", script, (1, 3), {}, gpu=False,
                             extra={"autoscaling": {"metric": "p95Latency", "target": 100,
                                                    "stableWindow": "10s", "panicWindow": "2s"}}))
    c.check("a service on p95 latency is created", code == 201, (code, body))
    wait_for(lambda: status_of(up, "slowpoke").get("readyReplicas") == 1, 30, "slowpoke ready")
    # 4 clients, each request answered in 300 ms: the p95 is 3x the target.
    done = {}
    loader = threading.Thread(target=lambda: done.update(r=drive(
        gw, 10, 4, lambda g: g.call("GET", "/default/slowpoke/slow?ms=300"))))
    loader.start()
    deadline = time.monotonic() + 20
    st = {}
    while time.monotonic() < deadline:
        st = status_of(up, "slowpoke")
        if st.get("desiredReplicas", 0) >= 2:
            break
        time.sleep(0.2)
    loader.join()
    c.check("a p95 over the target added replicas", st.get("desiredReplicas", 0) >= 2, st)
    reasons = [h.get("reason", "") for h in st.get("history", [])]
    c.check("the scaling event names the p95 latency",
            any("p95 latency" in r and "target 100 ms" in r for r in reasons), reasons)
    c.check("the status shows the latency in ms", st.get("load", {}).get("metric") == "p95Latency"
            and st.get("load", {}).get("panic", 0) >= 250, st.get("load"))
    lat, fails = done.get("r", ([], ["no result"]))
    c.check("no slow request failed", not fails, fails[:3])
    api(up, "DELETE", f"{PREFIX}/namespaces/default/inferenceservices/slowpoke")


def test_metrics(up, c):
    req = urllib.request.Request(up.url + "/metrics",
                                 headers={"Authorization": f"Bearer {up.token}"})
    with urllib.request.urlopen(req, context=up.ssl, timeout=10) as r:
        text = r.read().decode()
    for series in ('gpucloud_service_requests_total{namespace="default",service="echo",code="200"}',
                   'gpucloud_service_request_duration_seconds_bucket{namespace="default",'
                   'service="batched"',
                   'gpucloud_service_batch_size_bucket{namespace="default",service="batched"',
                   'gpucloud_service_replicas_desired{namespace="default",service="echo"}'):
        c.check(f"/metrics has {series.split('{')[0]}", series in text, series)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        log("SKIP: needs root (tasks run as unprivileged users)")
        return 77
    c = Checks("services")
    tmp = tempfile.mkdtemp(prefix="gpucloud-services-")
    os.chmod(tmp, 0o711)
    script = os.path.join(tmp, "model_server.py")
    shutil.copy(os.path.join(source, "examples", "services", "model_server.py"), script)
    os.chmod(script, 0o644)
    try:
        with UpCluster(os.path.join(build, "apps", "gpucloud"), source, simulate="4xH100",
                       node="services", args=["--gateway-listen", "127.0.0.1:0"]) as up:
            url = re.search(r"inference gateway: (https://127\.0\.0\.1:\d+)", up.output()).group(1)
            gw = Gateway(url, up.ca, up.token)
            test_scale_from_zero_and_load(up, gw, c, script)
            test_auth(up, gw, c, build, tmp)
            test_bad(up, gw, c, script)
            test_batching(up, gw, c, script)
            test_latency(up, gw, c, script)
            test_metrics(up, c)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log("PASS" if c.failed == 0 else f"{c.failed} check(s) FAILED")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
