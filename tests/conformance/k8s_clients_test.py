#!/usr/bin/env python3
"""Real Kubernetes clients and the repository's own manifests against a real `gpucloud up` with
simulated GPUs (issue 16):

  - the official Kubernetes Python client (Debian python3-kubernetes), CustomObjectsApi on group
    `gpucloud`, version `v1`, plural `jobs`: create, get, list with a label selector, watch
    (kubernetes.watch.Watch sends watch=True) until the job's status changes, delete;
  - `kubectl --raw` (skipped when kubectl is not on PATH) get, create and delete, with a
    kubeconfig written here (server, CA, the admin token);
  - kubectl with the server's OpenAPI (/openapi/v3): `kubectl explain jobs.spec.tasks`, and
    `kubectl create -f` / `kubectl apply -f` of a Job validated without --validate=false (kubectl
    finds fieldValidation on the Job's PATCH operation and leaves the validation to the
    server, sending fieldValidation=Strict; the server refuses an unknown field);
  - every job manifest under examples/ (gpucloud Jobs, Pods, Volcano and Kubeflow jobs): valid
    offline (`gpuctl validate`), and, unless SKIP_RUN says why it cannot, applied with
    `gpuctl apply` and run to completion on the simulated GPUs; plus a Pod with quoted
    quantities, as `kubectl get -o yaml` prints them (nvidia.com/gpu: "1").

No registry or image is reachable here, so a manifest's containers run as host processes: the
copy that is applied has each `image` (with its pull policy and args) replaced by a shell
command that prints the rank; everything else (kinds, GPU counts, gangs, replicas, labels,
namespaces) is the example's own.

Usage: k8s_clients_test.py GPUCLOUD_BINARY GPUCTL_BINARY SOURCE_DIR [unittest args]
"""
import copy
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

GPUCLOUD, GPUCTL, SOURCE = (os.path.abspath(a) for a in sys.argv[1:4])
del sys.argv[1:4]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "python"))
sys.path.append("/usr/lib/python3/dist-packages")  # Debian's packages (a pyenv python lacks them)

import gpucloud  # noqa: E402
from upcluster import UpCluster  # noqa: E402

try:
    import kubernetes  # noqa: E402
    from kubernetes import watch as k8s_watch  # noqa: E402
except ImportError:
    kubernetes = None
try:
    import yaml  # noqa: E402
except ImportError:
    yaml = None

# Job kinds a manifest may hold (apiVersion prefix, kind).
JOB_KINDS = {("gpucloud/", "Job"), ("v1", "Pod"), ("batch.volcano.sh/", "Job"),
             ("kubeflow.org/", "PyTorchJob"), ("kubeflow.org/", "MPIJob")}

# Examples that cannot run to completion on one node with 4 simulated H100s and this machine's
# CPUs, and why. They are still validated; everything else under examples/ must complete.
SKIP_RUN = {
    "llm-finetune.yaml": "a gang of 2 nodes x 8 H100s with 96 CPUs and 1 TiB each",
    "mig-inference.yaml": "MIG 1g.10gb instances (the simulated H100s have MIG off), 7 x 4 CPUs",
    "pod-mig.yaml": "a MIG 3g.20gb instance on an A100-SXM4-40GB node",
    "pod-with-runtimeclass.yaml": "A100 nodes labelled accelerator=nvidia-a100, 16 CPUs",
    "shared-notebook.yaml": "an L40S shared through MPS, and a notebook kernel runs forever",
    "single-gpu.json": "4 CPUs, more than a 2-core machine's node offers",
    "job-image.yaml": "the image localhost/gpucloud/trainer:1 (scripts/build-images)",
}

up = None


def setUpModule():
    global up
    up = UpCluster(GPUCLOUD, SOURCE, node="k8sclients")
    unittest.addModuleCleanup(up.stop)  # runs even when start() fails
    up.start()


def job(name, labels=None, script="true"):
    return {"apiVersion": "gpucloud/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"tasks": [{"name": "main", "replicas": 1, "command": ["sh", "-c", script],
                                "resources": {"gpu": 1}}]}}


def phase(obj):
    return (obj.get("status") or {}).get("phase")


@unittest.skipIf(kubernetes is None, "the Kubernetes Python client is not installed "
                 "(Debian python3-kubernetes, scripts/install-deps)")
class KubernetesPythonClientTest(unittest.TestCase):
    def setUp(self):
        conf = kubernetes.client.Configuration()
        conf.host = up.url
        conf.ssl_ca_cert = up.ca
        conf.api_key = {"authorization": up.token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        self.api_client = kubernetes.client.ApiClient(conf)
        self.api = kubernetes.client.CustomObjectsApi(self.api_client)
        self.where = dict(group="gpucloud", version="v1", namespace="default", plural="jobs")

    def tearDown(self):
        self.api_client.close()

    def test_create_list_watch_delete(self):
        created = self.api.create_namespaced_custom_object(
            body=job("k8s-client", {"client": "kubernetes", "run": "1"}, "sleep 0.5; echo ok"),
            **self.where)
        self.assertEqual(created["metadata"]["name"], "k8s-client")
        self.assertTrue(created["metadata"]["uid"])
        self.api.create_namespaced_custom_object(
            body=job("k8s-other", {"client": "other"}), **self.where)

        listed = self.api.list_namespaced_custom_object(label_selector="client=kubernetes",
                                                        **self.where)
        self.assertEqual([j["metadata"]["name"] for j in listed["items"]], ["k8s-client"])
        self.assertTrue(listed["metadata"]["resourceVersion"])
        got = self.api.get_namespaced_custom_object(name="k8s-client", **self.where)
        self.assertEqual(got["metadata"]["uid"], created["metadata"]["uid"])

        # A watch from the create's revision (the client sends watch=True) sees the job's
        # status change until it ends; the other job's changes are filtered by the selector.
        seen, w = [], k8s_watch.Watch()
        for event in w.stream(self.api.list_namespaced_custom_object,
                              label_selector="client=kubernetes",
                              resource_version=created["metadata"]["resourceVersion"],
                              timeout_seconds=60, **self.where):
            obj = event["object"]
            self.assertEqual(obj["metadata"]["name"], "k8s-client")
            seen.append((event["type"], phase(obj)))
            if phase(obj) in gpucloud.TERMINAL_PHASES:
                w.stop()
        self.assertEqual(seen[-1], ("MODIFIED", "Succeeded"), seen)
        self.assertIn("Running", [p for _, p in seen], seen)

        status = self.api.delete_namespaced_custom_object(name="k8s-client", **self.where)
        self.assertEqual(status.get("status"), "Success", status)
        with self.assertRaises(kubernetes.client.exceptions.ApiException) as e:
            self.api.get_namespaced_custom_object(name="k8s-client", **self.where)
        self.assertEqual(e.exception.status, 404)
        self.api.delete_namespaced_custom_object(name="k8s-other", **self.where)

    def test_errors_are_status_objects(self):
        bad = job("k8s-bad")
        bad["spec"]["tasks"][0]["replicas"] = 0
        with self.assertRaises(kubernetes.client.exceptions.ApiException) as e:
            self.api.create_namespaced_custom_object(body=bad, **self.where)
        self.assertEqual(e.exception.status, 422)
        status = json.loads(e.exception.body)
        self.assertEqual((status["kind"], status["reason"]), ("Status", "Invalid"))
        self.assertIn("replicas", status["message"])


@unittest.skipIf(shutil.which("kubectl") is None, "kubectl is not on PATH")
class KubectlRawTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(dir=up.tmp)
        self.kubeconfig = os.path.join(self.home, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: gpucloud
  cluster: {{server: "{up.url}", certificate-authority: "{up.ca}"}}
users:
- name: admin
  user: {{token: "{up.token}"}}
contexts:
- name: gpucloud
  context: {{cluster: gpucloud, user: admin}}
current-context: gpucloud
""")

    def kubectl(self, *args, check=True):
        r = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig,
                            "--cache-dir", os.path.join(self.home, "cache"), *args],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=self.home))
        if check:
            self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r

    def test_get_create_delete(self):
        path = "/apis/gpucloud/v1/namespaces/default/jobs"
        body = os.path.join(self.home, "job.json")
        with open(body, "w") as f:
            json.dump(job("kubectl-raw", {"client": "kubectl"}), f)
        created = json.loads(self.kubectl("create", "--raw", path, "-f", body).stdout)
        self.assertEqual(created["metadata"]["name"], "kubectl-raw")
        listed = json.loads(self.kubectl("get", "--raw", f"{path}?labelSelector=client%3Dkubectl")
                            .stdout)
        self.assertEqual([j["metadata"]["name"] for j in listed["items"]], ["kubectl-raw"])
        got = json.loads(self.kubectl("get", "--raw", f"{path}/kubectl-raw").stdout)
        self.assertEqual(got["metadata"]["uid"], created["metadata"]["uid"])
        again = self.kubectl("create", "--raw", path, "-f", body, check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("exists", again.stderr + again.stdout)
        gpucloud.Client(up.url, up.token, up.ca).wait("kubectl-raw", timeout=60)
        self.kubectl("delete", "--raw", f"{path}/kubectl-raw")
        gone = self.kubectl("get", "--raw", f"{path}/kubectl-raw", check=False)
        self.assertNotEqual(gone.returncode, 0)
        self.assertIn("NotFound", gone.stderr)


@unittest.skipIf(shutil.which("kubectl") is None, "kubectl is not on PATH")
class KubectlOpenApiTest(KubectlRawTest):
    """kubectl reading the server's OpenAPI documents: explain, and writes it validates."""

    def test_get_create_delete(self):
        pass  # KubectlRawTest's, not run twice

    def test_explain(self):
        out = self.kubectl("explain", "jobs.spec.tasks").stdout
        self.assertIn("KIND:       Job", out)
        self.assertIn("VERSION:    v1", out)
        self.assertIn("FIELD: tasks <[]Object>", out)
        self.assertRegex(out, r"name\s+<string> -required-")
        self.assertRegex(out, r"resources\s+<Object>")
        self.assertRegex(out, r"imagePullPolicy\s+<string>\n\s+enum: Always, IfNotPresent, Never")
        gpu = self.kubectl("explain", "jobs.spec.tasks.resources.gpu").stdout
        self.assertRegex(gpu, r"sharing\s+<string>\n\s+enum: time-slicing, mps")
        self.assertIn("cpu\t<Quantity>", self.kubectl("explain", "job.spec.tasks.resources").stdout)
        recursive = self.kubectl("explain", "queues.spec", "--recursive").stdout
        self.assertRegex(recursive, r"quota\s+<\[\]Object>\n\s+gpuType\s+<string> -required-")
        bad = self.kubectl("explain", "jobs.spec.colour", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn('field "colour" does not exist', bad.stderr)
        # gpuctl explain prints the same schema offline.
        mine = subprocess.run([GPUCTL, "explain", "jobs.spec.tasks"], capture_output=True,
                              text=True, timeout=60, env=dict(os.environ, HOME=self.home))
        self.assertEqual(mine.returncode, 0, mine.stderr)
        self.assertEqual(mine.stdout.strip(), out.strip())

    def test_create_and_apply_are_validated_without_validate_false(self):
        path = os.path.join(self.home, "job.yaml")
        with open(path, "w") as f:
            json.dump(job("kubectl-validated", {"client": "kubectl"}), f)
        created = self.kubectl("create", "-f", path, "-v=6")
        self.assertIn("job.gpucloud/kubectl-validated created", created.stdout)
        # kubectl leaves the validation to the server: it asks for strict validation.
        self.assertIn("fieldValidation=Strict", created.stderr)
        doc = job("kubectl-validated", {"client": "kubectl", "applied": "yes"})
        with open(path, "w") as f:
            json.dump(doc, f)
        applied = self.kubectl("apply", "-f", path)
        self.assertIn("kubectl-validated", applied.stdout)
        got = json.loads(self.kubectl("get", "jobs.gpucloud", "kubectl-validated",
                                      "-o", "json").stdout)
        self.assertEqual(got["metadata"]["labels"].get("applied"), "yes")
        # An unknown field is refused by the server, naming it; nothing is created.
        doc = job("kubectl-colour")
        doc["spec"]["colour"] = "blue"
        with open(path, "w") as f:
            json.dump(doc, f)
        bad = self.kubectl("create", "-f", path, check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("colour", bad.stderr)
        gone = self.kubectl("get", "jobs.gpucloud", "kubectl-colour", check=False)
        self.assertIn("NotFound", gone.stderr)
        gpucloud.Client(up.url, up.token, up.ca).wait("kubectl-validated", timeout=60)
        self.kubectl("delete", "jobs.gpucloud", "kubectl-validated")


def without_images(doc):
    """A copy of a manifest whose containers run a host command instead of their image."""
    doc = copy.deepcopy(doc)

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("image"), str):
                for key in ("image", "imagePullPolicy", "args"):
                    node.pop(key, None)
                node["command"] = ["sh", "-c", 'echo "rank ${RANK:-0} of ${WORLD_SIZE:-1}"']
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    return doc


def example_jobs():
    """(relative path, [job documents]) for every example manifest that holds a job."""
    found = []
    paths = sorted(glob.glob(os.path.join(SOURCE, "examples", "**", "*.yaml"), recursive=True) +
                   glob.glob(os.path.join(SOURCE, "examples", "**", "*.json"), recursive=True))
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
        jobs = [d for d in docs
                if any(str(d.get("apiVersion", "")).startswith(v) and d.get("kind") == k
                       for v, k in JOB_KINDS)]
        if jobs:
            found.append((os.path.relpath(path, SOURCE), jobs))
    return found


@unittest.skipIf(yaml is None, "PyYAML is not installed (Debian python3-yaml)")
class ExampleManifestsTest(unittest.TestCase):
    def setUp(self):
        self.client = gpucloud.Client(up.url, up.token, up.ca)
        self.tmp = tempfile.mkdtemp(dir=up.tmp)
        self.env = dict(os.environ, GPUCLOUD_CONFIG=up.config)

    def gpuctl(self, *args):
        r = subprocess.run([GPUCTL, *args], capture_output=True, text=True, timeout=60,
                           env=self.env, cwd=SOURCE)
        self.assertEqual(r.returncode, 0, f"gpuctl {' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r.stdout

    def run_to_completion(self, where, docs):
        """Applies the documents with gpuctl, waits for every job to succeed, and deletes them.
        Returns {name: rank 0's output lines}."""
        path = os.path.join(self.tmp, os.path.basename(where) + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(docs, f)
        self.gpuctl("apply", "-f", path)
        logs = {}
        for doc in docs:
            name, ns = doc["metadata"]["name"], doc["metadata"].get("namespace", "default")
            try:
                done = self.client.wait(name, timeout=60, namespace=ns)
            except gpucloud.WaitTimeout as e:
                self.fail(f"{where}: job {ns}/{name} did not end: {e.job.get('status')}")
            logs[name] = list(self.client.logs(name, namespace=ns))
            self.assertEqual(phase(done), "Succeeded",
                             f"{where}: {done.get('status')}\nrank 0's output: {logs[name]}")
            self.client.delete(name, namespace=ns, wait=True, timeout=60)
        return logs

    def test_every_example_job(self):
        examples = example_jobs()
        self.assertGreaterEqual(len(examples), 5, examples)
        unknown = set(SKIP_RUN) - {os.path.basename(w) for w, _ in examples}
        self.assertFalse(unknown, f"SKIP_RUN names examples that are not job manifests: {unknown}")
        ran = []
        for where, docs in examples:
            with self.subTest(example=where):
                self.gpuctl("validate", "-f", os.path.join(SOURCE, where))
                if os.path.basename(where) in SKIP_RUN:
                    continue
                self.run_to_completion(where, [without_images(d) for d in docs])
                ran.append(where)
        print(f"\nran to completion: {', '.join(ran)}; validated only: "
              + "; ".join(f"{k} ({v})" for k, v in SKIP_RUN.items()), file=sys.stderr)
        self.assertIn("examples/trainer/job.yaml", ran)

    def test_quoted_quantities(self):
        """A Pod as `kubectl get -o yaml` prints it: every quantity a string."""
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "quoted-quantities", "labels": {"app": "quoted"}},
               "spec": {"restartPolicy": "Never", "containers": [{
                   "name": "main", "command": ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"],
                   "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "500m",
                                            "memory": "64Mi"},
                                 "requests": {"nvidia.com/gpu": "2", "cpu": "0.5"}}}]}}
        logs = self.run_to_completion("quoted-quantities", [pod])
        self.assertEqual(len(logs["quoted-quantities"][0].split(",")), 2, logs)


if __name__ == "__main__":
    unittest.main(verbosity=2)
