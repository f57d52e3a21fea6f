"""Radix-integer circuits of fhe.tfhe: add, compare (lt) and multiply of batch-1 unsigned
integers of 8, 16 and 32 bits, with each circuit's waves and PBS count.

`run(args, device)` is the hook of `python -m benchmarks --suite tfhe`.
`measure_circuits(ctx, bits=(8, 16, 32), repeats=...)` returns one row per (op, bits): median
and spread in microseconds (benchmarks.common.time_eager: CUDA events on CUDA, perf_counter on
CPU; every sample starts from an idle GPU), waves, PBS and PBS per wave. ctx: a keyed
fhe.tfhe.Context whose bits are split into message and carry (e.g. radix_context("tfhe-4bit"),
TFHE-rs's MESSAGE_2_CARRY_2 reading of the 4-bit preset). The first call of each circuit
traces it (untimed warmup).

    python -m benchmarks.tfhe_circuits [--preset toy-tfhe-4bit] [--bits 8] [--repeat 1]
"""
from __future__ import annotations

import argparse
import random

import torch

import fhetorch as fhe
from fhetorch._tfhe import radix

from . import common

# op -> (the circuit, the plaintext result)
OPS = {
    "add": (radix.ADD, lambda x, y, m: (x + y) % m),
    "lt": (radix.COMPARE["lt"], lambda x, y, m: int(x < y)),
    "mul": (radix.MUL, lambda x, y, m: x * y % m),
}


def radix_context(preset: str = "tfhe-4bit", device="cuda", message_bits: int = 2):
    """A keyed context of preset read as message_bits of message + the rest carry."""
    return fhe.tfhe.Context(preset, device, message_bits=message_bits).keygen()


def measure_circuits(ctx, bits=(8, 16, 32), repeats: int | None = None, warmup: int | None = None,
                     ops=tuple(OPS), check: bool = True) -> list:
    """Rows {op, bits, median_us, min_us, p10_us, p90_us, repeats, waves, pbs, pbs_per_wave} for
    every op of `ops` at every width of `bits`, batch 1. check: decrypt the first result and
    compare with Python integers (needs the secret key). Raises AssertionError on a wrong result,
    and what the circuits raise (fhetorch/_tfhe/radix.py)."""
    device = torch.device(ctx.device)
    repeats = repeats or (20 if device.type == "cuda" else 1)
    warmup = warmup or (3 if device.type == "cuda" else 1)
    rows = []
    for b in bits:
        x, y = random.randrange(1 << b), random.randrange(1 << b)
        a, c = ctx.encrypt_int(torch.tensor([x]), b), ctx.encrypt_int(torch.tensor([y]), b)
        for op in ops:
            circ, plain = OPS[op]
            out = circ(a, c)  # traces the circuit
            if check:
                got = ctx.decrypt_int(out) if isinstance(out, fhe.tfhe.RadixTensor) else ctx.decrypt(out)
                assert got.item() == plain(x, y, 1 << b), (op, b, x, y, got.item())
            t = common.time_eager(lambda: circ(a, c), device, repeats, max(warmup - 1, 0))
            s = circ.plan(a, c).stats
            rows.append(dict(op=op, bits=b, **{k: t[k] for k in ("median_us", "min_us", "p10_us", "p90_us", "repeats")},
                             waves=s["waves"], pbs=s["pbs"], pbs_per_wave=s["pbs_per_wave"]))
    return rows


def print_rows(rows):
    for r in rows:
        print(f"{r['op']:>4} {r['bits']:>2}-bit  {r['median_us'] / 1e3:10.2f} ms  waves {r['waves']:>2}  "
              f"PBS {r['pbs']:>4}  per wave {r['pbs_per_wave']}")


def run(args, device) -> dict:
    """The hook of `python -m benchmarks --suite tfhe`: tfhe-4bit read as 2+2 bits, 8/16/32-bit
    add, lt and mul on CUDA; toy-tfhe-4bit, 8 bits with --quick or on a CPU."""
    quick = args.quick or torch.device(device).type != "cuda"
    preset, bits = ("toy-tfhe-4bit", (8,)) if quick else ("tfhe-4bit", (8, 16, 32))
    print(f"\n== radix circuits: {preset} read as 2 message + 2 carry bits, batch 1, {', '.join(map(str, bits))} bits")
    rows = measure_circuits(radix_context(preset, device), bits)
    print_rows(rows)
    return dict(preset=preset, message_bits=2, rows=rows)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.tfhe_circuits")
    p.add_argument("--preset", default="toy-tfhe-4bit")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bits", default="8", help="comma list (default 8)")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--repeat", type=int, default=None)
    args = p.parse_args(argv)
    ctx = radix_context(args.preset, args.device)
    rows = measure_circuits(ctx, tuple(int(b) for b in args.bits.split(",")), args.repeat,
                            ops=tuple(args.ops.split(",")))
    print_rows(rows)


if __name__ == "__main__":
    main()
