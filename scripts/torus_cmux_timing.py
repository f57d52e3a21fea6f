"""Timing of one CMux on the 2^64 torus with the f64 FFT product (ops tfhe_torus_cmux; docs/tfhe.md,
"Ring product on the 2^64 torus by f64 FFT"): a batch of GLWEs through one GGSW, CUDA events,
median of repeats. The blind rotation is n such steps, so n x the step time bounds a PBS built on
this kernel from below (before the fused, shared-memory form).

    python scripts/torus_cmux_timing.py [--n 2048] [--k 1] [--base-log 23] [--level 1] [--batches 1,1024,16384]
"""
import argparse
import statistics

import torch

import fhetorch._ops as ops
from fhetorch._tfhe import fft


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--base-log", type=int, default=23)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--lwe-n", type=int, default=918, help="key bits of the PBS this step is part of")
    ap.add_argument("--batches", default="1,1024,16384")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    dev = torch.device("cuda")
    log_n = a.n.bit_length() - 1
    tw = fft.fft_twiddles(log_n, dev)
    k1 = a.k + 1
    ggsw = ops.tfhe_fft(torch.randint(-(1 << 63), (1 << 63) - 1, (k1, a.level, k1, a.n), dtype=torch.int64,
                                      device=dev), tw)
    print(f"torus CMux, N {a.n}, k {a.k}, base_log {a.base_log}, level {a.level}; {torch.cuda.get_device_name()}")
    for b in (int(v) for v in a.batches.split(",")):
        c0 = torch.randint(-(1 << 63), (1 << 63) - 1, (b, k1, a.n), dtype=torch.int64, device=dev)
        c1 = torch.randint(-(1 << 63), (1 << 63) - 1, (b, k1, a.n), dtype=torch.int64, device=dev)
        for _ in range(3):
            ops.tfhe_torus_cmux(c0, c1, ggsw, tw, a.base_log, a.level)
        times = []
        for _ in range(a.repeat):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            ops.tfhe_torus_cmux(c0, c1, ggsw, tw, a.base_log, a.level)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        t = statistics.median(times)
        print(f"batch {b:6d}: {t * 1e6:9.1f} us per step, {t / b * 1e9:8.1f} ns per ciphertext; "
              f"x {a.lwe_n} steps: {b / (t * a.lwe_n):10.0f} PBS/s (blind rotation only)")


if __name__ == "__main__":
    main()
