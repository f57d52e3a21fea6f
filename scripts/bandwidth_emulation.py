"""How HMult / HRot at 48 x 12 slow down when DRAM bandwidth is taken away: an H100 estimate
on an H200 (issue 14's targets are H100 figures; the two are the same GH100 die, 132 SMs at the
same clocks, and differ in memory: 3.35 against 4.8 TB/s).

A "hog" kernel runs on B SMs beside the operation's CUDA-graph replays: one 1024-thread block an
SM with all 227 KiB of its shared memory, so nothing else shares the SM. In mode "mem" it streams
through a 4 GiB buffer (evict-first loads) and takes bandwidth; in mode "alu" it does integer
work and takes only the SMs. The pair isolates the bandwidth: t(mem, B) / t(alu, B) is the
slowdown from the bandwidth the hog took while the operation ran (the hog counts its bytes).
Caveats: the hog's loads also pass through L2 and evict some of the operation's lines (which
an H100 would keep: the estimate leans high), and at 132 - B SMs the operation is a little less
memory-bound than on all 132 (it leans low).

    python scripts/bandwidth_emulation.py --blocks 0 12 24 36 --json out/bw.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import ops as bops  # noqa: E402

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Runs until *stop is set, or for at most max_ns (a guard: the flag is the way it ends).
__global__ void __launch_bounds__(1024, 1) hog(const int4* __restrict__ buf, long long n_vec, int mode,
                                               volatile int* stop, unsigned long long* bytes, int* sink,
                                               unsigned long long max_ns) {
  extern __shared__ int smem[];
  const unsigned long long deadline = now_ns() + max_ns;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long step = (long long)gridDim.x * blockDim.x;
  int acc = threadIdx.x;
  unsigned long long loads = 0;
  while (true) {
    if (mode == 0) {
#pragma unroll 8
      for (int k = 0; k < 64; ++k) {
        int4 v = __ldcs(buf + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
        i += step;
        if (i >= n_vec) i -= n_vec;
      }
      loads += 64;
    } else {
#pragma unroll 8
      for (int k = 0; k < 64; ++k) acc = acc * 1664525 + 1013904223;
    }
    if (*stop || now_ns() > deadline) break;
  }
  smem[threadIdx.x] = acc;
  __syncthreads();
  if (smem[(threadIdx.x + 1) % blockDim.x] == 0x7fffffff) sink[0] = 1;  // keeps acc alive
  atomicAdd(bytes, loads * 16ull);
}

void launch_hog(torch::Tensor buf, int64_t blocks, int64_t mode, torch::Tensor stop, torch::Tensor bytes,
                torch::Tensor sink) {
  const int smem = 227 * 1024;  // the whole of an SM's shared memory: no other block fits beside it
  cudaFuncSetAttribute(hog, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  auto stream = at::cuda::getCurrentCUDAStream();
  hog<<<blocks, 1024, smem, stream>>>(reinterpret_cast<const int4*>(buf.data_ptr<int>()), buf.numel() / 4, (int)mode,
                                      stop.data_ptr<int>(), reinterpret_cast<unsigned long long*>(bytes.data_ptr<int64_t>()),
                                      sink.data_ptr<int>(), 2000000000ull);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
CPP = "void launch_hog(torch::Tensor buf, int64_t blocks, int64_t mode, torch::Tensor stop, torch::Tensor bytes, " \
      "torch::Tensor sink);"


def run(fn, ext, blocks: int, mode: int, repeat: int, buf, device) -> dict:
    """Median us of `repeat` graph replays of fn with the hog on `blocks` SMs, and the hog's GB/s."""
    g = torch.cuda.CUDAGraph()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        fn()
    stop = torch.zeros(1, dtype=torch.int32, device=device)
    nbytes = torch.zeros(1, dtype=torch.int64, device=device)
    sink = torch.zeros(1, dtype=torch.int32, device=device)
    hog_stream, main = torch.cuda.Stream(device), torch.cuda.current_stream(device)
    h0, h1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    torch.cuda.synchronize()
    if blocks:
        with torch.cuda.stream(hog_stream):
            h0.record(hog_stream)
            ext.launch_hog(buf, blocks, mode, stop, nbytes, sink)
            h1.record(hog_stream)
    for _ in range(5):
        g.replay()
    for i in range(repeat):
        starts[i].record(main)
        g.replay()
        ends[i].record(main)
    stop.fill_(1)  # on the main stream, after the last replay: the hog sees it and ends
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    out = {"median_us": round(statistics.median(times), 1)}
    if blocks:
        out["hog_ms"] = round(h0.elapsed_time(h1), 2)  # ~2000: the stop flag was not seen (the guard ended it)
    if blocks and mode == 0:
        out["hog_gbs"] = round(nbytes.item() / (h0.elapsed_time(h1) * 1e-3) / 1e9, 1)
    g.reset()
    return out


def hog_alone(ext, blocks: int, buf, device, ms: float = 20.0) -> float:
    """GB/s the memory hog reads on `blocks` SMs with nothing beside it."""
    stop = torch.zeros(1, dtype=torch.int32, device=device)
    nbytes = torch.zeros(1, dtype=torch.int64, device=device)
    sink = torch.zeros(1, dtype=torch.int32, device=device)
    h0, h1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    side = torch.cuda.Stream(device)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        h0.record(side)
        ext.launch_hog(buf, blocks, 0, stop, nbytes, sink)
        h1.record(side)
    torch.cuda._sleep(int(ms * 2e6))  # ~ms at ~2 GHz on the main stream, then stop
    stop.fill_(1)
    torch.cuda.synchronize()
    print(f"hog alone on {blocks} SMs: {h0.elapsed_time(h1):.1f} ms", flush=True)
    return round(nbytes.item() / (h0.elapsed_time(h1) * 1e-3) / 1e9, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[0, 12, 24, 36, 48])
    ap.add_argument("--ops", nargs="+", default=["hmult", "hrot"])
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch.device("cuda")
    env = common.environment(device)
    print(f"bandwidth_emulation | {env['device']} | commit {env['commit']}", flush=True)
    ext = load_inline("fhetorch_bw_hog", CPP, cuda_sources=CUDA, functions=["launch_hog"],
                      extra_cuda_cflags=["-O3"], verbose=False)
    buf = torch.ones(2**30, dtype=torch.int32, device=device)  # 4 GiB: far beyond the L2
    ctx, a, b, _, _ = bops.make_operands(bops.build_params("48x12")[0], device)
    rows = []
    for blocks in args.blocks:
        row = {"blocks": blocks}
        if blocks:
            row["hog_alone_gbs"] = hog_alone(ext, blocks, buf, device)
        for op in args.ops:
            fn = bops.make_op(ctx, op, a, b)
            if blocks == 0:
                row[op] = run(fn, ext, 0, 0, args.repeat, buf, device)
                continue
            for mode, name in ((1, "alu"), (0, "mem")):
                row[f"{op}/{name}"] = run(fn, ext, blocks, mode, args.repeat, buf, device)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\nblocks  hog alone  " + "  ".join(f"{op}: alu / mem (hog GB/s) mem/alu" for op in args.ops))
    for r in rows:
        if not r["blocks"]:
            print("     0          -  " + "  ".join(f"{op}: {r[op]['median_us']:.1f}" for op in args.ops))
            continue
        cells = []
        for op in args.ops:
            alu, mem = r[f"{op}/alu"], r[f"{op}/mem"]
            cells.append(f"{op}: {alu['median_us']:.1f} / {mem['median_us']:.1f} ({mem['hog_gbs']:.0f}) "
                         f"{mem['median_us'] / alu['median_us']:.3f}")
        print(f"{r['blocks']:6d}  {r['hog_alone_gbs']:9.0f}  " + "  ".join(cells))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"suite": "bandwidth_emulation", **env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
