"""HELR suite: encrypted logistic-regression training (models/helr.py) at the paper's size.

MNIST-shaped random data (1024 samples x 196 features + bias, padded to 256: 8 ciphertexts of
2^15 slots; labels from a random hyperplane), the degree-3 sigmoid, NAG; weights bootstrapped
as one complex ciphertext (bootstrap_pair) when an iteration would not fit. Per iteration:
CUDA-event time of each eager step (bootstraps included where they fall), their median and
mean over the steady state (the last half), and the lock-step error against the plaintext run
of the same algorithm. On CUDA the gradient part of an iteration is graph-replayed.
--quick: toy-n13-bts, 128 x 64 on CPU.
"""
from __future__ import annotations

import time
import warnings

import torch

from . import common

ANCHORS = {"cheddar_h100pcie_ms_per_it": 40.7, "theodosian_ms_per_it": 26.5, "target_ms_per_it": 40.0}


def _data(n, d, gen):
    x = torch.rand(n, d, generator=gen, dtype=torch.float64)
    x = torch.cat([x, torch.ones(n, 1, dtype=torch.float64)], dim=1)
    h = torch.randn(d + 1, generator=gen, dtype=torch.float64)
    s = x @ h
    y = torch.where(s > s.median(), 1.0, -1.0).to(torch.float64)
    return x, y


def run(args, device: torch.device) -> dict:
    import fhetorch as fhe
    from models.helr import EncryptedHELR, HELRConfig, PlainHELR, accuracy

    preset = "toy-n13-bts" if args.quick else (args.shapes[0] if args.shapes and args.shapes[0].startswith("n16")
                                                 else "n16-bts40")
    n, d = (128, 63) if args.quick else (1024, 196)
    iters = 4 if args.quick else 16
    doc = {"suite": "helr", **common.environment(device), "anchors": ANCHORS, "preset": preset,
           "samples": n, "features": d + 1, "iterations": iters}
    print(f"suite helr | device {doc['device']} | commit {doc['commit']} | {doc['date']} | {preset}, {n} x {d + 1}")
    gen = torch.Generator().manual_seed(1)
    x, y = _data(n, d, gen)
    z = x * y[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = fhe.Context(preset, device)
    t0 = time.perf_counter()
    EncryptedHELR.keygen(ctx, *z.shape)
    common.sync(device)
    doc["keygen_s"] = time.perf_counter() - t0
    doc["key_bytes"] = ctx.key_bytes()
    cfg = HELRConfig(iterations=iters)
    enc, plain = EncryptedHELR(ctx, z, cfg), PlainHELR(z, cfg, ctx.slots)
    doc["ciphertexts"] = enc.z.count
    rows = []
    for t in range(iters):
        b0 = enc.bootstraps
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            enc.step()
            e.record()
            torch.cuda.synchronize(device)
            ms = s.elapsed_time(e)
        else:
            t1 = time.perf_counter()
            enc.step()
            ms = (time.perf_counter() - t1) * 1e3
        plain.step()
        we, wp = enc.weights(), plain.weights()
        row = {"iteration": t, "ms": ms, "bootstrapped": enc.bootstraps - b0, "level": enc.w.level,
               "max_err": float((we - wp).abs().max()), "acc_enc": accuracy(we, x, y), "acc_plain": accuracy(wp, x, y)}
        rows.append(row)
        print(f"  it {t:2d}: {ms:8.1f} ms  bootstraps {row['bootstrapped']}  level {row['level']:2d}  "
              f"|w - w_plain| {row['max_err']:.2e}  train acc {row['acc_enc']:.3f} (plain {row['acc_plain']:.3f})")
    # steady state: the last half, after every level of the bootstrapping cycle has had its
    # first call (encodings; on CUDA the graph capture of the gradient at that level)
    steady = [r["ms"] for r in rows[iters // 2:]]
    doc["results"] = rows
    doc["median_ms"] = common.summarize([m * 1e3 for m in steady])["median_us"] / 1e3
    doc["mean_ms"] = sum(steady) / len(steady)
    doc["bootstraps"] = enc.bootstraps
    doc["graphs"] = bool(enc.graphs.enabled)
    print(f"\nper iteration (iterations {iters // 2}..{iters - 1}, steady state): median {doc['median_ms']:.1f} ms, "
          f"mean {doc['mean_ms']:.1f} ms (bootstraps amortised; {enc.bootstraps} in {iters} iterations; gradient "
          f"{'graph-replayed' if enc.graphs.enabled else 'eager'}); {enc.z.count} ciphertexts; keys "
          f"{doc['key_bytes'] / 2**30:.2f} GiB; anchors: Cheddar 40.7 ms/it (H100 PCIe), Theodosian 26.5, target 40")
    return doc
