"""gpucloud's REST API from Python: submit, get, list (paged), patch, wait, logs, cancel, delete;
and Secrets (create, list, delete) for jobs to read.

Standard library only (urllib, ssl, json). PyYAML, where it is installed, is used only to read a
YAML manifest's namespace and a config file; without it a YAML manifest is still sent as it is
(the server parses YAML and JSON alike) to the client's namespace.

A Client holds no connection and no mutable state after construction: one HTTPS connection per
call, so one Client may be used from several threads at once.
"""
import base64
import contextlib
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import yaml  # optional: only to read a YAML manifest's namespace and a config file
except ImportError:  # pragma: no cover (depends on the interpreter)
    yaml = None

PREFIX = "/apis/gpucloud/v1"
TERMINAL_PHASES = ("Succeeded", "Failed", "Cancelled")
DEFAULT_CONFIG = os.path.join("~", ".gpucloud", "config")
_DEFAULT = object()  # "the client's own timeout"


class GpucloudError(Exception):
    """Anything this client could not do: a bad config, an unreachable server, a bad answer."""


class ApiError(GpucloudError):
    """The server refused a request. `status` is the HTTP status, `reason` the Status object's
    reason (NotFound, Conflict, Invalid, ...), `message` the server's own words."""

    def __init__(self, status, reason, message, body=None):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message, self.body = status, reason, message, body


class NotFound(ApiError):
    """404: no such object (or not one this token may see)."""


class Conflict(ApiError):
    """409: it exists already, it changed since it was read, or it has already ended."""


class WaitTimeout(GpucloudError, TimeoutError):
    """wait() ran out of time; `job` is the object as last seen."""

    def __init__(self, message, job):
        super().__init__(message)
        self.job = job


def _error(status, body):
    """The exception for an HTTP error answer (a Kubernetes Status object, or anything)."""
    try:
        doc = json.loads(body)
        reason, message = doc.get("reason", ""), doc.get("message", "")
    except (ValueError, AttributeError):
        doc, reason, message = None, "", body.decode("utf-8", "replace").strip()
    cls = {404: NotFound, 409: Conflict}.get(status, ApiError)
    return cls(status, reason or "Error", message or f"HTTP {status}", doc)


def _read_config(path):
    """A client config (`server`, `certificate-authority` or `certificate-authority-data`,
    `token` or `client-certificate` + `client-key`) as a dict. The format is flat YAML, read
    with PyYAML when it is installed and line by line otherwise."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if yaml is not None:
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            raise GpucloudError(f"{path}: not a mapping of keys to values")
        return {str(k): str(v) for k, v in doc.items() if v is not None}
    doc = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise GpucloudError(f"{path}:{n}: expected 'key: value'")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        doc[key.strip()] = value
    return doc


def _manifest(job):
    """(body bytes, content type, the manifest's namespace or None) for a dict, JSON or YAML."""
    if isinstance(job, dict):
        return json.dumps(job).encode(), "application/json", _namespace_of(job)
    if isinstance(job, bytes):
        job = job.decode("utf-8")
    if not isinstance(job, str):
        raise TypeError("a job is a dict or the text of a YAML or JSON manifest")
    try:
        return job.encode(), "application/json", _namespace_of(json.loads(job))
    except ValueError:
        pass
    doc = None
    if yaml is not None:
        try:
            doc = yaml.safe_load(job)
        except yaml.YAMLError:
            doc = None  # the server names the line and column
    return job.encode(), "application/yaml", _namespace_of(doc)


def _namespace_of(doc):
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) and ns else None


def _name_of(obj):
    return (obj.get("metadata") or {}).get("name", "")


class Client:
    """A gpucloud server, one bearer token (or client certificate), one default namespace."""

    def __init__(self, server, token=None, ca_file=None, namespace="default", *, ca_data=None,
                 cert_file=None, key_file=None, timeout=30.0):
        if not server.startswith("https://"):
            raise GpucloudError(f"server: must start with https://, got {server}")
        self.server = server.rstrip("/")
        self.token, self.namespace, self.timeout = token, namespace, timeout
        self._ssl = ssl.create_default_context(cafile=ca_file, cadata=ca_data)
        if cert_file:
            self._ssl.load_cert_chain(cert_file, key_file)

    @classmethod
    def from_config(cls, path=None, namespace="default", **kwargs):
        """A client from a config file: `path`, else $GPUCLOUD_CONFIG, else ~/.gpucloud/config
        (`gpucloud up` and `gpucloud server` write one for their admin: DATA_DIR/admin.config).
        A relative `certificate-authority` is read from the config's own directory."""
        path = os.path.expanduser(path or os.environ.get("GPUCLOUD_CONFIG") or DEFAULT_CONFIG)
        try:
            doc = _read_config(path)
        except OSError as e:
            raise GpucloudError(f"cannot read the client config {path}: {e.strerror}") from None
        base = os.path.dirname(os.path.abspath(path))

        def file(key):
            v = doc.get(key)
            return os.path.join(base, os.path.expanduser(v)) if v else None

        if not doc.get("server"):
            raise GpucloudError(f"{path}: server: is required")
        ca_data = doc.get("certificate-authority-data")
        if ca_data:
            ca_data = base64.b64decode(ca_data).decode("ascii")
        if not ca_data and not doc.get("certificate-authority"):
            raise GpucloudError(f"{path}: certificate-authority: is required")
        if not doc.get("token") and not doc.get("client-certificate"):
            raise GpucloudError(f"{path}: token: is required")
        ca_file = None if ca_data else file("certificate-authority")
        return cls(doc["server"], doc.get("token"), ca_file, namespace, ca_data=ca_data,
                   cert_file=file("client-certificate"), key_file=file("client-key"), **kwargs)

    # --- HTTP ---------------------------------------------------------------------------------

    def _open(self, method, path, query=None, body=None, content_type=None, timeout=_DEFAULT):
        """The open response of a 2xx answer (the caller reads and closes it); ApiError else.
        `timeout` bounds each socket operation (None: none)."""
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", "gpucloud-python/0.1")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            return urllib.request.urlopen(req, context=self._ssl,
                                          timeout=self.timeout if timeout is _DEFAULT else timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise _error(e.code, e.read()) from None
        except urllib.error.URLError as e:
            raise GpucloudError(f"cannot reach {self.server}: {e.reason}") from None

    def request(self, method, path, query=None, body=None, content_type=None):
        """One request on a path under the server; the answer's JSON (or None when empty)."""
        if isinstance(body, (dict, list)):
            body, content_type = json.dumps(body).encode(), "application/json"
        with self._open(method, path, query, body, content_type) as r:
            data = r.read()
        return json.loads(data) if data.strip() else None

    def _jobs(self, namespace, name="", sub=""):
        ns = urllib.parse.quote(namespace or self.namespace, safe="")
        path = f"{PREFIX}/namespaces/{ns}/jobs"
        if name:
            path += "/" + urllib.parse.quote(name, safe="")
        return path + (f"/{sub}" if sub else "")

    # --- jobs ---------------------------------------------------------------------------------

    def submit(self, job, namespace=None, dry_run=False):
        """Creates a job from a dict or a YAML or JSON manifest's text (a gpucloud/v1 Job, a
        Kubernetes Pod or a Volcano Job: the server converts the last two). Returns its name.
        Conflict when it exists; ApiError 422 with the field and line when it is invalid. With
        dry_run=True the server checks it all (validation, policies, quota) and stores nothing."""
        body, content_type, manifest_ns = _manifest(job)
        created = self.request("POST", self._jobs(namespace or manifest_ns),
                               {"dryRun": "All" if dry_run else None}, body=body,
                               content_type=content_type)
        return _name_of(created)

    def patch(self, name, changes, namespace=None, dry_run=False):
        """Changes a job with a JSON merge patch (RFC 7386; `None` removes a key), e.g.
        patch("mnist", {"metadata": {"labels": {"tier": "gold", "old": None}}}). Returns the
        job as stored; Invalid when the result is not a valid job, Conflict when a
        metadata.resourceVersion in `changes` is stale."""
        return self.request("PATCH", self._jobs(namespace, name),
                            {"dryRun": "All" if dry_run else None},
                            body=json.dumps(changes).encode(),
                            content_type="application/merge-patch+json")

    def get(self, name, namespace=None):
        """The job as the server holds it, status included; NotFound when there is none."""
        return self.request("GET", self._jobs(namespace, name))

    def list(self, selector=None, namespace=None, page_size=None):
        """The namespace's jobs, with a label selector (`team=a,tier!=x,gpu,!spot`) or a dict of
        labels that must all match. With page_size, fetched that many at a time (the server's
        limit/continue) and returned whole."""
        return list(self.iter_jobs(selector, namespace, page_size))

    def iter_jobs(self, selector=None, namespace=None, page_size=500):
        """Yields the namespace's jobs a page of `page_size` at a time (None: one request), so
        a namespace with many jobs is read in bounded requests. A continue token the server no
        longer honours is ApiError 410: list again."""
        if isinstance(selector, dict):
            selector = ",".join(f"{k}={v}" for k, v in selector.items())
        token = None
        while True:
            query = {"labelSelector": selector or None,
                     "limit": str(page_size) if page_size else None, "continue": token}
            doc = self.request("GET", self._jobs(namespace), query)
            yield from doc.get("items") or []
            token = (doc.get("metadata") or {}).get("continue")
            if not page_size or not token:
                return

    def events(self, name, namespace=None):
        """The job's events, oldest first."""
        doc = self.request("GET", self._jobs(namespace, name, "events"))
        return doc.get("items", doc) if isinstance(doc, dict) else doc

    def watch(self, resource_version=None, selector=None, timeout=300, namespace=None):
        """Yields (type, object) for the namespace's jobs as they change: ADDED, MODIFIED,
        DELETED. From `resource_version` on, or (without one) the current state first, one
        ADDED per job. Ends after `timeout` seconds (the server closes the stream); a
        resource_version the server no longer has is ApiError 410 (list and watch again)."""
        query = {"watch": "true", "resourceVersion": resource_version,
                 "labelSelector": selector, "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(max(1, int(timeout + 0.999)))}
        with self._open("GET", self._jobs(namespace), query, timeout=timeout + 30) as r:
            for line in r:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise _error(obj.get("code", 500), json.dumps(obj).encode())
                if event.get("type") != "BOOKMARK":
                    yield event.get("type"), event.get("object") or {}

    def wait(self, name, timeout=None, namespace=None, phases=TERMINAL_PHASES):
        """Follows the namespace's watch stream until the job's phase is one of `phases`
        (by default one it ends in: Succeeded, Failed, Cancelled) and returns the job. Never
        polls: one GET, then the changes after it. WaitTimeout after `timeout` seconds (None:
        no limit); NotFound when the job is deleted meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.get(name, namespace)
        while True:
            if (job.get("status") or {}).get("phase") in phases:
                return job
            left = 300.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                phase = (job.get("status") or {}).get("phase")
                raise WaitTimeout(f"job {name} is still {phase} after {timeout} s", job)
            rv = job["metadata"].get("resourceVersion")
            try:
                events = self.watch(rv, timeout=min(left, 300.0), namespace=namespace)
                with contextlib.closing(events):
                    for kind, obj in events:
                        if _name_of(obj) != name:
                            continue
                        if kind == "DELETED":
                            raise NotFound(404, "NotFound", f"job {name} was deleted", None)
                        job = obj
                        if (job.get("status") or {}).get("phase") in phases:
                            return job
            except ApiError as e:
                if e.status != 410:
                    raise
                job = self.get(name, namespace)  # history compacted: read it again

    def logs(self, name, follow=False, rank=None, attempt=None, namespace=None):
        """Yields the lines of a task's output (rank 0 and the current attempt by default),
        without their newline; with follow=True until the job ends."""
        query = {"rank": rank, "attempt": attempt, "follow": "true" if follow else None}
        # A followed log may be quiet for a long time: no read timeout then.
        with self._open("GET", self._jobs(namespace, name, "logs"), query,
                        timeout=None if follow else _DEFAULT) as r:
            for line in r:
                yield line.decode("utf-8", "replace").rstrip("\n")

    def cancel(self, name, namespace=None):
        """Stops the job's tasks (SIGTERM, grace period, SIGKILL) and keeps the job; Conflict
        when it has already ended. Returns at once: wait() for the Cancelled phase."""
        return self.request("POST", self._jobs(namespace, name, "cancel"))

    def delete(self, name, namespace=None, wait=False, timeout=None):
        """Deletes the job; a running one is cancelled first and removed once its tasks stopped
        (then, with wait=True, this returns only once it is gone). NotFound when there is none."""
        job = self.get(name, namespace) if wait else None
        status = self.request("DELETE", self._jobs(namespace, name))
        if wait:
            self._wait_gone(name, namespace, job["metadata"].get("resourceVersion"), timeout)
        return status

    # --- secrets ------------------------------------------------------------------------------

    def _secrets(self, namespace, name=""):
        ns = urllib.parse.quote(namespace or self.namespace, safe="")
        path = f"{PREFIX}/namespaces/{ns}/secrets"
        return path + ("/" + urllib.parse.quote(name, safe="") if name else "")

    def create_secret(self, name, data, namespace=None, type="Opaque", replace=False):
        """Stores a Secret for jobs to read (env valueFrom.secretKeyRef, secret volumes,
        imagePullSecrets): `data` maps keys to str or bytes values. The values are never
        answered back: the result shows each key's size. Conflict when it exists (replace=True
        replaces every value)."""
        values = {k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
                  for k, v in data.items()}
        doc = {"apiVersion": "gpucloud/v1", "kind": "Secret", "metadata": {"name": name},
               "type": type, "data": values}
        if replace:
            return self.request("PUT", self._secrets(namespace, name), body=doc)
        return self.request("POST", self._secrets(namespace), body=doc)

    def create_registry_secret(self, name, server, username, password, namespace=None):
        """A kubernetes.io/dockerconfigjson Secret for imagePullSecrets, as `kubectl create
        secret docker-registry` writes it."""
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        config = {"auths": {server: {"username": username, "password": password, "auth": auth}}}
        return self.create_secret(name, {".dockerconfigjson": json.dumps(config)}, namespace,
                                  type="kubernetes.io/dockerconfigjson")

    def secrets(self, namespace=None):
        """The namespace's Secrets, without their values."""
        return self.request("GET", self._secrets(namespace)).get("items") or []

    def delete_secret(self, name, namespace=None):
        """Removes a Secret; NotFound when there is none."""
        return self.request("DELETE", self._secrets(namespace, name))

    def _wait_gone(self, name, namespace, rv, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                self.get(name, namespace)
            except NotFound:
                return
            left = 300.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(f"job {name} still exists after {timeout} s", None)
            try:
                events = self.watch(rv, timeout=min(left, 300.0), namespace=namespace)
                with contextlib.closing(events):
                    for kind, obj in events:
                        if kind == "DELETED" and _name_of(obj) == name:
                            return
            except ApiError as e:
                if e.status != 410:
                    raise
                rv = None
