#!/usr/bin/env python3
"""Interactive sessions end to end (CTest label `e2e`, issue 22; docs/interactive.md): a real
`gpucloud up` (server and agent, simulated GPUs, host processes) and the gpuctl binary.

  1. exec: stdout and stderr, the remote exit code; a command that does not exist is 127; a job
     that does not exist, a rank that does not exist, a job that is not running: a clear message
     and exit code 1;
  2. exec -it through a pseudo-terminal (python's pty): a command runs, a resize reaches the
     remote terminal (`stty size`), Ctrl-C interrupts `sleep`, the shell's exit code comes back;
     a terminal that sends garbage escape sequences and a resize the agent must refuse change
     nothing for the session;
  3. cp: 1 MB of random bytes into the task and back, the same bytes; a missing remote file is
     a clear error;
  4. port-forward: an HTTP request to a server in the task; 1,000 connections open at once; a
     port nothing listens on is a message and the forwarder goes on;
  5. a tenant cannot exec into another namespace's job (403 naming jobs:Exec), and the audit
     log records the refusal; an agent's dial-back for a made-up session is refused;
  6. an interactive job (idleTimeout 8s) lives while a session uses it, and then, left alone, is
     stopped (Cancelled, reason IdleTimeout, an IdleWarning event first), its GPU free again;
  7. a dropped client mid-session kills the command; a session into a task that ends ends too,
     saying so, its command killed; `gpuctl attach -i` sends a line to an interactive task's
     stdin and shows its answer (output from now on), a batch task has no stdin to attach to, a
     job that ended is said; nothing leaks: the agent's descriptors and child processes are
     what they were before the sessions;
  8. `gpuctl run -it -- sh` in a pseudo-terminal: a shell on a fresh GPU, its exit code, the job
     deleted after; `gpuctl notebook` (a stand-in `jupyter` on the task's PATH that answers as
     Jupyter does) prints a URL whose token opens it here, and Ctrl-C with --rm deletes the job.

Needs root (tasks run as unprivileged users). Exit 0 on pass, 1 on a failure, 77 to skip.
Usage: interactive.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import pty
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
from upcluster import Checks, UpCluster, wait_for  # noqa: E402

PREFIX = "/apis/gpucloud/v1"


def log(msg):
    print(f"interactive: {msg}", flush=True)


class Env:
    def __init__(self, build, up):
        self.gpuctl = os.path.join(build, "apps", "gpuctl")
        self.up = up
        self.env = dict(os.environ, GPUCLOUD_CONFIG=up.config)

    def run(self, *args, config=None, stdin=None, timeout=60):
        env = dict(self.env, GPUCLOUD_CONFIG=config or self.up.config)
        p = subprocess.run([self.gpuctl, *args], env=env, input=stdin, capture_output=True,
                           timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def job(self, name, ns="default"):
        return self.up.get(f"{PREFIX}/namespaces/{ns}/jobs/{name}")

    def running(self, name, ns="default"):
        return wait_for(lambda: self.job(name, ns)["status"].get("phase") == "Running", 30,
                        f"job {ns}/{name} to run")


def agent_usage(pid):
    """The up process's open descriptors, and its children that are not task shims."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0]
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and not cmd.endswith(b"gpucloud-shim"):
            children.append(int(entry))
    return fds, children


def test_exec(e, c):
    rc, out, err = e.run("exec", "shell", "--", "sh", "-c",
                         "echo out-$((2+3)); echo err-line >&2; exit 3")
    c.check("exec prints stdout", out == "out-5\n", out)
    c.check("exec prints stderr", "err-line" in err, err)
    c.check("exec returns the remote exit code", rc == 3, rc)
    rc, out, err = e.run("exec", "shell", "--", "printenv", "CUDA_VISIBLE_DEVICES")
    c.check("exec sees the task's GPUs", rc == 0 and out.strip().startswith("GPU-"), (rc, out, err))
    rc, out, err = e.run("exec", "-i", "shell", "--", "tr", "a-z", "A-Z", stdin=b"stdin works\n")
    c.check("exec -i passes stdin and its end", rc == 0 and out == "STDIN WORKS\n", (rc, out, err))
    rc, _, err = e.run("exec", "shell", "--", "no-such-command-here")
    c.check("a missing command is 127 with a message",
            rc == 127 and "command not found: no-such-command-here" in err, (rc, err))
    rc, _, err = e.run("exec", "no-such-job", "--", "true")
    c.check("exec into a job that does not exist", rc == 1 and "not found" in err, (rc, err))
    rc, _, err = e.run("exec", "shell", "--rank", "5", "--", "true")
    c.check("exec into a rank that does not exist",
            rc == 1 and "has no rank 5" in err, (rc, err))
    rc, _, err = e.run("exec", "done", "--", "true")
    c.check("exec into a job that is not running",
            rc == 1 and "a session needs a running task" in err, (rc, err))


def pty_session(e, args, steps, timeout=20):
    """gpuctl in a pseudo-terminal; steps: (bytes to type or a callable(fd, pid), pattern to
    await). Returns (exit code, output so far, the first pattern not seen or None)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["GPUCLOUD_CONFIG"] = e.up.config
        os.execv(e.gpuctl, [e.gpuctl, *args])
    out = b""
    missing = None

    def read_until(pattern, seconds):
        nonlocal out
        end = time.time() + seconds
        while time.time() < end:
            if pattern is not None and pattern in out:
                return True
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    out += os.read(fd, 65536)
                except OSError:
                    break
        return pattern is None or pattern in out

    import fcntl
    import termios
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    for action, pattern in steps:
        if callable(action):
            action(fd, pid)
        else:
            os.write(fd, action)
        if not read_until(pattern, 10):
            missing = pattern
            break
    deadline = time.time() + timeout
    status = None
    while time.time() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st)
            break
        read_until(None, 0.1)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)
    return status, out, missing


def test_tty(e, c):
    import fcntl
    import termios

    def resize(fd, pid):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        time.sleep(0.3)
        os.write(fd, b"stty size\n")

    def sleeping(fd, pid):
        wait_for(lambda: subprocess.run(["pgrep", "-x", "sleep", "-a"], capture_output=True,
                                        text=True).stdout.count("sleep 60"), 10, "sleep 60")

    status, out, missing = pty_session(e, ["exec", "-it", "shell", "--", "sh"], [
        (b"", b"$ "),
        (b"echo tty-$((6*7))\n", b"tty-42\r\n"),
        (b"stty size\n", b"40 120"),
        (resize, b"50 132"),
        # Garbage escape sequences are the remote terminal's to read, nothing else's.
        (b"\x1b[999;999R\x1b]0;\x07\x1b[?1049h\x1bPqq\x1b\\ \n", b"$ "),
        (b"sleep 60; echo not-interrupted\n", b"sleep 60"),
        (sleeping, b""),  # Ctrl-C only once the remote sleep runs, not while the line is typed
        (b"\x03", b"$ "),
        (b"echo alive-$((1+1))\n", b"alive-2"),
        (b"sleep 77 &\n", b"$ "),  # a background job, in a process group of its own
        (b"exit 7\n", None),
    ])
    c.check("exec -it: every step seen", missing is None, f"missing {missing!r} in {out[-400:]!r}")
    # The terminal echoes the typed line; the command's own output would be a line of its own.
    c.check("exec -it: Ctrl-C interrupted sleep", b"\nnot-interrupted" not in out, out[-200:])
    c.check("exec -it returns the shell's exit code", status == 7, status)
    try:
        wait_for(lambda: subprocess.run(["pgrep", "-f", "sleep 77"], capture_output=True)
                 .returncode != 0, 10, "the background job to go")
        c.check("what the shell left running goes with its session", True)
    except TimeoutError:
        c.check("what the shell left running goes with its session", False)


def test_cp(e, c, tmp):
    data = os.urandom(1 << 20)
    src, back = os.path.join(tmp, "in.bin"), os.path.join(tmp, "back.bin")
    with open(src, "wb") as f:
        f.write(data)
    rc, _, err = e.run("cp", src, "shell:/tmp/gpucloud-cp-test.bin")
    c.check("cp into the task", rc == 0, (rc, err))
    rc, _, err = e.run("cp", "shell:/tmp/gpucloud-cp-test.bin", back)
    c.check("cp out of the task", rc == 0, (rc, err))
    with open(back, "rb") as f:
        c.check("cp: the same bytes there and back", f.read() == data)
    rc, _, err = e.run("cp", "shell:/no/such/file", os.path.join(tmp, "x"))
    c.check("cp of a missing file names it", rc == 1 and "/no/such/file" in err, (rc, err))
    c.check("a failed cp leaves no partial file", not os.path.exists(os.path.join(tmp, "x")))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_port_forward(e, c, web_port):
    local, dead = free_port(), free_port()
    proc = subprocess.Popen([e.gpuctl, "port-forward", "web", f"{local}:{web_port}",
                             f"{dead}:1"], env=e.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        c.check("port-forward says where it listens", f"127.0.0.1:{local} -> {web_port}" in line,
                line)
        proc.stdout.readline()

        def get(_=None):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/hello.txt", timeout=30) as r:
                return r.read()

        body = wait_for(get, 10, "the forwarded HTTP server")
        c.check("port-forward carries an HTTP request", body == b"forwarded\n", body)
        # 1,000 connections at once, each held open until all are: one session carries them.
        barrier = threading.Barrier(1000, timeout=60)

        def held(_):
            with socket.create_connection(("127.0.0.1", local), timeout=60) as s:
                s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
                barrier.wait()
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
                return data.endswith(b"forwarded\n")

        with ThreadPoolExecutor(max_workers=1000) as pool:
            answers = list(pool.map(held, range(1000)))
        c.check("1,000 connections at once", all(answers), answers.count(False))
        with socket.create_connection(("127.0.0.1", dead), timeout=10) as s:
            s.settimeout(10)
            c.check("a port nothing listens on: the connection closes", s.recv(10) == b"")
        # The message arrives on stderr; the forwarder goes on serving.
        c.check("port-forward still serves after a refused connection",
                get() == b"forwarded\n")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    c.check("a refused connection is said, naming the port",
            b"cannot connect to port 1 in the task" in err, err)
    c.check("port-forward ends on Ctrl-C", proc.returncode == 0, proc.returncode)


def test_tenants(e, c, tmp):
    rc, out, err = e.run("create", "user", "mallory", "--namespace", "team-m", "--policy",
                         "gpucloud:tenant")
    c.check("a tenant is created", rc == 0, (rc, err))
    rc, out, err = e.run("create", "token", "--user", "mallory", "-o", "json")
    token = json.loads(out).get("status", {}).get("token") if rc == 0 else None
    c.check("the tenant gets a token", bool(token), (rc, out, err))
    config = os.path.join(tmp, "mallory.config")
    with open(e.up.config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write("\n".join(line if not line.startswith("token:") else f"token: {token}"
                          for line in text.splitlines()) + "\n")
    rc, _, err = e.run("exec", "shell", "--", "cat", "/etc/hostname", config=config)
    c.check("a tenant cannot exec into another namespace's job",
            rc == 1 and "jobs:Exec" in err, (rc, err))
    rc, _, err = e.run("port-forward", "web", "1", config=config, timeout=20)
    c.check("nor forward its ports", rc == 1 and "jobs:Exec" in err, (rc, err))
    def denials():
        req = urllib.request.Request(e.up.url + f"{PREFIX}/audit/records?user=mallory",
                                     headers={"Authorization": f"Bearer {e.up.token}"})
        with urllib.request.urlopen(req, context=e.up.ssl, timeout=10) as r:
            records = [json.loads(line) for line in r.read().decode().splitlines() if line]
        return [r for r in records if "jobs:Exec" in json.dumps(r) and "deny" in json.dumps(r)]

    try:
        denied = wait_for(lambda: (lambda d: d if len(d) >= 2 else None)(denials()), 10,
                          "the refusals' audit records")
    except TimeoutError:
        denied = denials()
    c.check("the refusal is in the audit log", len(denied) >= 2, denied)


def test_idle(e, c):
    manifest = """apiVersion: gpucloud/v1
kind: Job
metadata: {name: nb, namespace: default}
spec:
  interactive: {idleTimeout: 8s, maxDuration: 1h}
  tasks:
  - name: main
    command: [sh, -c, "while :; do sleep 3600; done"]
    resources: {gpu: {count: 1}}
"""
    rc, _, err = e.run("apply", "-f", "-", stdin=manifest.encode())
    c.check("an interactive job is accepted", rc == 0, (rc, err))
    e.running("nb")
    # In use: a session's traffic every second keeps it alive past its timeout.
    started = time.time()
    while time.time() - started < 10:
        rc, _, _ = e.run("exec", "nb", "--", "true")
        time.sleep(1)
    c.check("a used interactive job lives past its idle timeout",
            e.job("nb")["status"]["phase"] == "Running", e.job("nb")["status"])
    status = wait_for(lambda: (lambda s: s if s.get("phase") == "Cancelled" else None)(
        e.job("nb")["status"]), 30, "the idle job to stop")
    c.check("left alone, it stops: IdleTimeout", status.get("reason") == "IdleTimeout", status)
    events = e.up.get(f"{PREFIX}/namespaces/default/jobs/nb/events")
    reasons = [ev.get("reason") for ev in events.get("items", [])]
    c.check("an IdleWarning came first", "IdleWarning" in reasons and
            reasons.index("IdleWarning") < reasons.index("IdleTimeout"), reasons)
    # Two GPUs, one held by "shell": a one-GPU job runs only on the GPU "nb" gave back.
    rc, _, err = e.run("run", "--name", "after", "--gpus", "1", "--", "true")
    try:
        wait_for(lambda: e.job("after")["status"].get("phase") == "Succeeded", 30,
                 "a job on the freed GPU")
        c.check("its GPU is free again: another job runs on it", True)
    except TimeoutError:
        c.check("its GPU is free again: another job runs on it", False, e.job("after")["status"])


def test_task_end(e, c):
    rc, _, err = e.run("run", "--name", "ending", "--gpus", "0", "--", "sh", "-c",
                       "while :; do sleep 3600; done")
    e.running("ending")
    marker = secrets.token_hex(4)
    proc = subprocess.Popen([e.gpuctl, "exec", "ending", "--", "sh", "-c",
                             f"echo started; exec sleep 1000 # {marker}"], env=e.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    e.run("cancel", "ending")
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    c.check("a session ends with its task, saying so",
            proc.returncode == 1 and b"the task ended" in err, (proc.returncode, err))
    try:
        wait_for(lambda: subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode
                 != 0, 10, "the command to go")
        c.check("and its command is killed", True)
    except TimeoutError:
        c.check("and its command is killed", False)


def test_drop(e, c):
    marker = secrets.token_hex(4)
    proc = subprocess.Popen([e.gpuctl, "exec", "shell", "--", "sh", "-c",
                             f"echo started; exec sleep 1000 # {marker}"], env=e.env,
                            stdout=subprocess.PIPE)
    proc.stdout.readline()

    def running():
        return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0

    c.check("the exec'd command runs", running())
    proc.kill()
    proc.wait()
    try:
        wait_for(lambda: not running(), 10, "the command to go with its client")
        c.check("a dropped client's command is killed", True)
    except TimeoutError:
        c.check("a dropped client's command is killed", False)


# A static file server whose listen backlog takes 1,000 connections at once.
WEB_SERVER = """import functools, http.server, sys
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
handler.log_message = lambda *a: None
Server(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


# Answers as Jupyter does where gpuctl notebook looks: GET /api is 200, / with the token 200.
FAKE_JUPYTER = """#!/usr/bin/env python3
import http.server, os, sys
port = int([a for a in sys.argv if a.startswith("--port=")][0].split("=")[1])
token = os.environ.get("JUPYTER_TOKEN", "")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/api" or self.path == "/?token=" + token
        self.send_response(200 if ok else 403)
        self.end_headers()
        self.wfile.write(b"jupyter stand-in\\n" if ok else b"forbidden\\n")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_attach(e, c):
    """gpuctl attach: an interactive task reads what the client types; a batch one has no stdin."""
    manifest = """apiVersion: gpucloud/v1
kind: Job
metadata: {name: talk, namespace: default}
spec:
  interactive: {idleTimeout: 1h, maxDuration: 1h}
  tasks:
  - name: main
    command: [sh, -c, "echo ready; read line; echo got:$line; sleep 3"]
"""
    rc, _, err = e.run("apply", "-f", "-", stdin=manifest.encode())
    c.check("an interactive job to attach to is accepted", rc == 0, (rc, err))
    e.running("talk")
    # "From now on" is the server's log: wait until the task's first line has been shipped.
    wait_for(lambda: "ready" in e.run("logs", "talk")[1], 15, "talk's first line in its log")
    rc, out, err = e.run("attach", "-i", "talk", stdin=b"hello\n", timeout=60)
    c.check("attach -i: the task read the line and its answer came back", rc == 0 and
            "got:hello" in out, (rc, out, err))
    c.check("attach shows output from now on, not the task's earlier lines", "ready" not in out,
            out)
    wait_for(lambda: e.job("talk")["status"].get("phase") == "Succeeded", 30, "talk to end")
    rc, _, err = e.run("attach", "-i", "shell", stdin=b"x\n")
    c.check("a batch job's task has no stdin to attach to: exit 1, said",
            rc == 1 and "has no stdin to attach to" in err, (rc, err))
    rc, _, err = e.run("attach", "done")
    c.check("attach to a job that ended: exit 1, said", rc == 1 and "is Succeeded" in err,
            (rc, err))


def test_run_it(e, c):
    status, out, missing = pty_session(e, ["run", "-it", "--gpus", "1", "--name", "shell2", "--",
                                           "sh"], [
        (b"", b"$ "),
        (b"echo gpu=$CUDA_VISIBLE_DEVICES; exit 4\n", b"deleted"),
    ], timeout=30)
    c.check("run -it: a shell on a fresh GPU", missing is None and b"gpu=GPU-" in out,
            out[-300:])
    c.check("run -it returns the shell's exit code", status == 4, status)
    # A running job's delete is a cancel first (202): it goes once its task has stopped.
    try:
        wait_for(lambda: e.run("get", "job", "shell2")[0] != 0, 30, "the job to go")
        c.check("run -it deletes its job after", True)
    except TimeoutError:
        c.check("run -it deletes its job after", False, e.run("get", "job", "shell2")[1])


def test_notebook(e, c):
    port = free_port()
    proc = subprocess.Popen([e.gpuctl, "notebook", "--gpus", "1", "--name", "nbk", "--port",
                             str(port), "--rm"], env=e.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    err = b""
    try:
        line = proc.stdout.readline().decode()
        url = line.split("Jupyter is ready: ", 1)[-1].strip()
        ok = url.startswith(f"http://127.0.0.1:{port}/?token=")
        if not ok:
            proc.send_signal(signal.SIGINT)
            err = proc.communicate(timeout=20)[1]
        c.check("notebook prints its URL with the token", ok, (line, err[-500:]))
        if ok:
            with urllib.request.urlopen(url, timeout=10) as r:
                c.check("the URL opens the notebook here", r.status == 200)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                err = proc.communicate(timeout=20)[1]
            except subprocess.TimeoutExpired:
                proc.kill()
                err = proc.communicate()[1]
    c.check("Ctrl-C ends notebook --rm, deleting its job",
            proc.returncode == 0 and b"deleted" in err, (proc.returncode, err[-300:]))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        log("SKIP: needs root (tasks run as unprivileged users)")
        return 77
    c = Checks("interactive")
    tmp = tempfile.mkdtemp(prefix="gpucloud-interactive-")
    os.chmod(tmp, 0o711)
    webroot = os.path.join(tmp, "web")
    os.makedirs(webroot)
    with open(os.path.join(webroot, "hello.txt"), "w") as f:
        f.write("forwarded\n")
    web_script = os.path.join(tmp, "web.py")
    with open(web_script, "w") as f:  # http.server's own listen backlog is 5
        f.write(WEB_SERVER)
    os.chmod(web_script, 0o644)
    os.chmod(webroot, 0o755)
    os.chmod(os.path.join(webroot, "hello.txt"), 0o644)
    fake = os.path.join(tmp, "bin")
    os.makedirs(fake)
    with open(os.path.join(fake, "jupyter"), "w") as f:
        f.write(FAKE_JUPYTER)
    os.chmod(fake, 0o755)
    os.chmod(os.path.join(fake, "jupyter"), 0o755)
    os.environ["PATH"] = fake + ":" + os.environ["PATH"]  # host processes keep the node's PATH
    with UpCluster(os.path.join(build, "apps", "gpucloud"), source, simulate="2xH100",
                   node="interactive") as up:
        e = Env(build, up)
        web_port = free_port()
        for name, cmd, gpus in [
            ("shell", ["sh", "-c", "while :; do sleep 3600; done"], "1"),
            ("web", ["python3", web_script, str(web_port), webroot], "0"),
            ("done", ["true"], "0"),
        ]:
            rc, _, err = e.run("run", "--name", name, "--gpus", gpus, "--", *cmd)
            c.check(f"job {name} submitted", rc == 0, err)
        e.running("shell")
        e.running("web")
        wait_for(lambda: e.job("done")["status"].get("phase") == "Succeeded", 30, "job done")
        wait_for(lambda: e.run("exec", "shell", "--", "true")[0] == 0, 15, "the session tunnel")
        before = agent_usage(up.proc.pid)
        test_exec(e, c)
        test_tty(e, c)
        test_cp(e, c, tmp)
        test_port_forward(e, c, web_port)
        test_tenants(e, c, tmp)
        test_drop(e, c)
        test_task_end(e, c)
        test_attach(e, c)
        def settled():
            u = agent_usage(up.proc.pid)
            return u if u[0] <= before[0] and u[1] == before[1] else None
        try:
            after = wait_for(settled, 15, "the agent's descriptors and children to settle")
        except TimeoutError:
            after = agent_usage(up.proc.pid)
        c.check("nothing leaked on the agent (descriptors, child processes)",
                after[0] <= before[0] and after[1] == before[1], f"before {before}, after {after}")
        test_run_it(e, c)
        test_notebook(e, c)
        test_idle(e, c)
    log("PASS" if c.failed == 0 else f"{c.failed} check(s) FAILED")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
