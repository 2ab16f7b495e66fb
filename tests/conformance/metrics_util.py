"""Helpers the metrics conformance tests share: the agent's metrics text from the metrics_text
helper, and stopping a daemon (SIGTERM, then SIGKILL after 30 s)."""
import signal
import subprocess
import urllib.request


def agent_text(helper):
    """What `metrics_text agent` serves on /metrics (it prints its port, serves until stdin closes)."""
    p = subprocess.Popen([helper, "agent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        port = int(p.stdout.readline())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.read().decode()
    finally:
        p.stdin.close()
        p.wait(timeout=10)


def stop_process(p, seconds=30):
    """SIGTERM, and SIGKILL if it has not exited after `seconds`."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
