"""PyTorch gloo all-reduce, timed like tests/bench/bench_allreduce.c for a side-by-side table.

Run as W processes with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT);
init_method env://. Rank 0 prints, per size, after one warm-up and N iterations each started
after a barrier:
  gloo W=4 bytes=16777216 best_ms=... median_ms=... busbw_best=... busbw_median=...
Usage: gloo_allreduce.py MIN_MIB MAX_MIB FACTOR ITERS
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    min_mib, max_mib, factor, iters = (int(a) for a in sys.argv[1:5])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, w = dist.get_rank(), dist.get_world_size()
    b = min_mib << 20
    while b <= max_mib << 20:
        x = torch.arange(b // 4, dtype=torch.float32).remainder_(1000).mul_(0.001)
        times = []
        for it in range(-1, iters):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)  # SUM: gloo has no AVG; the ring also scales, so this favours gloo
            dt = time.perf_counter() - t0
            if it >= 0:
                times.append(dt)
        if rank == 0:
            times.sort()
            best, med = times[0], times[len(times) // 2]
            f = 2.0 * (w - 1) / w / 1e9 * b
            print(f"gloo W={w} bytes={b} best_ms={best * 1e3:.3f} median_ms={med * 1e3:.3f} "
                  f"busbw_best={f / best:.3f} busbw_median={f / med:.3f}", flush=True)
        b *= factor
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    main()
