#!/usr/bin/env python3
"""A real GPU in a container (CTest `gpu_containers_e2e`, label gpu; issue 13): a real
`gpucloud server` and `gpucloud agent run` on the host's NVIDIA GPUs (the NVML backend, the CDI
spec it writes to /var/run/cdi), Podman, Debian's docker-registry on loopback with the
gpu-probe image of scripts/build-images (busybox and the C library; nvidia-smi and the driver's
libraries come from the CDI spec). A one-GPU job runs `nvidia-smi -L` in that image and must see
exactly one GPU: the one the server assigned, by UUID, which is also its CUDA_VISIBLE_DEVICES.
On a host with several GPUs a two-GPU job must see exactly its two.

Exit 0 on pass, 1 on a failure, 77 (skipped, saying why) without root, an NVIDIA GPU and its
driver's nvidia-smi, Podman or the registry.

Usage: gpu_containers.py BUILD_DIR SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import containers  # noqa: E402
import oci  # noqa: E402

SKIP = 77


def host_gpus():
    """The host's GPU UUIDs as nvidia-smi lists them; [] without a GPU or a driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None or not os.path.exists("/dev/nvidiactl"):
        return []
    p = subprocess.run([smi, "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                       text=True, timeout=60)
    return [line.strip() for line in p.stdout.splitlines() if line.strip().startswith("GPU-")]


def seen(out):
    """The GPU UUIDs of `nvidia-smi -L` output."""
    return re.findall(r"\(UUID: (GPU-[0-9a-fA-F-]+)\)", out)


def run_probe(c, res, name, count):
    spec = containers.job(name, c.probe, ["sh", "-c",
                                          "echo CVD=$CUDA_VISIBLE_DEVICES; nvidia-smi -L"],
                          gpu=count)
    c.apply(spec)
    phase = c.wait_phase(name, ("Succeeded", "Failed"), 180)
    out = c.logs(name)
    cvd = re.search(r"CVD=(\S*)", out)
    given = cvd.group(1).split(",") if cvd and cvd.group(1) else []
    listed = seen(out)
    res.check(f"a {count}-GPU job sees exactly its GPUs in the container",
              phase == "Succeeded" and len(listed) == count and sorted(listed) == sorted(given),
              f"phase {phase}; nvidia-smi -L: {listed}; CUDA_VISIBLE_DEVICES: {given}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        print("skipped: needs root (Podman's store, /var/run/cdi)")
        return SKIP
    gpus = host_gpus()
    if not gpus:
        print("skipped: no NVIDIA GPU with its driver's nvidia-smi on this host")
        return SKIP
    if oci.missing():
        print(f"skipped: missing {', '.join(oci.missing())}")
        return SKIP
    res = containers.Results()
    with tempfile.TemporaryDirectory(prefix="gpucloud-gpu-containers-") as work:
        os.chmod(work, 0o711)
        with oci.Registry(os.path.join(work, "registry")) as reg, \
                oci.Podman(os.path.join(work, "builder")) as builder:
            oci.build_images(builder, ["gpu-probe"])
            oci.push_image(builder, "localhost/gpucloud/gpu-probe:1", reg, "gpucloud/gpu-probe:1")
            certs = os.path.join(work, "certs")
            os.makedirs(certs)
            shutil.copy(reg.ca_path, os.path.join(certs, "main.crt"))
            c = containers.Cluster(build, work, reg, certs, gpus=())  # NVML, /var/run/cdi
            c.probe = f"{reg.addr}/gpucloud/gpu-probe:1"
            try:
                c.start()
                run_probe(c, res, "one-gpu", 1)
                if len(gpus) >= 2:
                    run_probe(c, res, "two-gpus", 2)
            except AssertionError as e:
                res.check("gpu containers", False, str(e)[:300])
            finally:
                c.stop()
                c.podman("rm", "-af", "-t", "0")
                oci.unmount_under(os.path.join(work, "images"))
                if any(r[1] == "FAIL" for r in res.rows):
                    for name in ("server", "agent"):
                        p = os.path.join(work, f"{name}.log")
                        if os.path.exists(p):
                            print(f"--- {name}.log (tail) ---")
                            print("".join(open(p, errors="replace").readlines()[-40:]))
    return 0 if res.table() else 1


if __name__ == "__main__":
    sys.exit(main())
