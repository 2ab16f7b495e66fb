"""Helpers for issue 13's container tests (Python 3 standard library only): a real OCI registry
(Debian's `docker-registry`, the CNCF Distribution registry) on loopback with TLS and optional
htpasswd auth, podman with a private store, and the local images of scripts/build-images.

Every process these helpers start is stopped when its context manager exits, failure or not:

    with tempfile.TemporaryDirectory() as tmp, Registry(tmp + "/reg") as reg, \\
            Podman(tmp + "/a") as podman:
        build_images(podman, ["busybox"])
        push_image(podman, BUSYBOX, reg, "gpucloud/busybox:1")

Not thread-safe: one test thread uses an object at a time. Needs root (podman's private store
mounts overlays) and the `podman`, `runc`, `docker-registry` and `openssl` programs; `missing()`
says which are absent so a test can exit 77 naming them.
"""
import base64
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_IMAGES = os.path.join(REPO, "scripts", "build-images")
BUSYBOX = "localhost/gpucloud/busybox:1"
TRAINER = "localhost/gpucloud/trainer:1"
REGISTRY_BIN = "/usr/bin/docker-registry"
# What `podman run` needs on these machines (see the notes): runc and explicit ulimits.
RUN_FLAGS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
START_DEADLINE_S = 15.0
COMMAND_TIMEOUT_S = 300


def missing():
    """Names of the programs these helpers need that are not installed (empty when all are)."""
    need = ["podman", "runc", "openssl", REGISTRY_BIN, "/bin/busybox"]
    return [p for p in need if shutil.which(p) is None and not os.access(p, os.X_OK)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {p.stdout}")


def make_tls(directory):
    """Writes a self-signed CA (ca.crt, ca.key) and a server certificate signed by it
    (server.crt, server.key) for IP:127.0.0.1 and DNS:localhost into directory."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=gpucloud test registry CA", cwd=directory)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=directory)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt",
             cwd=directory)


_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def bcrypt_hash(password, cost=5):
    """A bcrypt ($2b$) hash of password, as htpasswd -B makes, from the system's crypt(3)
    (Debian's libxcrypt supports bcrypt; Python's crypt module is only a wrapper of it).
    A low cost keeps the registry fast: it checks the hash on every request."""
    # 22 salt characters; the last one carries 2 bits only, so it is one of ".Oeu".
    salt = "".join(secrets.choice(_BCRYPT_ALPHABET) for _ in range(21)) + secrets.choice(".Oeu")
    setting = f"$2b${cost:02d}${salt}"
    lib = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    out = lib.crypt(password.encode(), setting.encode())
    if not out or not out.decode().startswith(setting):
        raise RuntimeError("crypt(3) cannot make bcrypt hashes here")
    return out.decode()


class Registry:
    """A `docker-registry serve` on 127.0.0.1:<free port> with TLS from a CA of its own,
    storage under tmpdir/storage and its log (access log included) in tmpdir/registry.log.
    auth=True turns on htpasswd auth with one user, .username/.password (random)."""

    def __init__(self, tmpdir, auth=False):
        self.tmpdir = os.path.abspath(tmpdir)
        self.auth = auth
        self.username = "puller" if auth else None
        self.password = secrets.token_hex(8) if auth else None
        self.storage_dir = os.path.join(self.tmpdir, "storage")
        self.cert_dir = os.path.join(self.tmpdir, "certs")  # podman's --cert-dir: ca.crt
        self.ca_path = os.path.join(self.cert_dir, "ca.crt")
        self.log_path = os.path.join(self.tmpdir, "registry.log")
        self.addr = None
        self._proc = None
        self._log = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        os.makedirs(self.storage_dir, exist_ok=True)
        tls = os.path.join(self.tmpdir, "tls")
        make_tls(tls)
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copyfile(os.path.join(tls, "ca.crt"), self.ca_path)
        if self.auth:
            with open(os.path.join(self.tmpdir, "htpasswd"), "w") as f:
                f.write(f"{self.username}:{bcrypt_hash(self.password)}\n")
        for _ in range(3):  # a port picked free can be taken before the registry binds it
            port = _free_port()
            config = self._write_config(port, tls)
            self._log = open(self.log_path, "a")
            self._proc = subprocess.Popen([REGISTRY_BIN, "serve", config], stdout=self._log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            self.addr = f"127.0.0.1:{port}"
            if self._wait_ready():
                return
            self.stop()
        raise RuntimeError(f"docker-registry did not come up; its log:\n{self.log()}")

    def _write_config(self, port, tls):
        # YAML is a superset of JSON: the config is written as JSON.
        config = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": False}},
            "storage": {"filesystem": {"rootdirectory": self.storage_dir},
                        "delete": {"enabled": True},
                        "maintenance": {"uploadpurging": {"enabled": False}}},
            "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16),
                     "tls": {"certificate": os.path.join(tls, "server.crt"),
                             "key": os.path.join(tls, "server.key")}},
        }
        if self.auth:
            config["auth"] = {"htpasswd": {"realm": "gpucloud-test",
                                           "path": os.path.join(self.tmpdir, "htpasswd")}}
        path = os.path.join(self.tmpdir, "config.yml")
        with open(path, "w") as f:
            json.dump(config, f, indent=1)
        return path

    def _wait_ready(self):
        """Polls /v2/ until it answers (200, or 401 with auth) or START_DEADLINE_S passes."""
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline and self._proc.poll() is None:
            try:
                status, _ = self.get("/v2/")
                if status in (200, 401):
                    return True
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.05)
        return False

    def stop(self):
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def ssl_context(self):
        return ssl.create_default_context(cafile=self.ca_path)

    def get(self, path, username=None, password=None, method="GET"):
        """(status, body bytes) of an HTTPS request to the registry, verified against its CA."""
        req = urllib.request.Request(f"https://{self.addr}{path}", method=method)
        if username is not None:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            req.add_header("Authorization", "Basic " + token)
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def auth_file(self, username, password, path=None):
        """Writes a containers-auth.json (podman's --authfile) for this registry; its path."""
        path = path or os.path.join(self.tmpdir, f"auth-{username}.json")
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        with open(path, "w") as f:
            json.dump({"auths": {self.addr: {"auth": token}}}, f)
        os.chmod(path, 0o600)
        return path

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def blob_downloads(self, digests=None):
        """Count of blob GETs the registry answered 200 (from its access log), of any blob or,
        given digests, of those only. (podman fetches an image's config, about 1 KB, on every
        pull, cached or not: a cache hit is a pull that downloads no layer.)"""
        got = re.findall(r'"GET /v2/\S+/blobs/(sha256:[0-9a-f]{64}) HTTP/[\d.]+" 200 ', self.log())
        return len([d for d in got if digests is None or d in digests])

    def layer_digests(self, repo, tag):
        """The digests of repo:tag's layers, from the registry's storage."""
        return [layer["digest"] for layer in self.manifest(repo, tag)["layers"]]

    def _v2(self):
        return os.path.join(self.storage_dir, "docker", "registry", "v2")

    def blob_path(self, digest):
        """The file that holds blob `digest` ("sha256:...") in the registry's storage."""
        algo, hexd = digest.split(":", 1)
        return os.path.join(self._v2(), "blobs", algo, hexd[:2], hexd, "data")

    def manifest(self, repo, tag):
        """The manifest (a dict) that repo:tag points to, read from the registry's storage."""
        link = os.path.join(self._v2(), "repositories", repo, "_manifests", "tags", tag,
                            "current", "link")
        with open(link) as f:
            digest = f.read().strip()
        with open(self.blob_path(digest)) as f:
            return json.load(f)


class Podman:
    """podman with a private store (--root, --runroot, --tmpdir under tmpdir), runc, cgroupfs and
    a file event log, so tests never touch the host's containers. On exit its containers are
    removed and the store's mounts undone (the directory itself is the caller's to delete)."""

    def __init__(self, tmpdir):
        self.tmpdir = os.path.abspath(tmpdir)
        self.root = os.path.join(self.tmpdir, "root")
        self.runroot = os.path.join(self.tmpdir, "runroot")
        self.libpod_tmp = os.path.join(self.tmpdir, "tmp")
        # Where podman stages blobs during a pull (its default is the host's /var/tmp).
        self.image_tmp = os.path.join(self.tmpdir, "vartmp")
        self.prefix = ["podman", "--root", self.root, "--runroot", self.runroot,
                       "--tmpdir", self.libpod_tmp, "--cgroup-manager", "cgroupfs",
                       "--events-backend", "file", "--runtime", "runc"]

    def __enter__(self):
        for d in (self.root, self.runroot, self.libpod_tmp, self.image_tmp):
            os.makedirs(d, exist_ok=True)
        return self

    def __exit__(self, *exc):
        self.close()

    def env(self, extra=None):
        """The environment podman runs with: this one, TMPDIR=.image_tmp, plus extra."""
        return dict(os.environ, TMPDIR=self.image_tmp, **(extra or {}))

    def run(self, args, check=True, timeout=COMMAND_TIMEOUT_S, env=None, **kw):
        """Runs `podman <private store flags> args...` (env: extra variables); a
        CompletedProcess with text stdout and stderr. check=True raises RuntimeError (with
        both) on a non-zero exit."""
        p = subprocess.run(self.prefix + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout,
                           env=self.env(env), **kw)
        if check and p.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: exit {p.returncode}\n"
                               f"{p.stdout}{p.stderr}")
        return p

    def image_exists(self, ref):
        return self.run(["image", "exists", ref], check=False).returncode == 0

    def close(self):
        if os.path.isdir(self.root):
            with contextlib.suppress(Exception):
                self.run(["rm", "--all", "--force", "--time", "0"], check=False, timeout=60)
        unmount_under(self.tmpdir)


def unmount_under(directory):
    """Lazily unmounts everything mounted at or below `directory`, deepest first: Podman's
    overlay driver bind-mounts its home on itself and mounts layers under it, and leaves them
    when its process ends."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1].encode().decode("unicode_escape") for line in f]
    mine = [p for p in points if p == directory or p.startswith(directory + "/")]
    for point in sorted(mine, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], stderr=subprocess.DEVNULL)


def push_image(podman, local_ref, registry, remote_ref, authfile=None):
    """Pushes podman's local_ref to registry as remote_ref ("repo:tag"); returns the seconds."""
    start = time.monotonic()
    args = ["push", "--tls-verify=true", "--cert-dir", registry.cert_dir]
    if authfile:
        args += ["--authfile", authfile]
    podman.run(args + [local_ref, f"docker://{registry.addr}/{remote_ref}"])
    return time.monotonic() - start


def pull_image(podman, registry, remote_ref, authfile=None, check=True):
    """`podman pull` of registry/remote_ref, verified against the registry's CA; the
    CompletedProcess (check=False lets a test look at a failure's message)."""
    args = ["pull", "--tls-verify=true", "--cert-dir", registry.cert_dir]
    if authfile:
        args += ["--authfile", authfile]
    return podman.run(args + [f"{registry.addr}/{remote_ref}"], check=check)


def corrupt_blob(registry, repo, tag):
    """Overwrites bytes of repo:tag's first layer blob in the registry's storage (same size) so
    that its digest no longer matches; returns that digest. For a gzip layer the bytes changed
    are the header's MTIME, which gzip does not check: the only error left is the digest's."""
    digest = registry.manifest(repo, tag)["layers"][0]["digest"]
    path = registry.blob_path(digest)
    with open(path, "r+b") as f:
        head = f.read(10)
        if head[:2] == b"\x1f\x8b" and len(head) == 10:
            f.seek(4)
            f.write(bytes(b ^ 0x5A for b in head[4:8]))
        else:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(size // 2)
            byte = f.read(1)
            f.seek(size // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
    return digest


def build_images(podman, images=None, timeout=COMMAND_TIMEOUT_S):
    """Runs scripts/build-images into podman's private store (images: a list of "busybox",
    "trainer"; default both); returns its output (the sizes). Raises RuntimeError on failure."""
    cmd = [sys.executable, BUILD_IMAGES, "--root", podman.root, "--runroot", podman.runroot,
           "--tmpdir", podman.libpod_tmp]
    for name in images or []:
        cmd += ["--image", name]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=podman.env())
    if p.returncode != 0:
        raise RuntimeError(f"scripts/build-images failed:\n{p.stdout}")
    return p.stdout
