#!/usr/bin/env python3
"""PyTorch DistributedDataParallel under gpucloud: one process per replica.

gpucloud's executor sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
CUDA_VISIBLE_DEVICES and GPUCLOUD_CHECKPOINT_DIR; this script needs nothing else. It trains a
small MLP on synthetic data with NCCL on GPUs (gloo on CPU), checkpoints from rank 0 every
--checkpoint-every steps (write, then rename), resumes from the newest checkpoint after a
restart, checkpoints and exits 0 on SIGTERM (the executor's grace period), and prints the final
loss. For GPU machines (needs torch); CI only checks that it compiles.

  gpuctl run --gpus 1 --replicas 2 -- python examples/pytorch/ddp_train.py --steps 500
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
import torch.nn as nn

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    use_cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank % max(1, torch.cuda.device_count())}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world)

    torch.manual_seed(1234)  # same initial weights and data on every rank
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    truth = torch.randn(64, 1, device=device)

    ckpt_dir = os.environ.get("GPUCLOUD_CHECKPOINT_DIR") or "checkpoints"
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, "ddp.pt")
    step = 0
    if os.path.exists(path):
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]

    def save():
        if rank == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()

    restarts = os.environ.get("GPUCLOUD_RESTART_COUNT", "0")
    print(f"rank {rank}/{world} on {device}: starting at step {step} (restart {restarts})", flush=True)
    gen = torch.Generator(device=device).manual_seed(rank * 100003 + step)
    loss = torch.tensor(0.0)
    while step < args.steps:
        if stop:
            save()
            print(f"rank {rank}: stopped at step {step}, checkpoint written", flush=True)
            break
        x = torch.randn(args.batch, 64, device=device, generator=gen)
        y = x @ truth
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % args.checkpoint_every == 0:
            save()
    else:
        print(f"rank {rank}: final loss {loss.item():.6f} after {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
