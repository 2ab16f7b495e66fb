#!/usr/bin/env python3
"""The Python client (python/gpucloud, docs/python.md) against a real `gpucloud up` with
simulated GPUs (issue 16): installed with pip, configured from admin.config, a job submitted
from a dict and from YAML, waited for on the watch stream, its logs read and followed, listed
by label, a long job cancelled, jobs deleted, and the server's errors as exceptions with its
status and message.

Usage: python_client_test.py GPUCLOUD_BINARY SOURCE_DIR [unittest args]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

GPUCLOUD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "python"))

import gpucloud  # noqa: E402
import gpucloud.client  # noqa: E402
from upcluster import UpCluster  # noqa: E402

up = None
# Files a test creates to let a job go on: tasks run as an unprivileged user when the test runs
# as root, so this directory is readable by all (and holds nothing else).
GATES = None


def setUpModule():
    global up, GATES
    GATES = tempfile.mkdtemp(prefix="gpucloud-gates-")
    unittest.addModuleCleanup(shutil.rmtree, GATES, ignore_errors=True)
    os.chmod(GATES, 0o755)
    up = UpCluster(GPUCLOUD, SOURCE, node="pyclient")
    unittest.addModuleCleanup(up.stop)  # runs even when start() fails
    up.start()


def job(name, script, labels=None, gpus=1):
    return {"apiVersion": "gpucloud/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"restartPolicy": {"maxRestarts": 0},
                     "tasks": [{"name": "main", "replicas": 1, "command": ["sh", "-c", script],
                                "resources": {"gpu": gpus}}]}}


class CountingClient(gpucloud.Client):
    """Counts the requests wait() makes (one GET, then watches, never a poll), and calls
    on_watch when a watch starts."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gets = self.watches = 0
        self.on_watch = lambda: None

    def get(self, name, namespace=None):
        self.gets += 1
        return super().get(name, namespace)

    def watch(self, *args, **kwargs):
        self.watches += 1
        self.on_watch()
        return super().watch(*args, **kwargs)


class PythonClientTest(unittest.TestCase):
    def setUp(self):
        self.c = gpucloud.Client.from_config(up.config)

    def test_submit_wait_logs_delete(self):
        name = self.c.submit(job("hello", "echo hello; echo 'second line'; echo ünïcode"))
        self.assertEqual(name, "hello")
        done = self.c.wait(name, timeout=60)
        self.assertEqual(done["status"]["phase"], "Succeeded", done["status"])
        self.assertEqual(list(self.c.logs(name)), ["hello", "second line", "ünïcode"])
        self.assertEqual(self.c.get(name)["status"]["phase"], "Succeeded")
        self.assertIn("Scheduled", [e.get("reason") for e in self.c.events(name)])
        self.c.delete(name, wait=True, timeout=30)
        with self.assertRaises(gpucloud.NotFound) as e:
            self.c.get(name)
        self.assertEqual(e.exception.status, 404)
        self.assertIn("not found", e.exception.message)
        with self.assertRaises(gpucloud.NotFound):
            self.c.delete(name)

    def test_wait_follows_the_watch_not_polling(self):
        c = CountingClient(up.url, up.token, up.ca)
        # The job ends only once this test lets it: wait() must see that change on its watch.
        gate = os.path.join(GATES, "wait")
        name = c.submit(job("waited", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done"))
        c.wait(name, timeout=60, phases=("Running",))
        c.gets = c.watches = 0
        # Once wait() read the job (still Running) and watches from there, the job may end.
        c.on_watch = lambda: open(gate, "w").close()
        done = c.wait(name, timeout=60)
        self.assertEqual(done["status"]["phase"], "Succeeded")
        self.assertEqual((c.gets, c.watches), (1, 1))

    def test_watch_without_a_revision_starts_with_the_current_jobs(self):
        self.c.submit(job("watched", "true", labels={"watch": "me"}))
        self.c.wait("watched", timeout=60)
        events = list(self.c.watch(selector="watch=me", timeout=1))
        self.assertEqual([(t, j["metadata"]["name"], j["status"]["phase"]) for t, j in events],
                         [("ADDED", "watched", "Succeeded")])

    def test_follow_logs_streams_until_the_job_ends(self):
        gate = os.path.join(GATES, "logs")
        name = self.c.submit(job("follow", f"echo one; while [ ! -e {gate} ]; do sleep 0.05; "
                                           "done; echo two"))
        lines = []
        for line in self.c.logs(name, follow=True):
            lines.append(line)
            if line == "one":  # the first line came while the job still runs
                self.assertNotIn(self.c.get(name)["status"]["phase"], gpucloud.TERMINAL_PHASES)
                open(gate, "w").close()
        self.assertEqual(lines, ["one", "two"])
        self.assertEqual(self.c.wait(name, timeout=30)["status"]["phase"], "Succeeded")

    def test_yaml_and_list_by_selector(self):
        text = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-yaml\n  labels:\n"
                "    team: vision\n    tier: batch\nspec:\n  restartPolicy: Never\n"
                "  containers:\n  - name: main\n    command: [sh, -c, 'echo from yaml']\n"
                "    resources:\n      limits:\n        nvidia.com/gpu: 1\n")
        self.assertEqual(self.c.submit(text), "from-yaml")
        self.c.submit(job("other-team", "true", labels={"team": "nlp"}))
        names = lambda sel: sorted(j["metadata"]["name"] for j in self.c.list(sel))  # noqa: E731
        self.assertEqual(names("team=vision"), ["from-yaml"])
        self.assertEqual(names({"team": "vision", "tier": "batch"}), ["from-yaml"])
        self.assertEqual(names("team,team!=vision"), ["other-team"])
        self.assertEqual(names("team=none"), [])
        self.assertEqual(self.c.wait("from-yaml", timeout=60)["status"]["phase"], "Succeeded")
        self.assertEqual(list(self.c.logs("from-yaml")), ["from yaml"])

    @unittest.skipIf(gpucloud.client.yaml is None, "PyYAML is not installed")
    def test_yaml_namespace_is_the_manifests(self):
        text = ("apiVersion: gpucloud/v1\nkind: Job\nmetadata:\n  name: elsewhere\n"
                "  namespace: team-b\nspec:\n  tasks:\n  - name: m\n    command: ['true']\n")
        self.assertEqual(self.c.submit(text), "elsewhere")
        self.assertEqual(self.c.get("elsewhere", namespace="team-b")["metadata"]["namespace"],
                         "team-b")
        # Without PyYAML the text goes to the client's namespace: the server says why not.
        saved, gpucloud.client.yaml = gpucloud.client.yaml, None
        try:
            with self.assertRaises(gpucloud.ApiError) as e:
                self.c.submit(text.replace("elsewhere", "elsewhere-2"))
        finally:
            gpucloud.client.yaml = saved
        self.assertEqual(e.exception.status, 400)
        self.assertIn("team-b", e.exception.message)

    def test_cancel_a_long_job(self):
        name = self.c.submit(job("long", "echo started; exec sleep 600"))
        running = self.c.wait(name, timeout=60, phases=("Running",))
        self.assertEqual(running["status"]["phase"], "Running")
        with self.assertRaises(gpucloud.WaitTimeout) as e:
            self.c.wait(name, timeout=1)
        self.assertEqual(e.exception.job["status"]["phase"], "Running")
        t = time.monotonic()
        self.c.cancel(name)
        done = self.c.wait(name, timeout=60)
        self.assertEqual(done["status"]["phase"], "Cancelled", done["status"])
        self.assertLess(time.monotonic() - t, 40)
        with self.assertRaises(gpucloud.Conflict) as e:
            self.c.cancel(name)
        self.assertEqual(e.exception.status, 409)
        self.assertIn("ended", e.exception.message)
        self.c.delete(name, wait=True, timeout=30)

    def test_delete_a_running_job_waits_until_it_is_gone(self):
        name = self.c.submit(job("deleted-running", "exec sleep 600"))
        self.c.wait(name, timeout=60, phases=("Running",))
        self.c.delete(name, wait=True, timeout=60)
        with self.assertRaises(gpucloud.NotFound):
            self.c.get(name)
        with self.assertRaises(gpucloud.NotFound):
            self.c.wait(name, timeout=5)

    def test_patch_changes_labels_and_dry_runs_store_nothing(self):
        self.c.submit(job("patched", "true", labels={"tier": "batch", "old": "x"}))
        got = self.c.patch("patched", {"metadata": {"labels": {"tier": "gold", "old": None}}})
        self.assertEqual(got["metadata"]["labels"], {"tier": "gold"})
        self.assertEqual(self.c.get("patched")["metadata"]["labels"], {"tier": "gold"})
        dry = self.c.patch("patched", {"metadata": {"labels": {"tier": "x"}}}, dry_run=True)
        self.assertEqual(dry["metadata"]["labels"], {"tier": "x"})
        self.assertEqual(self.c.get("patched")["metadata"]["labels"], {"tier": "gold"})
        self.assertEqual(self.c.submit(job("dry", "true"), dry_run=True), "dry")
        with self.assertRaises(gpucloud.NotFound):
            self.c.get("dry")
        with self.assertRaises(gpucloud.ApiError) as e:
            self.c.patch("patched", {"spec": {"tasks": [{"name": "m", "replicas": 0}]}})
        self.assertEqual(e.exception.status, 422)

    def test_list_in_pages(self):
        names = [f"paged-{i}" for i in range(5)]
        for n in names:
            self.c.submit(job(n, "true", labels={"paged": "yes"}))
        pages = []
        seen = []

        class Recording(gpucloud.Client):
            def request(inner, method, path, query=None, body=None, content_type=None):
                doc = super().request(method, path, query, body, content_type)
                pages.append(len(doc.get("items") or []))
                return doc
        r = Recording(up.url, up.token, up.ca)
        for j in r.iter_jobs("paged=yes", page_size=2):
            seen.append(j["metadata"]["name"])
        self.assertEqual(sorted(seen), names)
        self.assertEqual(pages, [2, 2, 1])  # bounded requests, each a page
        self.assertEqual(sorted(j["metadata"]["name"] for j in r.list("paged=yes", page_size=3)),
                         names)

    def test_a_job_reads_a_secret_it_names(self):
        self.c.create_secret("db", {"password": "s3cr3t-py", "user": b"alice"})
        listed = {s["metadata"]["name"]: s for s in self.c.secrets()}
        self.assertIn("db", listed)
        self.assertNotIn("s3cr3t-py", json.dumps(listed))  # values are never answered
        self.assertEqual(listed["db"]["status"]["data"]["password"]["bytes"], 9)
        spec = job("reads-secret", "echo pw=$DB_PASSWORD; cat $GPUCLOUD_SECRETS/db/user; echo")
        task = spec["spec"]["tasks"][0]
        task["env"] = [{"name": "DB_PASSWORD",
                        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
        task["volumes"] = [{"name": "db", "mountPath": "/etc/db", "secret": {"secretName": "db"}}]
        self.c.submit(spec)
        done = self.c.wait("reads-secret", timeout=60)
        self.assertEqual(done["status"]["phase"], "Succeeded", done["status"])
        self.assertEqual(list(self.c.logs("reads-secret")), ["pw=s3cr3t-py", "alice"])
        self.assertNotIn("s3cr3t-py", json.dumps(self.c.get("reads-secret")))
        reg = self.c.create_registry_secret("reg", "registry.local:5000", "u", "p")
        self.assertEqual(reg["type"], "kubernetes.io/dockerconfigjson")
        self.c.delete_secret("db")
        with self.assertRaises(gpucloud.NotFound):
            self.c.delete_secret("db")

    def test_errors_carry_the_servers_status_and_message(self):
        with self.assertRaises(gpucloud.ApiError) as e:
            self.c.submit("apiVersion: gpucloud/v1\nkind: Job\nmetadata:\n  name: bad\nspec:\n"
                          "  tasks:\n  - name: m\n    replicas: 0\n    command: ['true']\n")
        self.assertEqual((e.exception.status, e.exception.reason), (422, "Invalid"))
        self.assertIn("spec.tasks[0].replicas", e.exception.message)
        self.assertRegex(e.exception.message, r"body:\d+:\d+")
        self.c.submit(job("twice", "true"))
        with self.assertRaises(gpucloud.Conflict) as e:
            self.c.submit(job("twice", "true"))
        self.assertEqual(e.exception.status, 409)
        with self.assertRaises(gpucloud.ApiError) as e:
            gpucloud.Client(up.url, "not-a-token", up.ca).list()
        self.assertEqual(e.exception.status, 401)
        with self.assertRaises(gpucloud.GpucloudError):
            gpucloud.Client(up.url, up.token).list()  # the server's CA is not trusted
        with self.assertRaises(TypeError):
            self.c.submit(42)

    def test_config_from_the_environment_and_relative_paths(self):
        tmp = tempfile.mkdtemp(dir=up.tmp)
        shutil.copy(up.ca, os.path.join(tmp, "ca.crt"))
        path = os.path.join(tmp, "config")
        with open(path, "w") as f:
            f.write(f"# copied\nserver: {up.url}\ncertificate-authority: ca.crt\n"
                    f"token: \"{up.token}\"\n")
        saved = os.environ.get("GPUCLOUD_CONFIG")
        os.environ["GPUCLOUD_CONFIG"] = path
        try:
            self.assertIsInstance(gpucloud.Client.from_config().list(), list)
        finally:
            os.environ.pop("GPUCLOUD_CONFIG")
            if saved is not None:
                os.environ["GPUCLOUD_CONFIG"] = saved
        with open(path, "w") as f:
            f.write(f"server: {up.url}\ntoken: x\n")
        with self.assertRaisesRegex(gpucloud.GpucloudError, "certificate-authority: is required"):
            gpucloud.Client.from_config(path)
        with self.assertRaisesRegex(gpucloud.GpucloudError, "cannot read"):
            gpucloud.Client.from_config(os.path.join(tmp, "missing"))

    def test_pip_install(self):
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode:
            self.skipTest(f"no pip for {python}")
        tmp = tempfile.mkdtemp(dir=up.tmp)
        src, target = os.path.join(tmp, "src"), os.path.join(tmp, "site")
        shutil.copytree(os.path.join(SOURCE, "python"), src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        r = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                            "--no-build-isolation", "--target", target, src],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = subprocess.run([python, "-c", "import gpucloud, sys; print(gpucloud.__file__); "
                            "print(len(gpucloud.Client.from_config(sys.argv[1]).list()) >= 0)",
                            up.config], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=target), cwd=tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(target), r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("True"), r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
