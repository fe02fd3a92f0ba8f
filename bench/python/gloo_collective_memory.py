#!/usr/bin/env python3
"""Memory a Gloo collective allocates beyond its own tensors, on 2 ranks: why stage 3 gathers by broadcasts (issue 53).

Each collective runs on tensors allocated (and touched) beforehand, with the peak resident set size (VmHWM) reset
just before it (writing 5 to /proc/self/clear_refs, Linux); the figure is the peak minus the resident size before,
rank 0's, in MiB:
- all_gather_into_tensor of a piece of N floats per rank into an output of 2 N (FSDP2's all-gather, and
  c10d's _allgather_base): ProcessGroupGloo receives into a flat buffer of its own and copies it out;
- reduce_scatter_tensor of 2 N floats into N (FSDP2's reduce-scatter): ProcessGroupGloo all-reduces a clone;
- one broadcast per rank of its N rows of the same 2 N output, in place (stage 3's gather, shard_group.hpp).

    bench/python/gloo_collective_memory.py [--numel 50000000]

Prints one Markdown row per collective: | collective | bytes of its output | extra resident MiB (rank 0) |
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def extra_mib(fn):
    """Runs fn between two barriers; the resident MiB it added at its peak."""
    dist.barrier()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_mib("VmRSS")
    fn()
    dist.barrier()
    return status_mib("VmHWM") - before


def run(rank, port, n):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    piece, whole = torch.ones(n), torch.zeros(2 * n)
    rows = []
    rows.append(("all_gather_into_tensor", whole.nbytes, extra_mib(lambda: dist.all_gather_into_tensor(whole, piece))))
    grads = torch.ones(2 * n)
    rows.append(("reduce_scatter_tensor (AVG)", piece.nbytes,
                 extra_mib(lambda: dist.reduce_scatter_tensor(piece, grads, op=dist.ReduceOp.AVG))))
    del grads

    def broadcasts():
        works = [dist.broadcast(whole.narrow(0, r * n, n), src=r, async_op=True) for r in range(2)]
        for w in works:
            w.wait()

    rows.append(("broadcast of each rank's rows, in place", whole.nbytes, extra_mib(broadcasts)))
    if rank == 0:
        print(f"torch {torch.__version__}, Gloo, 2 ranks, N = {n} floats")
        print("| collective | bytes of its output | extra resident MiB (rank 0) |\n|---|---|---|")
        for name, nbytes, mib in rows:
            print(f"| {name} | {nbytes:,} | {mib:.0f} |")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=50_000_000, help="N: floats of each rank's piece")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(port, args.numel), nprocs=2)


if __name__ == "__main__":
    main()
