"""Suite `distributed`: one GPU against N through fhetorch.distributed (issue 15). Run under torchrun:

    torchrun --nproc-per-node 2 -m benchmarks --suite distributed

Keys are made once, on rank 0, and the other ranks load them from one saved public context
(share_context; the time is reported). For each workload, first rank 0 alone (one GPU, the
others idle), then every rank, on the same ciphertexts; the N-GPU outputs are compared with the
one-GPU outputs bit for bit (they must be equal) and the speedup is one-GPU time / N-GPU time.

- `pbs`: one wave of 2^16 4-bit KS + PBS (tfhe-4bit-p128, the TFHE-rs anchor's set; --batches
  and --shapes override), the LUT m -> (3m + 1) mod 16: the inputs broadcast to every rank (a
  circuit's replicated state), tfhe.Context.distribute splits the wave r, r + p, ... and
  all-gathers the outputs (the N-GPU time includes the batch check and the all-gather). Also the
  one-GPU time of 1/N of the wave: the floor that perfect scaling would give. Median of --repeat
  CUDA-synchronised wall times.
- `helr`: models/helr.py at the paper's shape (1024 x 197, 8 ciphertexts, n16-bts40): the data's
  ciphertexts sharded, the gradient's partial sums all-reduced; ms per iteration, the mean over the
  second half of 16 iterations (they alternate with and without a bootstrap of the weights, so the
  mean is the rate; each level's CUDA graphs are captured by then), each iteration synchronised.

--quick: toy presets and sizes on CPU (gloo), seconds.
"""
from __future__ import annotations

import time
import warnings

import torch
import torch.distributed as dist

from . import common

ANCHORS = {"target_speedup_2gpu": 1.9}


def run(args, device: torch.device):
    import fhetorch as fhe

    device = fhe.distributed.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    doc = {"suite": "distributed", **common.environment(device), "ranks": size, "anchors": ANCHORS}
    if rank == 0:
        print(f"suite distributed | {size} ranks x {doc['device']} | commit {doc['commit']} | {doc['date']}")
    ops = args.ops or ["pbs", "helr"]
    with warnings.catch_warnings():  # the group is closed at exit by fhetorch.distributed
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        if "pbs" in ops:
            doc["pbs"] = _pbs(args, device, rank, size)
        if "helr" in ops:
            doc["helr"] = _helr(args, device, rank, size)
    return doc if rank == 0 else None


def _timed(fn, device, repeat: int) -> tuple:
    """(median seconds of `repeat` synchronised calls after one warm-up, the last output)."""
    out = fn()
    times = []
    for _ in range(repeat):
        common.sync(device)
        t0 = time.perf_counter()
        out = fn()
        common.sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], out


def _shared(fhe, make, rank):
    """The client context (made on rank 0) and every rank's server context from one saved file."""
    t0 = time.perf_counter()
    client = make() if rank == 0 else None
    keygen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    server = fhe.distributed.share_context(client)
    return client, server, keygen_s, time.perf_counter() - t0


def _pbs(args, device, rank, size) -> dict:
    import fhetorch as fhe

    preset = "toy-tfhe-4bit" if args.quick else next((s for s in args.shapes if s.startswith("tfhe")), "tfhe-4bit-p128")
    n = (args.batches or [64 if args.quick else 1 << 16])[0]
    repeat = args.repeat
    client, tctx, keygen_s, share_s = _shared(
        fhe, lambda: fhe.tfhe.Context(preset, device).keygen(), rank)
    lut = fhe.tfhe.LUT(lambda m: (3 * m + 1) % 16, bits=4)
    x = client.encrypt(torch.randint(0, 16, (n,))) if rank == 0 else None
    x = fhe.distributed.broadcast(x, tctx)
    row = {"preset": preset, "pbs": n, "keygen_s": keygen_s, "share_context_s": share_s, "repeat": repeat}
    if rank == 0:
        tctx.distribute(enable=False)
        row["one_gpu_s"], single = _timed(lambda: tctx.apply_lut(x, lut), device, repeat)
        part = x[: -(-n // size)]
        row["one_gpu_share_s"], _ = _timed(lambda: tctx.apply_lut(part, lut), device, repeat)
        ok = torch.equal(client.decrypt(single).cpu(), (3 * client.decrypt(x).cpu() + 1) % 16)
        row["one_gpu_correct"] = ok
    dist.barrier()
    tctx.distribute()
    row["n_gpu_s"], out = _timed(lambda: tctx.apply_lut(x, lut), device, repeat)
    if rank != 0:
        return {}
    row["equal_to_one_gpu"] = torch.equal(out.data, single.data)
    row["speedup"] = row["one_gpu_s"] / row["n_gpu_s"]
    row["pbs_per_s_one_gpu"], row["pbs_per_s_n_gpu"] = n / row["one_gpu_s"], n / row["n_gpu_s"]
    print(f"  pbs   {preset}: {n} KS + PBS | 1 GPU {row['one_gpu_s'] * 1e3:.1f} ms ({row['pbs_per_s_one_gpu']:,.0f}/s) | "
          f"{size} GPUs {row['n_gpu_s'] * 1e3:.1f} ms ({row['pbs_per_s_n_gpu']:,.0f}/s) | speedup {row['speedup']:.2f}x "
          f"(1/{size} of the wave on 1 GPU: {row['one_gpu_share_s'] * 1e3:.1f} ms) | equal to 1 GPU: "
          f"{row['equal_to_one_gpu']} | correct: {row['one_gpu_correct']} | keys {keygen_s:.1f} s, shared in "
          f"{share_s:.1f} s")
    return row


def _helr(args, device, rank, size) -> dict:
    import fhetorch as fhe
    from models.helr import EncryptedHELR, HELRConfig, PlainHELR

    preset = "toy-n13-bts" if args.quick else "n16-bts40"
    n, d = (128, 32) if args.quick else (1024, 196)
    iters = 4 if args.quick else 16
    gen = torch.Generator().manual_seed(1)
    x = torch.cat([torch.rand(n, d, generator=gen, dtype=torch.float64), torch.ones(n, 1, dtype=torch.float64)], 1)
    h = torch.randn(d + 1, generator=gen, dtype=torch.float64)
    s = x @ h
    z = x * torch.where(s > s.median(), 1.0, -1.0).to(torch.float64)[:, None]
    client, ctx, keygen_s, share_s = _shared(
        fhe, lambda: EncryptedHELR.keygen(fhe.Context(preset, device), *z.shape), rank)
    cfg = HELRConfig(iterations=iters)
    start = EncryptedHELR(client, z, cfg) if rank == 0 else None  # rank 0's ciphertexts, for both runs
    ez = fhe.distributed.broadcast(start.z if rank == 0 else None, ctx)
    w0 = fhe.distributed.broadcast(fhe.EncryptedTensor(client, start.w, (client.slots,)) if rank == 0 else None, ctx)
    v0 = fhe.distributed.broadcast(fhe.EncryptedTensor(client, start.v, (client.slots,)) if rank == 0 else None, ctx)
    row = {"preset": preset, "samples": n, "features": d + 1, "iterations": iters, "keygen_s": keygen_s,
           "share_context_s": share_s}

    def train(distributed: bool):
        enc = EncryptedHELR(ctx, ez, cfg, samples=n, weights=(w0, v0), distributed=distributed)
        ms = []
        for _ in range(iters):
            common.sync(device)
            t0 = time.perf_counter()
            enc.step()
            common.sync(device)
            ms.append((time.perf_counter() - t0) * 1e3)
        steady = ms[iters // 2:]  # iterations with and without a bootstrap alternate: the mean is the rate
        return sum(steady) / len(steady), enc, ms

    if rank == 0:
        row["one_gpu_ms"], single, row["one_gpu_ms_per_iteration"] = train(False)
    dist.barrier()
    row["n_gpu_ms"], enc, row["n_gpu_ms_per_iteration"] = train(True)
    if rank != 0:
        return {}
    plain = PlainHELR(z, cfg, client.slots)
    for _ in range(iters):
        plain.step()
    row["equal_to_one_gpu"] = torch.equal(enc.w.data, single.w.data) and torch.equal(enc.v.data, single.v.data)
    row["max_err_vs_plaintext"] = float((enc.weights() - plain.weights()).abs().max())
    row["ciphertexts"], row["per_rank"] = single.z.count, enc.z.count
    row["bootstraps"] = enc.bootstraps
    row["speedup"] = row["one_gpu_ms"] / row["n_gpu_ms"]
    print(f"  helr  {preset}: {n} x {d + 1}, {iters} iterations, {row['ciphertexts']} ciphertexts ({row['per_rank']} on "
          f"rank 0) | 1 GPU {row['one_gpu_ms']:.1f} ms/it | {size} GPUs {row['n_gpu_ms']:.1f} ms/it | speedup "
          f"{row['speedup']:.2f}x | equal to 1 GPU: {row['equal_to_one_gpu']} | |w - w_plain| "
          f"{row['max_err_vs_plaintext']:.1e} | keys {keygen_s:.1f} s, shared in {share_s:.1f} s")
    return row
