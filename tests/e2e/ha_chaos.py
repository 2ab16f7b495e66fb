#!/usr/bin/env python3
"""The HA chaos suite (issue 21; CTest label `e2e`): a highly available gpucloud on one machine,
faults injected into its control plane, and proof that every acknowledged job completes exactly
once with the failure-free run's result.

Three control-plane hosts (c1, c2, c3), each a network namespace with an etcd member and a
gpucloud server (each server lists its own member first), and two agent hosts (a, b: 8 simulated
H100s each), on one bridge (tests/e2e/chaos.py's Net). `gpuctl` runs in the root namespace with a
config that lists the three servers. The jobs run the example trainer (two ranks of 2 GPUs, so a
gang spans both agents, and the one-GPU jobs of a burst fit beside it); the trainer holds a lock per rank in its checkpoint directory, so a
second attempt that overlapped the first would exit 75 instead of training beside it.

Scenarios, each with a trainer job running through it:
1. kill -9 of the leading server in the middle of a burst of submissions, then started again;
2. the leader's host cut off the network (its server and its etcd member: the member loses
   quorum), then healed: the old leader must step down before another is elected (its log's
   "no longer the leader" earlier than the new one's "elected leader"), and comes back a standby;
3. one etcd member killed (on a host that does not lead) and started again;
4. everything restarted in turn: each etcd member, then each server, one at a time.
Each asserts: every acknowledged job succeeds in its first attempt (the agents were never cut, so
no restart is needed) with the failure-free final losses; no job is lost or doubled. It prints
the time from each failure to a new leader elected and to the first job submitted after the
failure running.

Needs root, `ip netns` and etcd; says why and exits 77 (skipped) otherwise.
Usage: ha_chaos.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

from chaos import Cluster, Net, expected_losses, final_losses, require, tear_down, wait

STEPS = 4000
LEASE = 3
CP = ("c1", "c2", "c3")


class HaCluster(Cluster):
    """chaos.py's cluster (spawn, gpuctl, job, ready_nodes) with three servers on etcd."""

    def __init__(self, build, source, net, work):
        self.build, self.source, self.net, self.work = build, source, net, work
        self.procs = {}
        self.peers = ",".join(f"{h}=http://{net.addr[h]}:2380" for h in CP)
        self.urls = [f"https://{net.addr[h]}:8443" for h in CP]
        self.config = os.path.join(work, "gpuctl.config")
        self.env = dict(os.environ, GPUCLOUD_CONFIG=self.config)

    def log(self, name):
        """A process's output so far; "" before it has any (a server not started yet)."""
        path = os.path.join(self.work, f"{name}.log")
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read()

    def start_etcd(self, h):
        ip = self.net.addr[h]
        self.spawn(h, f"etcd-{h}", [
            "etcd", "--name", h, "--data-dir", os.path.join(self.work, f"etcd-{h}"),
            "--listen-client-urls", f"http://{ip}:2379", "--advertise-client-urls", f"http://{ip}:2379",
            "--listen-peer-urls", f"http://{ip}:2380", "--initial-advertise-peer-urls", f"http://{ip}:2380",
            "--initial-cluster", self.peers, "--initial-cluster-state", "new",
            "--initial-cluster-token", "gpucloud-ha-chaos", "--max-txn-ops", "4096",
            # A member cut off campaigns alone; back, it would depose the raft leader (a second
            # election, writes stalled) unless it must first win a pre-vote (etcd 3.5's default).
            "--pre-vote"])

    def etcd_healthy(self, h):
        r = subprocess.run(["etcdctl", "--endpoints", f"{self.net.addr[h]}:2379", "endpoint", "health"],
                           capture_output=True, text=True, env=dict(os.environ, ETCDCTL_API="3"))
        return r.returncode == 0

    def start_server(self, h, init=False, join=False):
        i = CP.index(h)
        # Its own member first: cut off, it talks to a member without quorum, not to the others.
        members = [self.net.addr[h]] + [self.net.addr[o] for o in CP if o != h]
        starts = self.log(f"server-{h}").count("serving https")
        self.spawn(h, f"server-{h}", [
            f"{self.build}/apps/gpucloud", "server", "--data-dir", os.path.join(self.work, f"server-{i + 1}"),
            "--store", "etcd://" + ",".join(f"{m}:2379" for m in members),
            "--listen", f"{self.net.addr[h]}:8443", "--leader-lease", str(LEASE),
            "--log-dir", os.path.join(self.work, "logs"), "--grace", "5"] + (["--init"] if init else [])
            + (["--join-key-file", os.path.join(self.work, "server-1", "keys", "join.key")] if join else []))
        wait(lambda: self.log(f"server-{h}").count("serving https") > starts, 30, f"server on {h}")

    def stop(self, name, sig="TERM"):
        p = self.procs.pop(name)
        p.send_signal(getattr(signal, f"SIG{sig}"))
        p.wait(timeout=30)

    def start_agent(self, h):
        first = os.path.join(self.work, "server-1")
        self.spawn(h, f"agent-{h}", [
            f"{self.build}/apps/gpucloud", "agent", "run", "--server", ",".join(self.urls),
            "--ca", os.path.join(first, "ca.crt"), "--token-file", os.path.join(first, "bootstrap.token"),
            "--simulate", "8xH100", "--node-name", f"node-{h}", "--address", self.net.addr[h],
            "--state-dir", os.path.join(self.work, f"agent-{h}"), "--allow-host-processes",
            "--workdir", self.source])

    def leader(self):
        """The control-plane host whose server holds the election key, or None."""
        r = subprocess.run(["etcdctl", "--endpoints", ",".join(f"{self.net.addr[h]}:2379" for h in CP),
                            "get", "/gpucloud/data/meta/leader", "--print-value-only"],
                           capture_output=True, text=True, env=dict(os.environ, ETCDCTL_API="3"))
        for h in CP:
            if f"//{self.net.addr[h]}:8443" in r.stdout:
                return h
        return None

    def phase(self, name):
        return self.job(name).get("status", {}).get("phase")

    def submit(self, name, steps=STEPS, small=False):
        """The trainer's two ranks of 2 GPUs each; `small`: one rank on 1 GPU (a probe)."""
        replicas, gpus = (1, 1) if small else (2, 2)
        yaml = f"""apiVersion: gpucloud/v1
kind: Job
metadata: {{name: {name}}}
spec:
  tasks:
  - name: worker
    replicas: {replicas}
    command: [python3, examples/trainer/train.py, --steps, "{steps}", --checkpoint-every, "50"]
    resources: {{gpu: {gpus}}}
  restartPolicy: {{maxRestarts: 5, backoff: 1s}}
"""
        r = subprocess.run([f"{self.build}/apps/gpuctl", "apply", "-f", "-"], input=yaml,
                           capture_output=True, text=True, env=self.env)
        return r.returncode == 0


def log_time(text, pattern):
    """The time (epoch seconds) on the last line of a server's log matching `pattern`, or None."""
    found = None
    for line in text.splitlines():
        if re.search(pattern, line):
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
            if m:
                found = datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
    return found


def succeeded_once(c, name, expected, what):
    wait(lambda: c.phase(name) in ("Succeeded", "Failed"), 180, f"{name} to end ({what})")
    status = c.job(name)["status"]
    assert status["phase"] == "Succeeded", f"{name} ({what}): {status}"
    assert status["attempt"] == 1, f"{name} ran more than once ({what}): {status}"
    got = final_losses(c, name)
    assert got == expected, f"{name} ({what}): final losses {got}, expected {expected}"


def running_with_checkpoint(c, name):
    wait(lambda: c.phase(name) == "Running", 60, f"{name} to run")
    ckpt = c.job(name)["status"]["checkpointDir"]
    wait(lambda: any(f.startswith("rank0-") for f in os.listdir(ckpt)), 60, f"{name}'s checkpoint")


def probe_after(c, name, t_fault):
    """Submits a one-GPU job right after a failure (GPUs are free for it); returns seconds from
    the failure to it running."""
    wait(lambda: c.submit(name, steps=200, small=True), 60, f"{name} to be acknowledged")
    wait(lambda: c.phase(name) in ("Running", "Succeeded"), 90, f"{name} to run")
    return time.time() - t_fault


def scenario_kill_leader(c, expected, report):
    assert c.submit("steady-kill")
    running_with_checkpoint(c, "steady-kill")
    victim = c.leader()
    acked = []
    for i in range(10):
        if i == 4:
            c.stop(f"server-{victim}", "KILL")
            t_fault = time.time()
        if c.submit(f"burst-{i}", steps=200, small=True):
            acked.append(f"burst-{i}")
    wait(lambda: c.leader() not in (None, victim), 30, "another server to lead")
    report.append(("leader killed (kill -9) mid-burst", time.time() - t_fault,
                   probe_after(c, "probe-kill", t_fault)))
    c.start_server(victim)
    for name in acked:
        wait(lambda: c.phase(name) == "Succeeded", 120, f"{name} to succeed")
        assert c.job(name)["status"]["attempt"] == 1, name
    names = [j["metadata"]["name"] for j in json.loads(c.gpuctl("get", "jobs", "-o", "json").stdout)["items"]]
    assert len(names) == len(set(names)), names
    assert len(acked) >= 6, f"only {acked} acknowledged of 10 (3 servers, one killed)"
    succeeded_once(c, "steady-kill", expected, "leader killed")
    print(f"ha-chaos: kill -9 of the leader mid-burst: {len(acked)} of 10 acknowledged, all succeeded "
          f"once; the running job kept its attempt", flush=True)


def scenario_partition(c, expected, report):
    assert c.submit("steady-cut")
    running_with_checkpoint(c, "steady-cut")
    victim = c.leader()
    others = [h for h in CP if h != victim]
    c.net.cut(victim)
    t_fault = time.time()
    wait(lambda: c.leader() in others, 30, "a server on the other side to lead")
    new = c.leader()
    elected_in = time.time() - t_fault
    ran_in = probe_after(c, "probe-cut", t_fault)
    wait(lambda: "no longer the leader" in c.log(f"server-{victim}"), 30, f"{victim} to step down")
    stepped = log_time(c.log(f"server-{victim}"), "no longer the leader")
    elected = log_time(c.log(f"server-{new}"), "elected leader")
    assert stepped is not None and elected is not None and stepped < elected, (
        f"the cut leader stepped down at {stepped}, after {new} was elected at {elected}")
    print(f"ha-chaos: the cut leader ({victim}) stepped down {elected - stepped:.2f} s before "
          f"{new} was elected", flush=True)
    c.net.heal(victim)
    wait(lambda: c.etcd_healthy(victim), 30, f"{victim}'s etcd member to rejoin")
    report.append(("leader's host cut off", elected_in, ran_in))
    succeeded_once(c, "steady-cut", expected, "leader's host cut off")
    assert c.leader() == new, "the healed server took the lead back"
    print(f"ha-chaos: partition healed; {victim} serves as a standby", flush=True)


def scenario_member_down(c, expected, report):
    assert c.submit("steady-member")
    running_with_checkpoint(c, "steady-member")
    victim = next(h for h in CP if h != c.leader())
    c.stop(f"etcd-{victim}", "KILL")
    t_fault = time.time()
    report.append(("one etcd member killed", 0.0, probe_after(c, "probe-member", t_fault)))
    c.start_etcd(victim)
    wait(lambda: c.etcd_healthy(victim), 30, f"{victim}'s member to come back")
    succeeded_once(c, "steady-member", expected, "etcd member killed")


def scenario_rolling_restart(c, expected, report):
    assert c.submit("steady-rolling")
    running_with_checkpoint(c, "steady-rolling")
    for h in CP:
        c.stop(f"etcd-{h}")
        c.start_etcd(h)
        wait(lambda: c.etcd_healthy(h), 30, f"{h}'s member after its restart")
    for h in CP:
        was_leader = c.leader() == h
        c.stop(f"server-{h}")
        t_fault = time.time()
        c.start_server(h)
        if was_leader:
            wait(lambda: c.leader() is not None, 30, "a leader after the leader's restart")
            report.append(("leader restarted (SIGTERM)", time.time() - t_fault,
                           probe_after(c, "probe-rolling", t_fault)))
    succeeded_once(c, "steady-rolling", expected, "everything restarted in turn")
    print("ha-chaos: every etcd member and every server restarted in turn; the job ran once",
          flush=True)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    require(["ip", "etcd", "etcdctl"])

    work = tempfile.mkdtemp(prefix="gpucloud-ha-chaos-")
    os.chmod(work, 0o711)  # tasks run as unprivileged users and pass through to their dirs
    net = Net(list(CP) + ["a", "b"])
    c = HaCluster(build, source, net, work)
    ok = False
    try:
        for h in CP:
            c.start_etcd(h)
        for h in CP:
            wait(lambda: c.etcd_healthy(h), 30, f"etcd member on {h}")
        os.makedirs(os.path.join(work, "logs"))
        c.start_server("c1", init=True)
        for i in (2, 3):  # joined with the first's join key, as on three machines
            c.start_server(CP[i - 1], join=True)
        with open(os.path.join(work, "server-1", "admin.config")) as f:
            config = re.sub(r"(?m)^server: .*$", "server: " + ", ".join(c.urls), f.read())
        with open(c.config, "w") as f:
            f.write(config)
        for h in "ab":
            c.start_agent(h)
        wait(lambda: c.ready_nodes() == 2, 40, "two Ready nodes")
        expected = expected_losses(source, work, STEPS)
        report = []
        scenario_kill_leader(c, expected, report)
        scenario_partition(c, expected, report)
        scenario_member_down(c, expected, report)
        scenario_rolling_restart(c, expected, report)
        audit = c.gpuctl("audit", "verify").stdout.strip()
        print(f"ha-chaos: {audit}", flush=True)
        for what, elected, ran in report:
            print(f"ha-chaos: {what}: new leader {elected:.2f} s, a job submitted then running "
                  f"{ran:.2f} s after the failure", flush=True)
        ok = True
    finally:
        tear_down(c, net, work, ok, keep=bool(os.environ.get("HA_CHAOS_KEEP")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
