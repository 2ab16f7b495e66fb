#!/usr/bin/env python3
"""Proves issue 13's OCI fixture (tests/e2e/oci.py, CTest `oci_selftest`, label e2e) against the
real programs: the busybox image built by scripts/build-images into a private store, pushed to a
TLS registry on loopback and pulled into a second private store; a second pull downloads no
blob (the registry's access log counts them); a fresh pull of a corrupted blob fails with a
digest error; a registry with auth answers 401 without credentials and serves a pull with them
(and refuses it without). Prints the time of each step.

Exit 0 on pass, 1 on a failure, 77 (skipped, saying why) when not root or a program is missing.
Usage: oci_selftest.py [--trainer]   (--trainer also builds, pushes and pulls the trainer image
and runs it: the measurements of the report, about 15 s more)
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oci  # noqa: E402

SKIP = 77


class Steps:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f"\n{detail}" if not ok and detail else ""),
              flush=True)
        self.failures += 0 if ok else 1
        return ok


def timed(label, fn, *args, **kw):
    start = time.monotonic()
    result = fn(*args, **kw)
    print(f"  [{time.monotonic() - start:5.2f} s] {label}", flush=True)
    return result


def registry_round_trip(t, tmp, steps):
    """Push, pull, cache hit, digest mismatch against a registry without auth."""
    with oci.Registry(os.path.join(tmp, "reg")) as reg, \
            oci.Podman(os.path.join(tmp, "a")) as a, oci.Podman(os.path.join(tmp, "b")) as b, \
            oci.Podman(os.path.join(tmp, "c")) as c:
        print(timed("build-images busybox", oci.build_images, a, ["busybox"]).rstrip())
        steps.check(a.image_exists(oci.BUSYBOX), f"built {oci.BUSYBOX}")
        timed("push busybox", oci.push_image, a, oci.BUSYBOX, reg, "gpucloud/busybox:1")
        status, body = reg.get("/v2/gpucloud/busybox/tags/list")
        steps.check(status == 200 and b'"1"' in body, "the registry lists gpucloud/busybox:1",
                    f"{status} {body!r}")
        layers = reg.layer_digests("gpucloud/busybox", "1")
        before = reg.blob_downloads(layers)
        timed("pull busybox (cold)", oci.pull_image, b, reg, "gpucloud/busybox:1")
        ref = f"{reg.addr}/gpucloud/busybox:1"
        out = b.run(["run", "--rm", *oci.RUN_FLAGS, ref, "cat", "/etc/passwd"]).stdout
        steps.check("nobody:x:65534" in out, "the pulled image runs", out)
        cold = reg.blob_downloads(layers) - before
        steps.check(cold == len(layers),
                    f"the cold pull downloaded {cold} of {len(layers)} layer(s)")
        p = timed("pull busybox (cached)", oci.pull_image, b, reg, "gpucloud/busybox:1")
        warm = reg.blob_downloads(layers) - before - cold
        steps.check(warm == 0, f"the second pull downloaded {warm} layers", p.stdout + p.stderr)
        digest = oci.corrupt_blob(reg, "gpucloud/busybox", "1")
        p = timed("pull busybox (corrupt)", oci.pull_image, c, reg, "gpucloud/busybox:1",
                  check=False)
        text = p.stdout + p.stderr
        print("  " + text.strip().splitlines()[-1][:300])
        steps.check(p.returncode != 0 and re.search(r"[Dd]igest did not match", text)
                    and digest in text, f"a corrupt layer {digest[:19]}... fails the pull", text)
        steps.check(not c.image_exists(ref), "and leaves no image behind")
        if t.trainer:
            trainer_round_trip(reg, a, b, tmp, steps)


def trainer_round_trip(reg, a, b, tmp, steps):
    out = timed("build-images trainer", oci.build_images, a, ["trainer"])
    print(out.rstrip())
    timed("push trainer", oci.push_image, a, oci.TRAINER, reg, "gpucloud/trainer:1")
    layers = reg.manifest("gpucloud/trainer", "1")["layers"]
    print(f"  trainer in the registry: {sum(x['size'] for x in layers) / 1e6:.1f} MB compressed")
    timed("pull trainer (cold)", oci.pull_image, b, reg, "gpucloud/trainer:1")
    ck = os.path.join(tmp, "ck")
    os.makedirs(ck)
    os.chmod(ck, 0o777)
    ref = f"{reg.addr}/gpucloud/trainer:1"
    p = timed("run trainer --steps 20", b.run,
              ["run", "--rm", *oci.RUN_FLAGS, "-v", f"{ck}:/ck", "-e",
               "GPUCLOUD_CHECKPOINT_DIR=/ck", ref, "python3", "/app/train.py", "--steps", "20"],
              check=False)
    steps.check(p.returncode == 0 and "final loss" in p.stdout, "the trainer runs in its image",
                p.stdout + p.stderr)


def auth_registry(tmp, steps):
    with oci.Registry(os.path.join(tmp, "authreg"), auth=True) as reg, \
            oci.Podman(os.path.join(tmp, "d")) as d, oci.Podman(os.path.join(tmp, "e")) as e:
        status, _ = reg.get("/v2/")
        steps.check(status == 401, f"/v2/ without credentials is {status}")
        status, _ = reg.get("/v2/", reg.username, "wrong")
        steps.check(status == 401, f"/v2/ with a wrong password is {status}")
        status, _ = reg.get("/v2/", reg.username, reg.password)
        steps.check(status == 200, f"/v2/ with the credentials is {status}")
        good = reg.auth_file(reg.username, reg.password)
        oci.build_images(d, ["busybox"])
        timed("push busybox (auth)", oci.push_image, d, oci.BUSYBOX, reg, "gpucloud/busybox:1",
              authfile=good)
        empty = os.path.join(tmp, "empty-auth.json")
        with open(empty, "w") as f:
            f.write('{"auths": {}}')
        p = oci.pull_image(e, reg, "gpucloud/busybox:1", authfile=empty, check=False)
        text = p.stdout + p.stderr
        steps.check(p.returncode != 0 and "unauthorized" in text.lower(),
                    "a pull without credentials is refused (unauthorized)", text)
        p = timed("pull busybox (auth)", oci.pull_image, e, reg, "gpucloud/busybox:1",
                  authfile=good, check=False)
        steps.check(p.returncode == 0, "a pull with the credentials works", p.stdout + p.stderr)


def main():
    class T:
        trainer = "--trainer" in sys.argv[1:]

    if os.geteuid() != 0:
        print("SKIP: oci_selftest needs root (podman's private store mounts overlays)")
        return SKIP
    if oci.missing():
        print(f"SKIP: oci_selftest needs {', '.join(oci.missing())}")
        return SKIP
    steps = Steps()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpucloud-oci-") as tmp:
        try:
            registry_round_trip(T, tmp, steps)
            auth_registry(tmp, steps)
        except Exception as e:  # a helper that failed: report it as a failure, not a crash
            steps.check(False, f"{type(e).__name__}", str(e))
    print(f"{'PASS' if not steps.failures else 'FAIL'}: {steps.failures} failure(s) "
          f"in {time.monotonic() - start:.1f} s")
    return 0 if not steps.failures else 1


if __name__ == "__main__":
    sys.exit(main())
