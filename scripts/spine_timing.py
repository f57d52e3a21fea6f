"""A polynomial spine's sum of products, two ways in one call: `mul_sum` (the tensor products summed
in one pass, `_ops.tensor_product` of a list) against the composition it replaced (one
tensor_product launch per pair, then a lincomb), each followed by the same relinearisation and
rescale. Graph-replay medians (CUDA) or perf_counter (CPU), per level and number of products, at
batch 2 (EvalMod's real and imaginary parts); the two results are checked equal bit for bit.

    python scripts/spine_timing.py --preset n16-bts40 --levels 23 17 --products 2 3 --repeat 20
    python scripts/spine_timing.py --preset toy-n13-bts --levels 10 --products 2 --repeat 3   # CPU
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

import fhetorch as fhe  # noqa: E402
from fhetorch import _ops  # noqa: E402
from fhetorch._ckks import evaluator as ev  # noqa: E402


def composed(ctx, pairs):
    """mul_sum as it was: a tensor_product launch per pair, a lincomb, then the same key switch."""
    a0, b0 = pairs[0]
    b = ctx.basis(a0.level)
    d = [_ops.tensor_product(x.data, y.data, b.mod) for x, y in pairs]
    d = _ops.lincomb(d, b.scalar_table([1] * len(d)), b.mod)
    return ev._relinearize_rescale(ctx, a0, a0.scale * b0.scale, d.select(-3, 2), addend=d.narrow(-3, 0, 2))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="n16-bts40")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--levels", type=int, nargs="+", default=[23, 21, 19, 17])
    p.add_argument("--products", type=int, nargs="+", default=[2, 3])
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    print(f"spine timing | {args.preset} | {common.environment(device)['device']} | batch 2", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context(args.preset, device).keygen()
    slots = ctx.slots
    timer = common.time_graph if device.type == "cuda" else common.time_eager
    print(f"{'level':>5} {'products':>8} {'one pass us':>12} {'composed us':>12} {'saved us':>9}")
    for level in args.levels:
        for t in args.products:
            cts = [ctx.encrypt(torch.rand(2, slots, dtype=torch.float64, device=device) * 2 - 1, level=level).ciphertext
                   for _ in range(2 * t)]
            pairs = [(cts[2 * i], cts[2 * i + 1]) for i in range(t)]
            one, two = ev.mul_sum(ctx, pairs), composed(ctx, pairs)
            assert torch.equal(one.data, two.data), "the one-pass sum differs from the composition"
            a = timer(lambda: ev.mul_sum(ctx, pairs), device, args.repeat, 2)["median_us"]
            b = timer(lambda: composed(ctx, pairs), device, args.repeat, 2)["median_us"]
            print(f"{level:>5} {t:>8} {a:>12.1f} {b:>12.1f} {b - a:>9.1f}", flush=True)
            del cts, pairs, one, two
            common.release(device)


if __name__ == "__main__":
    main()
