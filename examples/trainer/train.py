#!/usr/bin/env python3
"""A small real trainer for gpucloud's demos and tests (Python standard library only).

Logistic regression by gradient descent on synthetic data, seeded so that every run gives the
same numbers. Each replica trains on its shard (RANK of WORLD_SIZE). It checkpoints to
$GPUCLOUD_CHECKPOINT_DIR every --checkpoint-every steps (write, fsync, rename: a checkpoint is
complete or absent), resumes from the newest complete one, and prints its final loss. While it
runs it holds an exclusive lock in the checkpoint directory: a second attempt of the same
replica finds it taken and exits with code 75 instead of running alongside.

Environment: RANK, WORLD_SIZE, GPUCLOUD_CHECKPOINT_DIR, GPUCLOUD_RESTART_COUNT (all optional).
SIGTERM: writes a checkpoint and exits 0 (what the executor's grace period is for).
"""
import argparse
import fcntl
import json
import math
import os
import random
import signal
import sys

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def data(rank, world, n, dim, seed):
    rng = random.Random(seed)
    truth = [rng.uniform(-1, 1) for _ in range(dim)]
    rows = []
    for i in range(n):
        x = [rng.gauss(0, 1) for _ in range(dim)]
        z = sum(a * b for a, b in zip(x, truth))
        y = 1.0 if rng.random() < 1 / (1 + math.exp(-3 * z)) else 0.0
        if i % world == rank:
            rows.append((x, y))
    return rows


def loss_and_grad(w, rows):
    loss, grad = 0.0, [0.0] * len(w)
    for x, y in rows:
        z = sum(a * b for a, b in zip(w, x))
        p = 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))
        loss -= y * math.log(max(p, 1e-12)) + (1 - y) * math.log(max(1 - p, 1e-12))
        for j, xj in enumerate(x):
            grad[j] += (p - y) * xj
    n = max(1, len(rows))
    return loss / n, [g / n for g in grad]


def newest_checkpoint(directory, rank):
    best = None
    for name in os.listdir(directory):
        if not (name.startswith(f"rank{rank}-step") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(directory, name)) as f:
                c = json.load(f)
            if best is None or c["step"] > best["step"]:
                best = c
        except (OSError, ValueError, KeyError):
            continue  # incomplete or foreign: ignore
    return best


def save(directory, rank, step, w):
    path = os.path.join(directory, f"rank{rank}-step{step:08d}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": step, "w": w}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--fail-at-step", type=int, default=-1,
                    help="exit 1 at this step of the first attempt (a transient fault, for tests)")
    args = ap.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    ckpt_dir = os.environ.get("GPUCLOUD_CHECKPOINT_DIR") or os.path.join(os.getcwd(), "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    lock = open(os.path.join(ckpt_dir, f"rank{rank}.lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"rank {rank}: another attempt holds the lock in {ckpt_dir}", file=sys.stderr)
        return 75
    signal.signal(signal.SIGTERM, on_term)
    rows = data(rank, world, args.samples, args.dim, args.seed)
    w, step = [0.0] * args.dim, 0
    c = newest_checkpoint(ckpt_dir, rank)
    if c is not None:
        w, step = c["w"], c["step"]
    restarts = os.environ.get("GPUCLOUD_RESTART_COUNT", "0")
    print(f"rank {rank}/{world}: starting at step {step} (restart {restarts})", flush=True)
    while step < args.steps:
        if stop:
            save(ckpt_dir, rank, step, w)
            print(f"rank {rank}: stopped at step {step}, checkpoint written", flush=True)
            return 0
        if step == args.fail_at_step and restarts == "0":
            print(f"rank {rank}: failing at step {step} as asked", flush=True)
            return 1
        loss, grad = loss_and_grad(w, rows)
        w = [wi - args.lr * gi for wi, gi in zip(w, grad)]
        step += 1
        if step % args.checkpoint_every == 0:
            save(ckpt_dir, rank, step, w)
    loss, _ = loss_and_grad(w, rows)
    print(f"rank {rank}: final loss {loss:.6f} after {step} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
