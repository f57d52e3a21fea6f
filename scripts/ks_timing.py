"""The LWE key switch alone (keyswitch_lwe_ciphertext) with both kernels, "tensor" (int8 digits x the
key's byte planes by torch._int_mm: tensor cores on CUDA) and "gemm" (the int64 GEMM kernel, op
tfhe_keyswitch), on a random key of a preset's shape (n_in = k N, n_out = n, the preset's KS gadget)
and random ciphertexts. One line per (method, batch): the median of CUDA-event timings (eager calls,
benchmarks.common.time_eager; CPU: perf_counter), per ciphertext and per second; with --graph also
as one replayed CUDA graph. The tensor method's three passes (digits, _int_mm, combine) are timed
apart on CUDA. Checks that both methods agree bit for bit at every batch.

    python scripts/ks_timing.py                                  # tfhe-4bit-p128, batches 1 1024 16384
    python scripts/ks_timing.py --preset tfhe-4bit --batches 1 132 1024 4096 16384 --graph
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fhetorch._ops as ops  # noqa: E402
from benchmarks import common  # noqa: E402
from fhetorch._tfhe import algorithms as alg  # noqa: E402
from fhetorch._tfhe.entities import LweKeyswitchKey  # noqa: E402
from fhetorch._tfhe.modular import Modulus  # noqa: E402
from fhetorch._tfhe.presets import preset  # noqa: E402
from fhetorch.errors import InsecureParametersWarning  # noqa: E402


def random_mod_q(gen, q: int, *shape) -> torch.Tensor:
    hi = torch.randint(0, 1 << 31, shape, generator=gen, dtype=torch.int64)
    lo = torch.randint(0, 1 << 31, shape, generator=gen, dtype=torch.int64)
    return ((hi << 31) + lo) % q


def phases(key, ct, mq, repeat: int) -> dict:
    """Median CUDA-event milliseconds of the tensor method's passes on the batch's first chunk (the
    whole batch where its int32 sums fit alg.KEYSWITCH_SUMS_BYTES), and the chunk's size."""
    planes = alg.keyswitch_byte_planes(key, mq)
    per_chunk = max(1, alg.KEYSWITCH_SUMS_BYTES // (4 * planes.shape[0]))
    chunks = (ct.shape[0] + per_chunk - 1) // per_chunk
    ct = ct[: ct.shape[0] // chunks]
    rows = max(ct.shape[0], alg.INT_MM_MIN_ROWS)
    digits = ops.tfhe_keyswitch_digits(ct, mq.moduli, key.base_log, key.level, rows)
    sums = torch._int_mm(digits, planes.t())
    fns = {"digits": lambda: ops.tfhe_keyswitch_digits(ct, mq.moduli, key.base_log, key.level, rows),
           "int_mm": lambda: torch._int_mm(digits, planes.t()),
           "combine": lambda: ops.tfhe_keyswitch_combine(sums, ct, mq.moduli)}
    out = {k: common.time_eager(f, ct.device, repeat, 2)["median_us"] / 1e3 for k, f in fns.items()}
    return out, ct.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tfhe-4bit-p128")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 1024, 16384])
    ap.add_argument("--methods", nargs="+", default=["tensor", "gemm"], choices=list(alg.KEYSWITCH_METHODS))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--graph", action="store_true", help="also time one replayed CUDA graph per call")
    args = ap.parse_args()
    device = torch.device(args.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = preset(args.preset)
    mq = Modulus(p.moduli)
    n_in, n_out, base_log, level = p.k * p.N, p.n, p.ks_base_log, p.ks_level
    gen = torch.Generator().manual_seed(1)
    ksk = random_mod_q(gen, mq.q, n_in, level, n_out + 1)
    data = torch.stack([ksk % q for q in p.moduli], -2).to(torch.int32).contiguous().to(device)
    key = LweKeyswitchKey(data, base_log, level)
    env = common.environment(device)
    print(f"ks_timing | {env['device']} | commit {env['commit']} | torch {env['torch']}")
    k8 = (n_in * level + 7) // 8 * 8
    print(f"{args.preset}: n_in {n_in}, n_out {n_out}, KS 2^{base_log} x {level}; method for this key: "
          f"{alg.keyswitch_method(key, 'tensor')} (sum bound 2^{alg.keyswitch_sum_bound(key).bit_length() - 1}); "
          f"per ciphertext {k8 * 8 * (n_out + 1) / 1e6:.1f} M int8 tensor MACs (gemm: "
          f"{n_in * level * 2 * (n_out + 1) / 1e6:.1f} M int64 multiply-adds); byte planes "
          f"{8 * (n_out + 1) * k8 / 2**20:.1f} MiB, key {data.nbytes / 2**20:.1f} MiB", flush=True)
    if "tensor" in args.methods:
        common.sync(device)
        t = common.time_eager(lambda: alg.keyswitch_byte_planes(LweKeyswitchKey(data, base_log, level), mq),
                              device, 1, 0)
        print(f"byte planes built in {t['median_us'] / 1e3:.1f} ms (once per key)", flush=True)
    for batch in args.batches:
        ct = random_mod_q(gen, mq.q, batch, n_in + 1).to(device)
        outs = {}
        for method in args.methods:
            fn = lambda m=method: alg.keyswitch_lwe_ciphertext(key, ct, mq, method=m)  # noqa: E731
            outs[method] = fn()
            repeat = args.repeat if device.type == "cuda" else max(1, min(args.repeat, 3))
            r = common.time_eager(fn, device, repeat, 2 if device.type == "cuda" else 0)
            line = (f"{method:<6} batch {batch:>6}  {r['median_us'] / 1e3:10.3f} ms  "
                    f"{r['median_us'] / batch:9.3f} us/ct  {batch / (r['median_us'] * 1e-6):12,.0f}/s")
            if args.graph and device.type == "cuda":
                g = common.time_graph(fn, device, repeat, 3)
                line += f"  | graph {g['median_us'] / 1e3:.3f} ms"
            if method == "tensor" and device.type == "cuda":
                ph, rows = phases(key, ct, mq, repeat)
                line += (f"  (chunk of {rows}: " + ", ".join(f"{k} {v:.3f}" for k, v in ph.items()) + " ms)")
            print(line, flush=True)
        if len(outs) == 2:
            same = torch.equal(*outs.values())
            print(f"       batch {batch:>6}  tensor == gemm: {same}", flush=True)
            if not same:
                raise SystemExit("the two key switches differ")
        del ct, outs
        common.release(device)


if __name__ == "__main__":
    main()
