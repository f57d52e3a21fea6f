"""Where a bootstrapping spends its GPU time: per phase and per kernel.

Keys for full-slot bootstrapping only (no power-of-two user rotations), one warm-up call
(encodes the DFT diagonals), then for each phase a torch.profiler run of one eager call:
device time per kernel label (count, total), the phase's summed kernel time and its eager
wall time; and the whole bootstrapping's CUDA-graph median. Also the memory of exactly
the keys full-slot bootstrapping needs.

    python scripts/bts_profile.py --preset n16-bts40 --json out/bts_profile.json

--ncu-window: only one eager bootstrapping between cudaProfilerStart/Stop, for Nsight
Compute's bytes counters (ncu --profile-from-start off ...; scripts/gpu_check.sh bytes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import bts as bts_bench  # noqa: E402
from benchmarks import common  # noqa: E402
from scripts.ks_bench import kernel_label  # noqa: E402


def kernels(fn, device) -> tuple:
    """({label: [count, device us]}, summed device us) of one call of fn."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(device)
    table = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if "CUDA" not in str(getattr(e, "device_type", "")):
            continue
        t = table[kernel_label(e.name)]
        t[0] += 1
        t[1] += getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
    return dict(table), sum(v[1] for v in table.values())


def report_phases(phases: dict, device, top: int) -> dict:
    """{phase: {eager_us, kernel_us, kernels}} of one warm call each (kernels on CUDA only), printed: the
    phase's summed kernel time, its eager wall time and its `top` kernels."""
    out = {}
    for name, fn in phases.items():
        fn()
        eager = common.time_eager(fn, device, 3, 1)["median_us"]
        table, total = kernels(fn, device) if device.type == "cuda" else ({}, 0.0)
        out[name] = {"eager_us": eager, "kernel_us": total, "kernels": table}
        print(f"\n== {name}: kernels {total / 1e3:.2f} ms (eager wall {eager / 1e3:.2f} ms), "
              f"{sum(c for c, _ in table.values())} launches", flush=True)
        for label, (c, t) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"   {t / 1e3:8.2f} ms  {c:5d} x {t / max(c, 1):8.1f} us  {label}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="n16-bts40")
    ap.add_argument("--json", default=None)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--ncu-window", action="store_true")
    args = ap.parse_args()
    import fhetorch as fhe

    device = torch.device("cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params, cfg = bts_bench._params(args.preset)
        ctx = fhe.ckks.Context(params=params, device=device, bootstrap=cfg)
    ctx.keygen(bootstrap=True, power_of_two_rotations=False)
    out = {"preset": args.preset, "key_bytes_full_slot_bts": ctx.key_bytes(), "rotation_keys": len(ctx.galois_keys),
           "commit": common.git_commit(), "device": common.device_name(device)}
    print(f"keys of full-slot bootstrapping: {out['key_bytes_full_slot_bts'] / 2**30:.2f} GiB "
          f"({out['rotation_keys']} rotation keys incl. conjugation)", flush=True)
    bt = ctx.bootstrapper
    v = torch.randn(ctx.slots, dtype=torch.complex128, generator=torch.Generator().manual_seed(1)) * 0.5
    ct = ctx.encrypt_vector(v.to(device), level=0, slots=ctx.slots)
    bt.bootstrap(ct)
    if args.ncu_window:
        torch.cuda.synchronize(device)
        torch.cuda.profiler.start()
        bt.bootstrap(ct)
        torch.cuda.synchronize(device)
        torch.cuda.profiler.stop()
        return
    g = common.time_graph(lambda: bt.bootstrap(ct).data, device, 5, 1)
    out["graph_median_us"] = g["median_us"]
    print(f"bootstrap full, graph median {g['median_us'] / 1e3:.2f} ms", flush=True)
    common.release(device)

    x0 = bt._prepare(ct)
    raised = bt.mod_raise(bt._scale_up(x0))
    re, im = bt.coeff_to_slot(raised)
    em = bt.eval_mod_parts(re, im)
    phases = {"ModRaise": lambda: bt.mod_raise(bt._scale_up(x0)),
              "CoeffToSlot": lambda: bt.coeff_to_slot(raised),
              "EvalMod x2": lambda: bt.eval_mod_parts(re, im),
              "SlotToCoeff": lambda: bt.slot_to_coeff(em, ctx.slots),
              "whole": lambda: bt.bootstrap(ct)}
    out["phases"] = report_phases(phases, device, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
