#!/usr/bin/env python3
"""The audit log end to end (CTest label `e2e`, issue 14; docs/audit.md): a real
`gpucloud server` with an admin and a tenant ("alice", namespace team-a).

  1. admin and tenant requests (creates, reads, a 403, a 401, a 404) are recorded with who, the
     verb, the object and the code; every answer carries an Audit-Id that names its record; a
     tenant may not read the log (403); bad and unknown query parameters are 400 naming them;
  2. kill -9 of the server in the middle of a burst of creates from several threads: after a
     restart every acknowledged create has its object and its record, and the chain verifies
     (GET audit/verify);
  3. offline: the records, digests and key downloaded, the chain and the digests' signatures
     verified here (hashlib and `openssl dgst -verify`); a byte of a record changed, a record
     deleted, the export truncated: this verifier names the first bad record;
  4. in the store (python's sqlite3, the server stopped): a byte of a record changed is named by
     the server's GET audit/verify; a record deleted or the log truncated stops the server's
     start with the first bad record named.

No root needed. Exit 0 on pass, 1 on a failure. Usage: audit.py BUILD_DIR SOURCE_DIR
"""
import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import time

GENESIS = "0" * 64
PREFIX = "/apis/gpucloud/v1"
JOBS = f"{PREFIX}/namespaces/team-a/jobs"


def log(msg):
    print(f"audit: {msg}", flush=True)


def wait(ok, seconds, what, step=0.05):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            v = ok()
            if v:
                return v
        except Exception:  # noqa: BLE001 (the server may be starting)
            pass
        time.sleep(step)
    raise TimeoutError(f"timed out after {seconds} s waiting for {what}")


class Api:
    """An HTTPS client with one bearer token (or none); one connection per call."""

    def __init__(self, port, ca, token):
        self.port, self.token = port, token
        self.ctx = ssl.create_default_context(cafile=ca)

    def call(self, method, path, body=None, timeout=10):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                           timeout=timeout)
        try:
            h = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            h["User-Agent"] = "audit-e2e/1"
            if body is not None:
                body = json.dumps(body)
                h["Content-Type"] = "application/json"
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def get(self, path):
        status, _, body = self.call("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
        return body.decode()


def job(name, secret="s3cr3t-env-value-0451"):
    return {"apiVersion": "gpucloud/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"tasks": [{"name": "main", "replicas": 1, "command": ["true"],
                                "env": [{"name": "TOKEN", "value": secret}]}]}}


class Server:
    def __init__(self, build, work):
        self.build, self.work = build, work
        self.data = os.path.join(work, "data")
        self.alice_token = secrets.token_hex(32)
        self.proc = None
        self.starts = 0

    def prepare(self):
        os.makedirs(self.data, mode=0o700)
        with open(os.path.join(self.data, "tokens"), "w") as f:
            os.fchmod(f.fileno(), 0o600)
            digest = hashlib.sha256(self.alice_token.encode()).hexdigest()
            f.write(f"{digest} alice team-a tenant\n")

    def logfile(self):
        return os.path.join(self.work, f"server-{self.starts}.log")

    def output(self):
        with open(self.logfile(), errors="replace") as f:
            return f.read()

    def start(self, expect_failure=False):
        self.starts += 1
        out = open(self.logfile(), "w")
        self.proc = subprocess.Popen(
            [f"{self.build}/apps/gpucloud", "server", "--data-dir", self.data, "--listen",
             "127.0.0.1:0"], stdout=out, stderr=subprocess.STDOUT)
        if expect_failure:
            self.proc.wait(timeout=20)
            return self.output()
        m = wait(lambda: re.search(r"serving https://127\.0\.0\.1:(\d+)", self.output()), 20,
                 "the server to listen")
        port = int(m.group(1))
        ca = os.path.join(self.data, "ca.crt")
        with open(os.path.join(self.data, "admin.config")) as f:
            admin_token = re.search(r"token: (\S+)", f.read()).group(1)
        self.admin = Api(port, ca, admin_token)
        self.alice = Api(port, ca, self.alice_token)
        self.anon = Api(port, ca, None)
        return None

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        self.proc = None


def jsonl(text):
    return [line for line in text.split("\n") if line]


# ---- the offline verifier (docs/audit.md, "Chain and digests") ----

def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def signature_ok(digest, key_pem_path, work):
    data = dict(digest)
    sig = base64.b64decode(data.pop("signature"))
    data_path, sig_path = os.path.join(work, "digest.json"), os.path.join(work, "digest.sig")
    with open(data_path, "w") as f:
        f.write(canonical(data))
    with open(sig_path, "wb") as f:
        f.write(sig)
    r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", key_pem_path, "-signature",
                        sig_path, data_path], capture_output=True)
    return r.returncode == 0


def verify_offline(record_lines, digest_lines, key_pem_path, work):
    """(ok, first bad seq or 0, what), as the server's VerifyChain would say it."""
    digests = {}
    for text in digest_lines:
        d = json.loads(text)
        if not signature_ok(d, key_pem_path, work):
            return False, d["seq"], f"digest for {d['seq']} is not signed by this server's key"
        digests[d["seq"]] = d
    expect_seq, prev = None, None
    for i, text in enumerate(record_lines):
        try:
            r = json.loads(text)
        except ValueError:
            return False, (expect_seq or i + 1), f"line {i + 1} does not decode"
        seq = r["seq"]
        if expect_seq is None:
            expect_seq = seq
            prev = GENESIS if seq == 1 else digests.get(seq - 1, {}).get("headHash")
            if prev is None:
                return False, seq, f"the log starts at {seq} and nothing anchors it"
        if seq != expect_seq:
            return False, expect_seq, f"records {expect_seq} to {seq - 1} are missing"
        body = dict(r)
        h = body.pop("hash")
        if canonical(r) != text or hashlib.sha256(canonical(body).encode()).hexdigest() != h:
            return False, seq, f"record {seq} was modified"
        if r["prevHash"] != prev:
            return False, seq, f"record {seq} does not follow record {seq - 1}"
        if seq in digests and digests[seq]["headHash"] != h:
            return False, seq, f"the digest for {seq} names another hash"
        prev, expect_seq = h, seq + 1
    last = (expect_seq or 1) - 1
    beyond = [s for s in digests if s > last]
    if beyond:
        return False, last + 1, f"the log is truncated: a digest covers {max(beyond)}"
    return True, 0, f"{len(record_lines)} records verify"


class Checks:
    def __init__(self):
        self.failed = []

    def check(self, what, ok, detail=""):
        log(f"{'PASS' if ok else 'FAIL'}: {what}{'' if ok else ': ' + str(detail)[:600]}")
        if not ok:
            self.failed.append(what)


def records_of(api, query=""):
    return [json.loads(line) for line in jsonl(api.get(f"{PREFIX}/audit/records{query}"))]


def part_requests(s, c):
    status, headers, _ = s.admin.call("POST", JOBS, job("admin-job"))
    c.check("admin creates a job", status == 201, status)
    admin_audit_id = headers.get("Audit-Id", "")
    status, _, _ = s.alice.call("POST", JOBS, job("alice-job"))
    c.check("alice creates a job in her namespace", status == 201, status)
    status, headers, _ = s.alice.call("GET", f"{JOBS}/alice-job")
    c.check("alice reads it", status == 200, status)
    read_id = headers.get("Audit-Id", "")
    status, _, _ = s.alice.call("GET", f"{PREFIX}/namespaces/team-b/jobs")
    c.check("alice may not list team-b", status == 403, status)
    status, _, _ = s.alice.call("GET", f"{JOBS}/nope")
    c.check("a missing job is 404", status == 404, status)
    status, _, _ = s.anon.call("GET", JOBS)
    c.check("no token is 401", status == 401, status)
    status, _, _ = s.alice.call("GET", f"{PREFIX}/audit/records")
    c.check("a tenant may not read the audit log", status == 403, status)
    for query, name in (("?since=yesterday", "since"), ("?limit=x", "limit"),
                        ("?colour=red", "colour")):
        status, _, body = s.admin.call("GET", f"{PREFIX}/audit/records{query}")
        c.check(f"audit/records{query} is 400 naming {name}",
                status == 400 and name.encode() in body, (status, body[:200]))

    recs = records_of(s.admin)
    by_id = {r["auditID"]: r for r in recs}
    c.check("an answer's Audit-Id names its record",
            admin_audit_id in by_id and read_id in by_id, (admin_audit_id, read_id))
    alice, ids = [], set()
    for r in records_of(s.admin, "?user=alice"):  # a request's first record (one per Txn)
        if r["auditID"] not in ids:
            ids.add(r["auditID"])
            alice.append(r)
    seen = [(r["verb"], r["objectRef"]["namespace"], r["objectRef"]["name"],
             r["responseStatus"]["code"], r["stage"]) for r in alice]
    want = [("create", "team-a", "alice-job", 0, "Committed"),
            ("get", "team-a", "alice-job", 200, "ResponseComplete"),
            ("list", "team-b", "", 403, "ResponseComplete"),
            ("get", "team-a", "nope", 404, "ResponseComplete"),
            ("get", "", "records", 403, "ResponseComplete")]
    c.check("alice's requests are recorded: verb, object, code, stage", seen == want, seen)
    c.check("each of alice's records names her, her address and user agent",
            all(r["user"]["username"] == "alice" and r["sourceIPs"] == ["127.0.0.1"] and
                r["userAgent"] == "audit-e2e/1" for r in alice), alice[:1])
    acted = [r for r in alice if r["action"]]
    c.check("recorded actions (where authorization names one) are IAM actions",
            all(":" in r["action"] for r in acted), acted[:1])
    c.check("the 401 is recorded", any(r["responseStatus"]["code"] == 401 for r in recs))
    c.check("no record holds a request body", all("s3cr3t" not in json.dumps(r) for r in recs))
    status, _, _ = s.admin.call("GET", f"{PREFIX}/audit/records?afterSeq=1&limit=2")
    c.check("paging parameters are accepted", status == 200, status)
    paged = records_of(s.admin, "?afterSeq=1&limit=2")
    c.check("afterSeq and limit page", [r["seq"] for r in paged] == [2, 3],
            [r["seq"] for r in paged])


def part_crash(s, c):
    """Creates from several threads; kill -9 in the middle; every acknowledged one survives."""
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def creator(t):
        i = 0
        while not stop.is_set():
            name = f"burst-{t}-{i}"
            i += 1
            try:
                status, _, _ = s.admin.call("POST", JOBS, job(name), timeout=5)
            except Exception:  # noqa: BLE001 (the server is gone)
                return
            if status == 201:
                with lock:
                    acked.append(name)

    threads = [threading.Thread(target=creator, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    wait(lambda: len(acked) >= 40, 20, "40 acknowledged creates")
    s.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    log(f"killed the server after {len(acked)} acknowledged creates")
    s.start()
    report = json.loads(s.admin.get(f"{PREFIX}/audit/verify"))
    c.check("after kill -9 the chain verifies (server side)", report["ok"], report)
    committed = {r["objectRef"]["name"] for r in records_of(s.admin)
                 if r["stage"] == "Committed" and r["verb"] == "create"}
    missing = [n for n in acked if n not in committed]
    c.check("every acknowledged create has its record", not missing, missing[:5])
    listed = {j["metadata"]["name"] for j in json.loads(s.admin.get(JOBS))["items"]}
    gone = [n for n in acked if n not in listed]
    c.check("every acknowledged create is stored", not gone, gone[:5])


def part_offline(s, c, work):
    """Downloads the log (with a digest signed at the last shutdown) and verifies it here."""
    s.stop()  # SIGTERM: the head is signed
    s.start()
    records = jsonl(s.admin.get(f"{PREFIX}/audit/records"))
    digests = jsonl(s.admin.get(f"{PREFIX}/audit/digests"))
    key_path = os.path.join(work, "audit-key.pem")
    with open(key_path, "w") as f:
        f.write(s.admin.get(f"{PREFIX}/audit/key"))
    c.check("a digest was signed at shutdown", len(digests) >= 1, digests)
    ok, bad, what = verify_offline(records, digests, key_path, work)
    c.check("the downloaded log verifies offline", ok, what)
    report = json.loads(s.admin.get(f"{PREFIX}/audit/verify"))
    c.check("and on the server", report["ok"] and report["signedThrough"] >= 1, report)
    signed = max(json.loads(d)["seq"] for d in digests)
    k = 5
    changed = list(records)
    i = changed[k - 1].index('"username":"') + len('"username":"')
    changed[k - 1] = changed[k - 1][:i] + chr(ord(changed[k - 1][i]) ^ 1) + changed[k - 1][i + 1:]
    ok, bad, what = verify_offline(changed, digests, key_path, work)
    c.check("offline: a byte of record 5 changed is named", not ok and bad == k, (bad, what))
    ok, bad, what = verify_offline(records[:k - 1] + records[k:], digests, key_path, work)
    c.check("offline: record 5 deleted is named", not ok and bad == k, (bad, what))
    ok, bad, what = verify_offline(records[:signed - 3], digests, key_path, work)
    c.check(f"offline: truncated after {signed - 3} (signed through {signed}) is named",
            not ok and bad == signed - 2, (bad, what))
    forged = json.loads(digests[-1])
    forged["headHash"] = "f" * 64
    ok, bad, what = verify_offline(records, digests[:-1] + [canonical(forged)], key_path, work)
    c.check("offline: an altered digest is refused", not ok, what)
    return signed


def store_edit(db, fn):
    con = sqlite3.connect(db)
    try:
        fn(con)
        con.commit()
    finally:
        con.close()


def record_key(seq):
    return f"/audit/records/{seq:020d}".encode()


def part_store(s, c, signed):
    """Tampering with the stopped server's store."""
    s.stop()
    db = os.path.join(s.data, "store.db")
    pristine = os.path.join(s.work, "pristine")
    os.makedirs(pristine)
    for f in os.listdir(s.data):
        if f.startswith("store.db"):
            shutil.copy2(os.path.join(s.data, f), pristine)

    def restore():
        for f in os.listdir(s.data):
            if f.startswith("store.db"):
                os.remove(os.path.join(s.data, f))
        for f in os.listdir(pristine):
            shutil.copy2(os.path.join(pristine, f), s.data)

    k = 7

    def flip(con):
        (value,) = con.execute("SELECT value FROM objects WHERE key = ?",
                               (record_key(k),)).fetchone()
        text = bytes(value).decode()
        i = text.index('"username":"') + len('"username":"')
        text = text[:i] + chr(ord(text[i]) ^ 1) + text[i + 1:]
        con.execute("UPDATE objects SET value = ? WHERE key = ?",
                    (text.encode() if isinstance(value, bytes) else text, record_key(k)))

    store_edit(db, flip)
    s.start()
    report = json.loads(s.admin.get(f"{PREFIX}/audit/verify"))
    c.check("store: a byte of record 7 changed is named by audit/verify",
            not report["ok"] and report["firstBadSeq"] == k, report)
    s.stop()

    restore()
    store_edit(db, lambda con: con.execute("DELETE FROM objects WHERE key = ?", (record_key(k),)))
    out = s.start(expect_failure=True)
    c.check("store: record 7 deleted stops the start, naming it",
            s.proc.returncode != 0 and f"seq {k}:" in out, out[-400:])

    restore()
    cut = signed - 2

    def truncate(con):
        con.execute("DELETE FROM objects WHERE key > ? AND key < ?",
                    (record_key(cut), b"/audit/records0"))

    store_edit(db, truncate)
    out = s.start(expect_failure=True)
    c.check(f"store: the log truncated after {cut} stops the start, naming {cut + 1}",
            s.proc.returncode != 0 and f"seq {cut + 1}:" in out, out[-400:])
    restore()
    s.start()
    report = json.loads(s.admin.get(f"{PREFIX}/audit/verify"))
    c.check("the restored store verifies", report["ok"], report)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    started = time.time()
    work = tempfile.mkdtemp(prefix="gpucloud-audit-e2e-")
    s = Server(build, work)
    c = Checks()
    try:
        s.prepare()
        s.start()
        part_requests(s, c)
        part_crash(s, c)
        signed = part_offline(s, c, work)
        part_store(s, c, signed)
    except Exception as e:  # noqa: BLE001 (a failure of the suite is reported, not raised)
        c.check("the suite ran to its end", False, repr(e))
        for i in range(1, s.starts + 1):
            path = os.path.join(work, f"server-{i}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    log(f"server-{i}.log tail: {f.read()[-1500:]}")
    finally:
        s.stop(signal.SIGKILL)
    log(f"{'FAILED: ' + ', '.join(c.failed) if c.failed else 'all passed'} "
        f"in {time.time() - started:.1f} s")
    if not c.failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
