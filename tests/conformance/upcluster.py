"""A real `gpucloud up` for the conformance tests: a control plane and an agent with simulated
GPUs, in a temporary directory, on a free loopback port, always stopped.

    with UpCluster(gpucloud_binary, source_dir) as up:
        up.url, up.ca, up.token, up.config   # what a client needs (up.config: admin.config)

Tasks run as host processes in `workdir` (the repository by default, so that a manifest's
relative command such as examples/trainer/train.py is found). KEEP_CONFORMANCE_DIR=1 keeps
the directory (up.log, the store, the tasks' logs) after stop(). Not thread-safe: one test
thread starts and stops it.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request


def wait_for(ok, seconds, what, step=0.05):
    """ok()'s first true value within `seconds` (exceptions count as not yet); TimeoutError."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            v = ok()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 (the daemon may be starting)
            last = e
        time.sleep(step)
    raise TimeoutError(f"timed out after {seconds} s waiting for {what} (last error: {last})")


class Checks:
    """Named checks of an end-to-end test, printed as they go ("PREFIX: ok   what", or
    "PREFIX: FAIL what: detail"); `failed` counts the failures."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.failed = 0

    def log(self, msg):
        print(f"{self.prefix}: {msg}", flush=True)

    def check(self, what, ok, detail=""):
        self.log(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": {detail}"))
        if not ok:
            self.failed += 1


def _die_with_parent():
    """In the child before exec: SIGTERM when the test process dies (killed by CTest's
    timeout, say), so that no cluster outlives its test."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class UpCluster:
    def __init__(self, binary, workdir, simulate="4xH100", node="conformance", args=()):
        self.binary, self.workdir, self.simulate, self.node = binary, workdir, simulate, node
        self.args = list(args)  # more flags for `gpucloud up`
        self.tmp = self.proc = self.url = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="gpucloud-conformance-")
        # Tasks run as unprivileged users when this runs as root: they must pass through here
        # to their directories under the agent's state (which up keeps 0700 itself).
        os.chmod(self.tmp, 0o711)
        self.data = os.path.join(self.tmp, "data")
        self.logfile = os.path.join(self.tmp, "up.log")
        with open(self.logfile, "w") as log:
            self.proc = subprocess.Popen(
                [self.binary, "up", "--data-dir", self.data, "--listen", "127.0.0.1:0",
                 "--simulate", self.simulate, "--node-name", self.node, *self.args],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True,
                preexec_fn=_die_with_parent)
        try:
            m = wait_for(lambda: self._exited() or re.search(
                r"control plane at (https://127\.0\.0\.1:\d+)", self.output()), 30,
                "gpucloud up to listen")
            self.url = m.group(1)
            self.config = os.path.join(self.data, "admin.config")
            with open(self.config) as f:
                text = f.read()
            self.token = re.search(r"^token: (\S+)", text, re.M).group(1)
            self.ca = re.search(r"^certificate-authority: (\S+)", text, re.M).group(1)
            self.ssl = ssl.create_default_context(cafile=self.ca)
            wait_for(self._node_ready, 30, f"node {self.node} to be Ready")
        except BaseException:
            self.stop()
            raise

    def _exited(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"gpucloud up exited with {self.proc.returncode}:\n{self.output()}")
        return None

    def _node_ready(self):
        self._exited()
        node = self.get(f"/apis/gpucloud/v1/nodes/{self.node}")
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions", [])) or \
            (node.get("status") or {}).get("ready") is True

    def get(self, path):
        req = urllib.request.Request(self.url + path,
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, context=self.ssl, timeout=10) as r:
            return json.loads(r.read())

    def output(self):
        with open(self.logfile, errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM (up stops its agent, which kills its tasks), SIGKILL of the whole process
        group after 20 s; then the directory is removed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.tmp and os.environ.get("KEEP_CONFORMANCE_DIR") != "1":
            shutil.rmtree(self.tmp, ignore_errors=True)
