#!/usr/bin/env python3
"""Both daemons' Prometheus metrics, parsed by a real parser (Debian's python3-prometheus-client).

Usage: prometheus_text_test.py METRICS_TEXT_BINARY [GPUCLOUD_BINARY GPUCTL_BINARY]

Reads the server's /metrics text (`metrics_text server`: the API and cluster metrics rendered by
the server's code) and the agent's metrics server over HTTP (`metrics_text agent`: simulated GPUs
with tasks on them). With GPUCLOUD_BINARY and GPUCTL_BINARY, also the real daemons: a
`gpucloud server` and a `gpucloud agent run --simulate 2xH100 --metrics-listen`, with a job
running, scraped over HTTPS (with the admin token) and HTTP; and `gpucloud agent metrics`. For
each text it checks what Prometheus and its clients rely on:
  - prometheus_client.parser.text_string_to_metric_families parses it;
  - every family has HELP and TYPE, and every sample belongs to a typed family (the parser puts a
    sample it cannot attach to the current family in an untyped family of its own);
  - a family's lines are contiguous: its name never comes back after another family started;
  - counters are named *_total (dcgm-exporter's own DCGM_FI_* names are kept as they are);
  - no sample has a `job` label (Prometheus' target label: it would become `exported_job`).
Exits 0 when every check passes, 1 naming every failure.
"""
import glob
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

from metrics_util import agent_text

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    # Debian's package lives in the system interpreter's path (a pyenv python lacks it).
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("prometheus_client missing: run scripts/install-deps (python3-prometheus-client)")
        sys.exit(1)


def family_of_line(line):
    """The metric name a text line is about ('# HELP x ...', '# TYPE x ...', 'x{...} 1')."""
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        return line.split()[2]
    if line.startswith("#") or not line.strip():
        return None
    return line.split("{")[0].split()[0]


def check_lines(where, text, typed_families, errors):
    """Checks the raw lines against the typed families the parser found: a family never comes
    back after another began, and a counter's TYPE and samples are named *_total (the parser
    adds _total to the samples it returns, so only the raw text tells)."""
    # The longest typed family name that the line's name starts with (x_bucket -> x).
    names = sorted(typed_families, key=len, reverse=True)
    seen, current, counters = set(), None, set()
    for n, line in enumerate(text.splitlines(), 1):
        name = family_of_line(line)
        if name is None:
            continue
        if line.startswith("# TYPE ") and line.split()[3] == "counter":
            counters.add(name)
            if not name.endswith("_total") and not name.startswith("DCGM_FI_"):
                errors.append(f"{where}:{n}: counter {name} is not named *_total")
        family = next((f for f in names if name == f or name.startswith(f + "_")), name)
        if not line.startswith("#") and family + "_total" in counters and \
                name not in (family + "_total", family + "_created"):
            errors.append(f"{where}:{n}: counter sample {name} is not named *_total")
        if family != current:
            if family in seen:
                errors.append(f"{where}:{n}: family {family} comes back after another: {line}")
            seen.add(family)
            current = family


def check(where, text):
    errors = []
    if not text.endswith("\n"):
        errors.append(f"{where}: text does not end with a newline")
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and others on malformed lines
        return [f"{where}: the parser rejects the text: {e!r}"]
    if not families:
        errors.append(f"{where}: no metric families")
    counts = {}
    for f in families:
        counts[f.name] = counts.get(f.name, 0) + 1
        if f.type == "unknown" or not f.documentation:
            sample = f.samples[0].name if f.samples else f.name
            errors.append(f"{where}: {sample} belongs to no family with HELP and TYPE "
                          f"(type {f.type})")
        for s in f.samples:
            if "job" in s.labels:
                errors.append(f"{where}: {s.name} has a `job` label: {s.labels}")
    for name, n in counts.items():
        if n > 1:
            errors.append(f"{where}: family {name} is split in {n} parts")
    check_lines(where, text, [f.name for f in families if f.type != "unknown"], errors)
    print(f"{where}: {len(families)} families, "
          f"{sum(len(f.samples) for f in families)} samples")
    return errors


def require(where, text, needles, errors):
    for needle in needles:
        if needle not in text:
            errors.append(f"{where}: expected {needle!r} in the text")


def wait(ok, seconds, what):
    """Polls `ok` until it returns something true (a process's progress, not a timer)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            v = ok()
            if v:
                return v
        except OSError:
            pass  # not listening yet
        time.sleep(0.1)
    raise TimeoutError(f"waited {seconds} s for {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def live_texts(gpucloud, gpuctl, work):
    """/metrics of a real server and agent, with a job running (so per-job series exist)."""
    data = os.path.join(work, "server")
    procs = []

    def spawn(name, args):
        log = open(os.path.join(work, f"{name}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))

    def log_of(name):
        with open(os.path.join(work, f"{name}.log"), errors="replace") as f:
            return f.read()

    try:
        spawn("server", [gpucloud, "server", "--data-dir", data, "--listen", "127.0.0.1:0"])
        port = int(wait(lambda: re.search(r"serving https://127\.0\.0\.1:(\d+)",
                                          log_of("server")), 30, "the server").group(1))
        config = os.path.join(data, "admin.config")
        with open(config) as f:
            token = re.search(r"token: (\S+)", f.read()).group(1)
        tls = ssl.create_default_context(cafile=os.path.join(data, "ca.crt"))
        tls.check_hostname = False

        def server_metrics():
            req = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                         headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, context=tls, timeout=10) as r:
                return r.read().decode()

        metrics_port = free_port()
        spawn("agent", [gpucloud, "agent", "run", "--server", f"https://127.0.0.1:{port}",
                        "--ca", os.path.join(data, "ca.crt"), "--token-file",
                        os.path.join(data, "bootstrap.token"), "--simulate", "2xH100",
                        "--node-name", "node-a", "--address", "127.0.0.1", "--state-dir",
                        os.path.join(work, "agent"), "--allow-host-processes", "--metrics-listen",
                        f"127.0.0.1:{metrics_port}"])

        def agent_metrics():
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                        timeout=10) as r:
                return r.read().decode()

        wait(lambda: 'gpucloud_nodes{ready="true"} 1' in server_metrics(), 30, "a Ready node")
        subprocess.run([gpuctl, "--config", config, "run", "--name", "lit", "--gpus", "1", "--",
                        "sleep", "120"], check=True, capture_output=True)
        agent = wait(lambda: (lambda t: 'job_name="lit"' in t and t)(agent_metrics()), 30,
                     "the task's labels on the agent's GPU metrics")
        # Per-job series are refreshed every 5 s.
        server = wait(lambda: (lambda t: 'job_name="lit"' in t and t)(server_metrics()), 30,
                      "the job's series on the server")
        # The agent leaves its tasks running when it stops (they are re-adopted): cancel first.
        subprocess.run([gpuctl, "--config", config, "cancel", "lit"], check=True,
                       capture_output=True)
        wait(lambda: 'job_name="lit",task="main-0"}' not in agent_metrics(), 30,
             "the task to end")
        return server, agent
    finally:
        for state in glob.glob(os.path.join(work, "agent", "tasks", "*.json")):
            try:  # a task still running (a failure above): its process group goes too
                with open(state) as f:
                    pid = json.load(f).get("pid", 0)
                if pid > 0:
                    os.killpg(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    helper = sys.argv[1]
    errors = []
    server = subprocess.run([helper, "server"], check=True, capture_output=True,
                            text=True).stdout
    errors += check("server /metrics", server)
    require("server /metrics", server, [
        'gpucloud_job_goodput_ratio{namespace="default",job_name="train"}',
        "gpucloud_api_request_duration_seconds_count{", "gpucloud_scheduling_latency_seconds_count",
        "gpucloud_job_recovery_seconds_max "], errors)
    agent = agent_text(helper)
    errors += check("agent /metrics", agent)
    require("agent /metrics", agent, [
        ',namespace="default",job_name="train",task="worker-0"}',
        'gpucloud_task_energy_joules_total{namespace="research",job_name="sweep-1"'], errors)
    if len(sys.argv) > 3:
        gpucloud, gpuctl = sys.argv[2], sys.argv[3]
        scrape = subprocess.run([gpucloud, "agent", "metrics", "--simulate", "8xH100"],
                                check=True, capture_output=True, text=True).stdout
        errors += check("gpucloud agent metrics", scrape)
        with tempfile.TemporaryDirectory() as work:
            os.chmod(work, 0o711)  # tasks run as unprivileged users and pass through it
            try:
                server, agent = live_texts(gpucloud, gpuctl, work)
            except (TimeoutError, subprocess.CalledProcessError) as e:
                for name in ("server", "agent"):
                    path = os.path.join(work, f"{name}.log")
                    if os.path.exists(path):
                        print(f"--- {name}.log\n" + open(path, errors="replace").read()[-3000:])
                print(f"FAIL live daemons: {e}")
                return 1
        errors += check("gpucloud server /metrics", server)
        require("gpucloud server /metrics", server, [
            'gpucloud_job_goodput_ratio{namespace="default",job_name="lit"}',
            "gpucloud_api_open_connections "], errors)
        errors += check("gpucloud agent run /metrics", agent)
        require("gpucloud agent run /metrics", agent, [
            ',namespace="default",job_name="lit",task="main-0"}',
            'gpucloud_task_energy_joules_total{namespace="default",job_name="lit"'], errors)
    for e in errors:
        print("FAIL", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
