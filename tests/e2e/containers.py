#!/usr/bin/env python3
"""Jobs in container images (CTest `containers_e2e`, label e2e; issue 13): a real
`gpucloud server`, a real `gpucloud agent run` (1 simulated H100, Podman with a private image
store, containers only), Debian's docker-registry on loopback with TLS, and the images of
scripts/build-images pushed to it. Checks, each a row of the summary table:

  1. a job in an image sees its own root file system (not the host's), its GPU in
     CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES, its writable checkpoint directory, only its own
     processes, and runs as its namespace's unprivileged user; it reads no secret of the server;
  2. a second job of the same image downloads no layer (the node's cache);
  3. the example trainer runs in its image, fails at step 50, and its next attempt, in a new
     container, resumes from its checkpoint and finishes;
  4. a running container is re-adopted by a restarted agent, and deleting its job removes it;
     `gpuctl exec` enters it and `gpuctl attach -i` reaches an interactive container's stdin;
  5. a tag the registry lacks: the task waits with the registry's reason (ImagePullBackOff),
     the job does not fail; imagePullPolicy Never with a missing image says so, likewise;
  6. a job without an image on a containers-only node fails with HostProcessNotAllowed, and
     runAsUser 0 fails naming securityContext.runAsUser;
  7. a layer whose digest does not match is refused (the task waits with the reason, nothing
     of the image is left in the node's store); a registry that wants credentials answers the
     node 401 until its credentials file has them, and then the job runs;
  8. Volcano's VK_TASK_INDEX, VC_<TASK>_HOSTS and /etc/volcano/<task>.host reach a container;
  9. an image store over its limit (--image-store-max-gib) loses the unused images, not those
     of running tasks;
 10. `gpuctl images pull --pool` puts an image on the pool's nodes before any job needs it;
 11. Secrets: a variable from a secretKeyRef and a read-only file from a secret volume reach the
     container, the value in no job, event or host command line; a missing secret makes the
     task wait (CreateContainerConfigError) and it runs once created; an imagePullSecret fetches
     an image the node's credentials cannot, and another namespace's task without it may not
     use the cached image.
Exit 0 on pass, 1 on a failure, 77 (skipped, saying why) without root, Podman or the registry.

Usage: containers.py BUILD_DIR SOURCE_DIR
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oci  # noqa: E402

SKIP = 77


def log(msg):
    print(f"[containers] {msg}", flush=True)


def wait(pred, timeout, what):
    """Polls an external process's state (the server's view of a job) until `pred` holds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Cluster:
    # The GPUs of the agent: one simulated H100, no CDI spec (gpu_containers.py gives real ones).
    SIMULATED = ("--simulate", "1xH100", "--cdi-spec-dir", "")

    def __init__(self, build, work, reg, cert_dir, gpus=SIMULATED):
        self.build, self.work, self.reg, self.cert_dir = build, work, reg, cert_dir
        self.gpus = list(gpus)
        self.auth_file = os.path.join(work, "auth.json")
        with open(self.auth_file, "w") as f:
            json.dump({"auths": {}}, f)
        self.data = os.path.join(work, "server")
        self.agent_dir = os.path.join(work, "agent")
        self.store = os.path.join(work, "images")
        self.procs = {}

    def spawn(self, name, argv):
        out = open(os.path.join(self.work, f"{name}.log"), "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def start(self):
        self.spawn("server", [f"{self.build}/apps/gpucloud", "server", "--data-dir", self.data,
                              "--listen", "127.0.0.1:0"])
        self.config = os.path.join(self.data, "admin.config")
        wait(lambda: os.path.exists(self.config), 30, "the server's admin.config")
        self.url = wait(self.server_url, 30, "the server's URL")
        self.start_agent()
        wait(lambda: "Ready" in self.gpuctl("get", "nodes", check=False), 30, "a Ready node")

    def server_url(self):
        for line in open(self.config):
            if line.startswith("server:"):
                return line.split(":", 1)[1].strip()
        return None

    def start_agent(self, extra=()):
        self.spawn("agent", [
            f"{self.build}/apps/gpucloud", "agent", "run", "--server", self.url, "--ca",
            os.path.join(self.data, "ca.crt"), "--token-file",
            os.path.join(self.data, "bootstrap.token"), *self.gpus,
            "--node-name", "node-a", "--address", "127.0.0.1", "--pool", "gpu",
            "--state-dir", self.agent_dir,
            "--image-store", self.store, "--registry-cert-dir", self.cert_dir,
            "--registry-auth-file", self.auth_file,
            "--container-runtime", "runc", *extra])

    def kill_agent(self):
        p = self.procs.pop("agent")
        p.send_signal(signal.SIGKILL)
        p.wait()

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def gpuctl(self, *args, check=True):
        r = subprocess.run([f"{self.build}/apps/gpuctl", *args], capture_output=True, text=True,
                           env=dict(os.environ, GPUCLOUD_CONFIG=self.config),
                           timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"gpuctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def apply(self, job):
        path = os.path.join(self.work, f"{job['metadata']['name']}.json")
        with open(path, "w") as f:
            json.dump(job, f)
        self.gpuctl("apply", "-f", path)

    def job(self, name):
        out = self.gpuctl("get", "jobs", name, "-o", "json", check=False)
        try:
            return json.loads(out)
        except ValueError:
            return {}

    def phase(self, name):
        return self.job(name).get("status", {}).get("phase", "")

    def tasks(self, name):
        return " | ".join(self.job(name).get("status", {}).get("tasks", {}).values())

    def wait_phase(self, name, phases, timeout):
        return wait(lambda: self.phase(name) in phases and self.phase(name), timeout,
                    f"job {name} in {phases} (now {self.phase(name)}: {self.tasks(name)})")

    def logs(self, name, *extra):
        return self.gpuctl("logs", name, *extra, check=False)

    def podman(self, *args):
        return subprocess.run(["podman", "--root", f"{self.store}/storage", "--runroot",
                               f"{self.store}/run", "--tmpdir", f"{self.store}/tmp", *args],
                              capture_output=True, text=True, timeout=60)


def job(name, image, command, gpu=0, policy=None, restarts=0, security=None):
    task = {"name": "main", "command": command}
    if image:
        task["image"] = image
    if gpu:
        task["resources"] = {"gpu": gpu}
    if policy:
        task["imagePullPolicy"] = policy
    if security:
        task["securityContext"] = security
    return {"apiVersion": "gpucloud/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"tasks": [task], "restartPolicy": {"maxRestarts": restarts,
                                                        "backoff": "1s"}}}


VIEW = ("echo uid=$(id -u) gid=$(id -g); echo gpus=$CUDA_VISIBLE_DEVICES/$NVIDIA_VISIBLE_DEVICES;"
        " echo root=$(ls / | tr '\\n' ,); echo ckpt=$GPUCLOUD_CHECKPOINT_DIR;"
        " touch $GPUCLOUD_CHECKPOINT_DIR/probe && echo ckpt-writable;"
        " echo procs=$(ls /proc | grep -c '^[0-9]');"
        " cat {secret} 2>/dev/null && echo SECRET-READ; echo done")


class Results:
    def __init__(self):
        self.rows = []

    def check(self, name, ok, detail):
        self.rows.append((name, "PASS" if ok else "FAIL", detail))
        log(f"{'PASS' if ok else 'FAIL'}: {name}: {detail}")

    def table(self):
        width = max(len(r[0]) for r in self.rows)
        for name, verdict, detail in self.rows:
            print(f"  {verdict:<4}  {name:<{width}}  {detail}")
        return not any(r[1] == "FAIL" for r in self.rows)


def check_isolation(c, res, busybox):
    secret = os.path.join(c.data, "bootstrap.token")
    c.apply(job("view", busybox, ["sh", "-c", VIEW.format(secret=secret)], gpu=1))
    c.wait_phase("view", ("Succeeded", "Failed"), 90)
    out = c.logs("view")
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    uid = int(fields.get("uid", "0").split()[0])
    res.check("1 runs in its image as an unprivileged user",
              c.phase("view") == "Succeeded" and uid >= 1_000_000_000,
              f"phase {c.phase('view')}, {fields.get('uid', '?')}")
    root = fields.get("root", "")
    res.check("1 sees the image's root file system, not the host's",
              "bin" in root.split(",") and
              not {"work", "home", "var", "opt"} & set(root.split(",")), f"/ = {root}")
    gpus = fields.get("gpus", "")
    res.check("1 sees its GPU", gpus.startswith("GPU-") and gpus.split("/")[0] == gpus.split("/")[1],
              f"CUDA/NVIDIA_VISIBLE_DEVICES {gpus}")
    res.check("1 writes its checkpoint directory",
              fields.get("ckpt") == "/gpucloud/checkpoints" and "ckpt-writable" in out,
              f"GPUCLOUD_CHECKPOINT_DIR {fields.get('ckpt')}")
    procs = int(fields.get("procs", "99") or 99)
    res.check("1 sees only its own processes", procs <= 4, f"{procs} processes in /proc")
    res.check("1 reads no secret of the server", "SECRET-READ" not in out and "done" in out,
              "bootstrap token not readable (not in its file system)")


def check_volcano(c, res, busybox):
    doc = job("vc", busybox, ["sh", "-c", "echo index=$VK_TASK_INDEX/$VC_TASK_INDEX;"
                                          " echo hosts=$VC_MAIN_HOSTS; cat /etc/volcano/main.host"])
    doc["spec"]["tasks"][0]["replicas"] = 2
    c.apply(doc)
    phase = c.wait_phase("vc", ("Succeeded", "Failed"), 60)
    out = c.logs("vc", "--rank", "1")
    res.check("8 Volcano's task index, hosts and /etc/volcano/<task>.host are in the container",
              phase == "Succeeded" and "index=1/1" in out and
              "hosts=127.0.0.1,127.0.0.1" in out and "127.0.0.1\n127.0.0.1" in out,
              " ".join(out.split())[:200])


def check_cache(c, res, busybox):
    before = c.reg.blob_downloads()
    c.apply(job("again", busybox, ["sh", "-c", "echo again"]))
    c.wait_phase("again", ("Succeeded", "Failed"), 60)
    after = c.reg.blob_downloads()
    res.check("2 a cached image downloads no layer", c.phase("again") == "Succeeded" and
              after == before, f"blob downloads {before} -> {after}")


def check_trainer(c, res, trainer):
    c.apply(job("trainer", trainer, ["python3", "/app/train.py", "--steps", "120",
                                     "--checkpoint-every", "20", "--fail-at-step", "50"],
                gpu=1, restarts=2))
    phase = c.wait_phase("trainer", ("Succeeded", "Failed"), 180)
    first = c.logs("trainer", "--attempt", "1")
    last = c.logs("trainer")
    res.check("3 the trainer resumes from its checkpoint in a new container",
              phase == "Succeeded" and "(restart 1)" in last and "starting at step 0 " not in last
              and "final loss" in last,
              f"phase {phase}; attempt 1 ends {first.strip().splitlines()[-1:]}, "
              f"last ends {last.strip().splitlines()[-1:]}")


def check_readoption(c, res, busybox):
    c.apply(job("long", busybox, ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i;"
                                              " sleep 0.2; done"]))
    c.wait_phase("long", ("Running",), 60)
    # Issue 22: exec enters the container (its PID namespace: PID 1 is the task's shell) as its
    # user, and stdin reaches it.
    inside = "cat /proc/1/cmdline | tr '\\0' ' '; echo; id -u"

    def exec_inside():
        r = subprocess.run([f"{c.build}/apps/gpuctl", "exec", "long", "--", "sh", "-c", inside],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, GPUCLOUD_CONFIG=c.config))
        return r.stdout if r.returncode == 0 else f"exit {r.returncode}: {r.stderr}"

    out = exec_inside()
    res.check("4 gpuctl exec runs inside the container", out.startswith("sh -c i=0") and
              out.split()[-1] != "0", out[:300])
    c.kill_agent()
    c.start_agent()
    wait(lambda: "re-adopted task" in open(os.path.join(c.work, "agent.log")).read(), 30,
         "the restarted agent to re-adopt the container")
    running = c.phase("long") == "Running"
    names = c.podman("ps", "--format", "{{.Names}}").stdout.split()
    res.check("4 a restarted agent re-adopts a running container",
              running and any("long" in n for n in names), f"phase {c.phase('long')}, "
              f"containers {names}")
    out = exec_inside()
    res.check("4 and exec enters it again", out.startswith("sh -c i=0"), out[:300])
    c.gpuctl("delete", "job", "long")
    gone = wait(lambda: not any("long" in n for n in
                                c.podman("ps", "-a", "--format", "{{.Names}}").stdout.split()),
                60, "the container of a deleted job to go")
    res.check("4 deleting the job removes its container", gone, "podman ps -a has none")


def check_attach(c, res, busybox):
    """Issue 22: `gpuctl attach -i` into an interactive job's container: the line typed reaches
    the task's stdin (`podman run -i`, fed from the FIFO the agent made) and its answer comes
    back through the job's log."""
    talk = job("talk", busybox, ["sh", "-c", "echo ready; read line; echo got:$line; sleep 3"])
    talk["spec"]["interactive"] = {"idleTimeout": "1h", "maxDuration": "1h"}
    c.apply(talk)
    c.wait_phase("talk", ("Running",), 60)
    wait(lambda: "ready" in c.logs("talk"), 30, "talk's first line in its log")
    r = subprocess.run([f"{c.build}/apps/gpuctl", "attach", "-i", "talk"], input="hello\n",
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, GPUCLOUD_CONFIG=c.config))
    res.check("4 gpuctl attach -i reaches a container's stdin and shows its answer",
              r.returncode == 0 and "got:hello" in r.stdout,
              f"exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
    phase = c.wait_phase("talk", ("Succeeded", "Failed"), 60)
    res.check("4 and the interactive container ends with its command", phase == "Succeeded", phase)


def check_pull_failures(c, res):
    missing = f"{c.reg.addr}/gpucloud/busybox:no-such-tag"
    c.apply(job("missing", missing, ["sh", "-c", "true"]))
    msg = wait(lambda: "ImagePullBackOff" in c.tasks("missing") and c.tasks("missing"), 60,
               "the pull of a missing tag to fail")
    res.check("5 a missing tag waits with the registry's reason",
              "manifest unknown" in msg and c.phase("missing") not in ("Failed",), msg[:200])
    events = c.gpuctl("events", "missing")
    res.check("5 the failed pull is in the job's events", "ImagePullBackOff" in events and
              "manifest unknown" in events, " ".join(events.split())[-200:])
    c.gpuctl("delete", "job", "missing")
    c.apply(job("never", "localhost/not-here:1", ["sh"], policy="Never"))
    msg = wait(lambda: "ErrImageNeverPull" in c.tasks("never") and c.tasks("never"), 60,
               "imagePullPolicy Never to say the image is missing")
    res.check("5 imagePullPolicy Never with a missing image says so",
              c.phase("never") != "Failed", msg[:200])
    c.gpuctl("delete", "job", "never")


def check_refusals(c, res, busybox):
    c.apply(job("host", None, ["sh", "-c", "id"]))
    c.wait_phase("host", ("Failed",), 60)
    msg = c.job("host").get("status", {}).get("message", "")
    res.check("6 a host process on a containers-only node is refused",
              "HostProcessNotAllowed" in msg, msg[:200])
    c.apply(job("root", busybox, ["id"], security={"runAsUser": 0}))
    c.wait_phase("root", ("Failed",), 60)
    msg = c.job("root").get("status", {}).get("message", "")
    res.check("6 runAsUser 0 is refused, naming the field", "securityContext.runAsUser" in msg,
              msg[:200])


def push_corrupted(builder, creg, work):
    """An image with a layer of its own (the node has every busybox layer already: a pull
    would not fetch it), pushed, then that layer's blob corrupted in the registry."""
    ctx = os.path.join(work, "unique")
    os.makedirs(ctx)
    with open(os.path.join(ctx, "nonce"), "w") as f:
        f.write(os.urandom(16).hex())
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write(f"FROM {oci.BUSYBOX}\nCOPY nonce /nonce\n")
    builder.run(["build", "--pull=never", "-t", "localhost/gpucloud/unique:1", ctx])
    oci.push_image(builder, "localhost/gpucloud/unique:1", creg, "gpucloud/unique:1")
    digest = creg.manifest("gpucloud/unique", "1")["layers"][-1]["digest"]
    path = creg.blob_path(digest)
    with open(path, "r+b") as f:  # the gzip header's MTIME: only the digest can tell
        head = f.read(10)
        f.seek(4)
        f.write(bytes(b ^ 0x5A for b in head[4:8]))


def check_registry_refusals(c, res, creg, areg):
    ref = f"{creg.addr}/gpucloud/unique:1"
    c.apply(job("corrupt", ref, ["sh", "-c", "true"]))
    msg = wait(lambda: "ImagePullBackOff" in c.tasks("corrupt") and c.tasks("corrupt"), 60,
               "the pull of a corrupted layer to fail")
    res.check("7 a layer whose digest does not match is refused",
              "did not match" in msg.lower() and c.phase("corrupt") != "Failed" and
              c.podman("image", "exists", ref).returncode != 0, msg[:200])
    c.gpuctl("delete", "job", "corrupt")
    ref = f"{areg.addr}/gpucloud/busybox:1"
    c.apply(job("auth", ref, ["sh", "-c", "echo authorized"]))
    msg = wait(lambda: "ImagePullBackOff" in c.tasks("auth") and c.tasks("auth"), 60,
               "the pull without credentials to fail")
    res.check("7 without credentials the registry's 401 is the reason",
              "unauthorized" in msg.lower() or "authentication required" in msg.lower(), msg[:200])
    areg.auth_file(areg.username, areg.password, path=c.auth_file)  # the node gets them
    phase = c.wait_phase("auth", ("Succeeded", "Failed"), 60)
    res.check("7 with the node's credentials the pull and the job succeed",
              phase == "Succeeded" and "authorized" in c.logs("auth"), f"phase {phase}")


SECRET_VALUE = "hf_e2e_VALUE_5521"


def check_secrets(c, res, areg, busybox):
    """Secrets reach a container as variables and read-only files, never in the job, its
    events or Podman's command line; a missing one makes the task wait, not fail; a pull secret
    fetches an image the node cannot, and another namespace's task without it may not use it."""
    c.gpuctl("create", "secret", "generic", "hf", "-n", "default",
             f"--from-literal=token={SECRET_VALUE}", "--from-literal=user=alice")
    spec = job("sec", busybox, ["sh", "-c", "echo token=$HF_TOKEN; echo user=$(cat /etc/hf/u);"
                                " ls -ln /etc/hf; touch /etc/hf/x 2>/dev/null || echo ro;"
                                " sleep 5"])
    task = spec["spec"]["tasks"][0]
    task["env"] = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf",
                                                                        "key": "token"}}}]
    task["volumes"] = [{"name": "hf", "mountPath": "/etc/hf",
                        "secret": {"secretName": "hf", "items": [{"key": "user", "path": "u"}]}}]
    c.apply(spec)
    c.wait_phase("sec", ("Running",), 60)
    cmdlines = subprocess.run(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"],
                              capture_output=True, text=True).stdout
    # The snapshot must hold the task's own `podman run`, or it checked nothing.
    saw_podman = "gpucloud-default.sec." in cmdlines
    phase = c.wait_phase("sec", ("Succeeded", "Failed"), 60)
    out = c.logs("sec")
    res.check("11 a secret reaches the container as a variable and a read-only 0400 file",
              phase == "Succeeded" and f"token={SECRET_VALUE}" in out and "user=alice" in out
              and "-r--------" in out and "ro" in out.split(), out.strip()[-300:])
    shown = c.gpuctl("get", "jobs", "sec", "-o", "yaml") + c.gpuctl("events", "sec")
    res.check("11 the value is in no job, event or host command line",
              saw_podman and SECRET_VALUE not in shown and SECRET_VALUE not in cmdlines,
              "not in get -o yaml, events or /proc/*/cmdline")
    spec = job("later", busybox, ["sh", "-c", "echo got=$PW"])
    spec["spec"]["tasks"][0]["env"] = [
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "later", "key": "pw"}}}]
    c.apply(spec)
    msg = wait(lambda: "CreateContainerConfigError" in c.tasks("later") and c.tasks("later"), 60,
               "the task to wait for its missing secret")
    waiting = 'secret "later" not found' in msg and c.phase("later") not in ("Failed",)
    c.gpuctl("create", "secret", "generic", "later", "-n", "default", "--from-literal=pw=42")
    phase = c.wait_phase("later", ("Succeeded", "Failed"), 60)
    res.check("11 a missing secret makes the task wait, then it runs once the secret is there",
              waiting and phase == "Succeeded" and "got=42" in c.logs("later"), msg[:160])
    ref = f"{areg.addr}/gpucloud/busybox:1"
    c.gpuctl("create", "secret", "docker-registry", "regcred", "-n", "default",
             f"--docker-server={areg.addr}", f"--docker-username={areg.username}",
             f"--docker-password={areg.password}")
    spec = job("pulled", ref, ["sh", "-c", "echo pulled-with-secret"], policy="IfNotPresent")
    spec["spec"]["tasks"][0]["imagePullSecrets"] = [{"name": "regcred"}]
    c.apply(spec)
    phase = c.wait_phase("pulled", ("Succeeded", "Failed"), 90)
    res.check("11 an image pull secret fetches what the node's credentials cannot",
              phase == "Succeeded" and "pulled-with-secret" in c.logs("pulled"), f"phase {phase}")
    spec = job("steal", ref, ["sh", "-c", "echo stolen"], policy="IfNotPresent")
    spec["metadata"]["namespace"] = "team-b"
    c.gpuctl("create", "namespace", "team-b")  # `gpucloud server` makes none on first use
    c.apply(spec)

    def steal_tasks():
        out = c.gpuctl("get", "jobs", "steal", "-n", "team-b", "-o", "json", check=False)
        try:
            return " | ".join(json.loads(out).get("status", {}).get("tasks", {}).values())
        except ValueError:
            return ""
    msg = wait(lambda: "ImagePullBackOff" in steal_tasks() and steal_tasks(), 60,
               "another namespace's task to be refused the cached image")
    res.check("11 another namespace's task may not use an image pulled with a job's secret",
              "unauthorized" in msg.lower() or "authentication required" in msg.lower(),
              msg[:200])
    c.gpuctl("delete", "job", "steal", "-n", "team-b")


def check_prepull(c, res, reg):
    ref = f"{reg.addr}/gpucloud/prepulled:1"
    out = c.gpuctl("images", "pull", "--pool", "gpu", ref)
    there = wait(lambda: c.podman("image", "exists", ref).returncode == 0, 60,
                 "the pre-pulled image on the node")
    res.check("10 gpuctl images pull --pool puts the image on the pool's nodes, no job needed",
              there and "node-a" in out, out.strip())


def check_image_gc(c, res, busybox, trainer):
    """A store over its limit loses the least recently used images no task needs."""
    c.kill_agent()
    c.start_agent(["--image-store-max-gib", "0.00001"])  # 10 KiB: every unused image goes
    c.apply(job("gc", trainer, ["sh", "-c", "sleep 3"]))
    c.wait_phase("gc", ("Running", "Succeeded"), 60)
    gone = wait(lambda: c.podman("image", "exists", busybox).returncode != 0, 30,
                "the unused busybox image to be collected")
    kept = c.podman("image", "exists", trainer).returncode == 0
    res.check("9 over its limit the store loses unused images, not a running task's",
              gone and kept, "busybox removed, the running trainer's image kept")
    c.gpuctl("delete", "job", "gc")


@contextlib.contextmanager
def work_dir():
    """A temporary directory, removed at the end even when a Podman process that outlived the
    test (a container's cleanup) is still writing its store: unmount what is mounted below it
    and try again, a few times."""
    work = tempfile.mkdtemp(prefix="gpucloud-containers-")
    try:
        yield work
    finally:
        for attempt in range(20):
            oci.unmount_under(work)
            try:
                shutil.rmtree(work)
                break
            except OSError as e:
                if attempt == 19:
                    log(f"could not remove {work}: {e}")
                time.sleep(0.5)  # a retry's back-off, not a synchronisation


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = (os.path.abspath(a) for a in sys.argv[1:])
    if os.geteuid() != 0:
        print("skipped: needs root (Podman's store, tasks as other users)")
        return SKIP
    if oci.missing():
        print(f"skipped: missing {', '.join(oci.missing())}")
        return SKIP
    res = Results()
    with work_dir() as work:
        os.chmod(work, 0o711)
        with oci.Registry(os.path.join(work, "registry")) as reg, \
                oci.Registry(os.path.join(work, "corrupt")) as creg, \
                oci.Registry(os.path.join(work, "auth"), auth=True) as areg, \
                oci.Podman(os.path.join(work, "builder")) as builder:
            t = time.time()
            oci.build_images(builder)
            busybox = f"{reg.addr}/gpucloud/busybox:1"
            trainer = f"{reg.addr}/gpucloud/trainer:1"
            oci.push_image(builder, oci.BUSYBOX, reg, "gpucloud/busybox:1")
            oci.push_image(builder, oci.TRAINER, reg, "gpucloud/trainer:1")
            oci.push_image(builder, oci.BUSYBOX, reg, "gpucloud/prepulled:1")
            push_corrupted(builder, creg, work)
            oci.push_image(builder, oci.BUSYBOX, areg, "gpucloud/busybox:1",
                           authfile=areg.auth_file(areg.username, areg.password))
            log(f"images built and pushed in {time.time() - t:.1f} s")
            certs = os.path.join(work, "certs")  # the node trusts the three registries' CAs
            os.makedirs(certs)
            for name, r in (("main", reg), ("corrupt", creg), ("auth", areg)):
                shutil.copy(r.ca_path, os.path.join(certs, f"{name}.crt"))
            c = Cluster(build, work, reg, certs)
            try:
                c.start()
                for check in (lambda: check_isolation(c, res, busybox),
                              lambda: check_cache(c, res, busybox),
                              lambda: check_volcano(c, res, busybox),
                              lambda: check_trainer(c, res, trainer),
                              lambda: check_readoption(c, res, busybox),
                              lambda: check_attach(c, res, busybox),
                              lambda: check_pull_failures(c, res),
                              lambda: check_refusals(c, res, busybox),
                              lambda: check_secrets(c, res, areg, busybox),
                              lambda: check_registry_refusals(c, res, creg, areg),
                              lambda: check_prepull(c, res, reg),
                              lambda: check_image_gc(c, res, busybox, trainer)):
                    try:
                        check()
                    except AssertionError as e:
                        res.check(getattr(check, "__name__", "check"), False, str(e)[:300])
            finally:
                c.stop()
                c.podman("rm", "-af", "-t", "0")
                oci.unmount_under(os.path.join(work, "images"))
                if any(r[1] == "FAIL" for r in res.rows) or os.environ.get("CONTAINERS_LOGS"):
                    for name in ("server", "agent"):
                        p = os.path.join(work, f"{name}.log")
                        if os.path.exists(p):
                            print(f"--- {name}.log (tail) ---")
                            print("".join(open(p, errors="replace").readlines()[-40:]))
    return 0 if res.table() else 1


if __name__ == "__main__":
    sys.exit(main())
