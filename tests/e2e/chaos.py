#!/usr/bin/env python3
"""The chaos suite (CTest label `e2e`): a multi-host gpucloud cluster on one machine, faults
injected into it, and proof that every acknowledged job completes exactly once with the right
result.

The server runs in one network namespace and three agents (2 simulated H100s each) in three
others, joined by a bridge, each with its own address; `gpuctl` runs in the root namespace. The
jobs run the example trainer (two ranks of 2 GPUs each, so a gang spans two machines); a
failure-free run of the same trainer gives the expected final losses. The trainer holds a lock
per rank in its checkpoint directory, so a second attempt that overlapped the first would exit
with code 75 instead of training alongside it.

Scenarios: a node dies (kill -9 of everything in its namespace) mid-training; a node's link is
cut and healed; a drain-class Xid is injected into a GPU a job uses; a spot reclamation notice;
the server is killed with SIGKILL in the middle of a burst of submissions and started again;
then randomized faults for a bounded time (CHAOS_SECONDS, default 45). For each fault it measures the time from the fault to
the job running again (its last "Started" event) and prints p50 and p99.

Needs root and `ip netns`; says why and exits 77 (skipped) otherwise.
Usage: chaos.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SKIP = 77
STEPS = 1500
CKPT_EVERY = 50


def skip(why):
    print(f"chaos: skipped: {why}")
    sys.exit(SKIP)


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def require(tools):
    """Skips (exit 77) unless this is root, `tools` are installed and `ip netns` works."""
    if os.geteuid() != 0:
        skip("needs root for network namespaces")
    for tool in tools:
        if shutil.which(tool) is None:
            skip(f"no `{tool}` (scripts/install-deps)")
    probe = f"gcprobe{os.getpid()}"
    if sh("ip", "netns", "add", probe, check=False).returncode != 0:
        skip("`ip netns add` does not work here")
    sh("ip", "netns", "del", probe, check=False)


def tear_down(c, net, work, ok, keep=False):
    """After a run: every log when it failed; every process and namespace stopped; `work`
    removed (unless `keep`)."""
    if not ok:
        for name in sorted(os.listdir(work)):
            if name.endswith(".log"):
                print(f"--- {name}\n{c.log(name[:-4])[-3000:]}")
    for p in c.procs.values():
        p.kill()
    net.close()
    if keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def free_subnet():
    """A 10.X.0 /24 whose 10.X/16 no address of this host is in (Podman's CNI bridge takes
    10.88.0.1/16: a test subnet inside it is routed there, and the agents never reach the
    server), starting from one that depends on the pid, so concurrent runs differ."""
    used = set()
    for line in sh("ip", "-4", "-o", "addr").stdout.splitlines():
        for word in line.split():
            if word.startswith("10.") and "/" in word:
                used.add(word.split(".")[1])
    for i in range(100):
        second = str(77 + (os.getpid() + i) % 100)
        if second not in used:
            return f"10.{second}.0"
    raise RuntimeError("no free 10.X.0.0/16 for the test network")


class Net:
    """A bridge in the root namespace and one namespace per host, each on a veth pair."""

    def __init__(self, hosts):
        tag = f"{os.getpid() % 100000}"
        self.subnet = free_subnet()
        self.bridge = f"gcbr{tag}"
        self.ns, self.addr, self.veth = {}, {}, {}
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, h in enumerate(hosts):
            ns, outside = f"gc{tag}{h}", f"gc{tag}{h}o"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", outside, "master", self.bridge)
            sh("ip", "link", "set", outside, "up")
            addr = f"{self.subnet}.{i + 1}"
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self.ns[h], self.addr[h], self.veth[h] = ns, addr, outside

    def kill_all(self, host):
        pids = sh("ip", "netns", "pids", self.ns[host], check=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def cut(self, host):
        sh("ip", "link", "set", self.veth[host], "down")

    def heal(self, host):
        sh("ip", "link", "set", self.veth[host], "up")

    def close(self):
        for h in self.ns:
            self.kill_all(h)
        time.sleep(0.2)
        for h, ns in self.ns.items():
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", self.bridge, check=False)


class Cluster:
    def __init__(self, build, source, net, work):
        self.build, self.source, self.net, self.work = build, source, net, work
        self.data = os.path.join(work, "server")
        self.recording = os.path.join(work, "scheduler.jsonl")  # --record-scheduler
        self.url = f"https://{net.addr['s']}:8443"
        self.env = dict(os.environ, GPUCLOUD_CONFIG=os.path.join(self.data, "admin.config"))
        self.procs = {}

    def spawn(self, host, name, args):
        log = open(os.path.join(self.work, f"{name}.log"), "a")
        p = subprocess.Popen(["ip", "netns", "exec", self.net.ns[host]] + args, stdout=log,
                             stderr=subprocess.STDOUT, cwd=self.source)
        self.procs[name] = p
        return p

    def log(self, name):
        with open(os.path.join(self.work, f"{name}.log")) as f:
            return f.read()

    def start_server(self):
        starts = self.log("server").count("serving") if os.path.exists(os.path.join(self.work, "server.log")) else 0
        self.spawn("s", "server", [f"{self.build}/apps/gpucloud", "server", "--data-dir", self.data,
                                   "--listen", f"{self.net.addr['s']}:8443", "--grace", "5",
                                   "--record-scheduler", self.recording])
        wait(lambda: self.log("server").count("serving") > starts, 20, "the server to listen")

    def kill_server(self):
        self.net.kill_all("s")

    def start_agent(self, host):
        self.spawn(host, f"agent-{host}", [
            f"{self.build}/apps/gpucloud", "agent", "run", "--server", self.url, "--ca",
            os.path.join(self.data, "ca.crt"), "--token-file", os.path.join(self.data, "bootstrap.token"),
            "--simulate", "2xH100", "--node-name", f"node-{host}", "--address", self.net.addr[host],
            "--state-dir", os.path.join(self.work, f"agent-{host}"),
            "--allow-host-processes", "--workdir", self.source,
            "--metrics-listen", f"{self.net.addr[host]}:9400", "--allow-fault-injection"])

    def gpuctl(self, *args, check=True):
        r = subprocess.run([f"{self.build}/apps/gpuctl"] + list(args), capture_output=True,
                           text=True, env=self.env, cwd=self.source)
        if check and r.returncode != 0:
            raise RuntimeError(f"gpuctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def job(self, name):
        r = self.gpuctl("get", "jobs", name, "-o", "json", check=False)
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            return {}

    def ready_nodes(self):
        out = self.gpuctl("get", "nodes", check=False).stdout
        return sum(1 for line in out.splitlines()[1:] if " Ready" in line)

    def submit(self, name, steps=STEPS):
        yaml = f"""apiVersion: gpucloud/v1
kind: Job
metadata: {{name: {name}}}
spec:
  tasks:
  - name: worker
    replicas: 2
    command: [python3, examples/trainer/train.py, --steps, "{steps}", --checkpoint-every, "{CKPT_EVERY}"]
    resources: {{gpu: 2}}
  restartPolicy: {{maxRestarts: 5, backoff: 1s}}
"""
        r = subprocess.run([f"{self.build}/apps/gpuctl", "apply", "-f", "-"], input=yaml,
                           capture_output=True, text=True, env=self.env)
        return r.returncode == 0

    def api(self, path):
        """GET on the API with gpuctl's config (for what gpuctl does not print, e.g. timestampMs)."""
        import ssl
        cfg = {}
        with open(self.env["GPUCLOUD_CONFIG"]) as f:
            for line in f:
                k, _, v = line.partition(": ")
                cfg[k.strip()] = v.strip()
        ctx = ssl.create_default_context(cafile=cfg["certificate-authority"])
        req = urllib.request.Request(cfg["server"] + path, headers={"Authorization": f"Bearer {cfg['token']}"})
        return json.load(urllib.request.urlopen(req, context=ctx, timeout=10))


def wait(ok, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if ok():
                return
        except Exception:  # the server may be down for a moment
            pass
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {seconds} s waiting for {what}")


def expected_losses(source, work, steps):
    """A failure-free run of both ranks, outside gpucloud."""
    out = {}
    for rank in (0, 1):
        ckpt = tempfile.mkdtemp(dir=work)
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", GPUCLOUD_CHECKPOINT_DIR=ckpt)
        r = subprocess.run(["python3", "examples/trainer/train.py", "--steps", str(steps),
                            "--checkpoint-every", str(CKPT_EVERY)], cwd=source, env=env,
                           capture_output=True, text=True, check=True)
        out[rank] = r.stdout.strip().splitlines()[-1].split("final loss ")[1].split()[0]
    return out


def final_losses(c, name):
    out = {}
    for rank in (0, 1):
        text = c.gpuctl("logs", name, "--rank", str(rank)).stdout
        lines = [l for l in text.splitlines() if "final loss" in l]
        out[rank] = lines[-1].split("final loss ")[1].split()[0] if lines else None
    return out


def started_after(c, name, t_fault):
    """Seconds from the fault to the job's last start (its last Started event)."""
    items = c.api(f"/apis/gpucloud/v1/namespaces/default/jobs/{name}/events")["items"]
    starts = [e["timestampMs"] for e in items if e["reason"] == "Started"]
    return max(starts) / 1000.0 - t_fault


def run_job_through(c, name, fault, expected, recoveries):
    """Submits a job, waits until it has checkpointed, injects `fault`, and checks the result."""
    assert c.submit(name), f"submit {name}"
    wait(lambda: c.job(name).get("status", {}).get("phase") == "Running", 30, f"{name} to run")
    ckpt = c.job(name)["status"]["checkpointDir"]
    wait(lambda: any(f.startswith("rank0-") for f in os.listdir(ckpt)), 30, f"{name}'s first checkpoint")
    placement = c.job(name)["status"]["placement"]
    victim = placement[0]["node"].replace("node-", "")
    t_fault = time.time()
    description = fault(victim, placement)
    wait(lambda: c.job(name).get("status", {}).get("phase") == "Succeeded", 120,
         f"{name} to succeed after: {description}")
    got = final_losses(c, name)
    status = c.job(name)["status"]
    assert got == expected, f"{name}: final losses {got}, expected {expected} ({description})"
    assert status["attempt"] >= 2, f"{name}: the fault ({description}) did not restart it"
    recovery = started_after(c, name, t_fault)
    recoveries.append(recovery)
    print(f"chaos: {description}: recovered in {recovery:.2f} s; attempts {status['attempt']}, "
          f"restarts {status['restarts']}, interruptions {status['interruptions']}", flush=True)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    require(["ip"])

    work = tempfile.mkdtemp(prefix="gpucloud-chaos-")
    os.chmod(work, 0o711)  # tasks run as unprivileged users and pass through to their dirs
    net = Net(["s", "a", "b", "c"])
    c = Cluster(build, source, net, work)
    ok = False
    try:
        c.start_server()
        for h in "abc":
            c.start_agent(h)
        wait(lambda: c.ready_nodes() == 3, 30, "three Ready nodes")
        expected = expected_losses(source, work, STEPS)
        recoveries = []

        def node_death(victim, placement):
            net.kill_all(victim)  # the machine dies: agent and tasks
            threading.Timer(8, lambda: c.start_agent(victim)).start()  # and comes back, empty
            return f"node-{victim} died (kill -9 of everything on it)"

        def partition(victim, placement):
            net.cut(victim)
            threading.Timer(6, lambda: net.heal(victim)).start()
            return f"node-{victim}'s link cut for 6 s"

        def xid(victim, placement):
            gpu = placement[0]["gpus"][0]["index"]
            url = f"http://{net.addr[victim]}:9400/inject?gpu={gpu}&xid=79"
            subprocess.run(["ip", "netns", "exec", net.ns["s"], "python3", "-c",
                            f"import urllib.request; urllib.request.urlopen(urllib.request.Request('{url}', method='POST'))"],
                           check=True)
            threading.Timer(10, lambda: c.gpuctl("uncordon", f"node-{victim}", check=False)).start()
            return f"Xid 79 on GPU {gpu} of node-{victim}"

        def spot_notice(victim, placement):
            c.gpuctl("reclaim", f"node-{victim}", "--in", "30")
            threading.Timer(8, lambda: c.gpuctl("uncordon", f"node-{victim}", check=False)).start()
            return f"spot notice for node-{victim} (reclaimed in 30 s)"

        run_job_through(c, "death", node_death, expected, recoveries)
        wait(lambda: c.ready_nodes() == 3, 30, "the dead node to come back")
        run_job_through(c, "cut", partition, expected, recoveries)
        wait(lambda: c.ready_nodes() == 3, 30, "the cut node to come back")
        run_job_through(c, "xid", xid, expected, recoveries)
        wait(lambda: c.ready_nodes() == 3, 30, "three Ready nodes")
        run_job_through(c, "spot", spot_notice, expected, recoveries)
        time.sleep(1)

        # The server dies in the middle of a burst of submissions, with a job running.
        assert c.submit("steady", steps=STEPS)
        wait(lambda: c.job("steady").get("status", {}).get("phase") == "Running", 30, "steady to run")
        acked = []
        for i in range(12):
            if i == 6:
                c.kill_server()
                t_down = time.time()
                c.start_server()
                print(f"chaos: server killed and restarted in {time.time() - t_down:.2f} s", flush=True)
            if c.submit(f"burst-{i}", steps=100):
                acked.append(f"burst-{i}")
        for name in acked + ["steady"]:
            wait(lambda: c.job(name).get("status", {}).get("phase") == "Succeeded", 120, f"{name} to succeed")
        steady = c.job("steady")["status"]
        assert steady["attempt"] == 1, f"steady was restarted by the server crash: {steady}"
        assert final_losses(c, "steady") == expected, "steady's result"
        jobs = json.loads(c.gpuctl("get", "jobs", "-o", "json").stdout)["items"]
        names = [j["metadata"]["name"] for j in jobs]
        assert len(names) == len(set(names))
        for name in acked:
            assert name in names, f"acknowledged {name} is missing after the crash"
        print(f"chaos: server crash: {len(acked)} acknowledged submissions all completed; the running "
              f"job kept its attempt", flush=True)

        # Randomized faults for a bounded time.
        rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))
        deadline = time.time() + float(os.environ.get("CHAOS_SECONDS", "45"))
        n = 0
        while time.time() < deadline:
            wait(lambda: c.ready_nodes() == 3, 40, "three Ready nodes")
            fault = rng.choice([node_death, partition, xid, spot_notice])
            n += 1
            run_job_through(c, f"random-{n}", fault, expected, recoveries)
        recoveries.sort()
        p50 = statistics.median(recoveries)
        p99 = recoveries[min(len(recoveries) - 1, int(0.99 * len(recoveries)))]
        print(f"chaos: {len(recoveries)} faults; time from the fault to the job running again: "
              f"p50 {p50:.2f} s, p99 {p99:.2f} s (target < 10 s)", flush=True)
        # Through all of that (and the server's crash) the scheduler recorded what it was given
        # and decided: the simulator, fed the recording, decides the same in the same order.
        c.kill_server()
        replay = subprocess.run([f"{build}/apps/gpucloud", "sim", "--trace", c.recording],
                                capture_output=True, text=True)
        print("chaos: " + replay.stdout.strip().replace("\n", "\nchaos: "), flush=True)
        assert replay.returncode == 0, f"the replay differs from the server:\n{replay.stdout}{replay.stderr}"
        ok = True
    finally:
        tear_down(c, net, work, ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
