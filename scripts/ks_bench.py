"""Key-switching benchmark: HMult / HRot / Rescale at N = 2^16, fused ops against the unfused
compositions (fhetorch._rlwe.keyswitch.fused_ok patched to False), in one process; the fused
inner product in both CUDA variants (FHETORCH_KS_KERNEL=tiles / split).

For each shape: CUDA-graph replay medians of benchmarks/ops.py's ops, a bit-for-bit check
that fused and unfused results agree, and a per-kernel breakdown of HMult+rescale and HRot
(torch.profiler, eager calls, device time per call). Prints a table; --json writes it all.

    python scripts/ks_bench.py --shapes 48x12 24x12 preset --json out/ks_bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import ops as bops  # noqa: E402
from fhetorch._ckks.context import CKKSContext  # noqa: E402
from fhetorch._rlwe import keyswitch as ks  # noqa: E402

OPS = ["hmult", "hmult_rescale", "hrot", "rescale"]
_FUSED_OK = ks.fused_ok


MODES = ["unfused", "fused", "fused_split"]


def set_fused(on: bool, variant: str | None = None):
    """on: the fused ops; variant: FHETORCH_KS_KERNEL (tiles / split), None for the default."""
    ks.fused_ok = _FUSED_OK if on else (lambda ring: False)
    if variant is None:
        os.environ.pop("FHETORCH_KS_KERNEL", None)
    else:
        os.environ["FHETORCH_KS_KERNEL"] = variant


def set_mode(mode: str):
    set_fused(mode != "unfused", {"fused": "tiles", "fused_split": "split"}.get(mode))


def kernel_label(name: str) -> str:
    name = re.sub(r"fhetorch::cuda::(ks_detail::|ntt_detail::|\(anonymous namespace\)::)?", "", name)
    m = re.search(r"program_kernel<(\w+)<([^>]*)", name)
    if m:
        return f"{m.group(1)}<{m.group(2).split(',')[0] if m.group(1) != 'Bconv' else m.group(2)}>"[:60]
    m = re.search(r"(\w+_kernel)\b(<[^>]*>)?", name)
    if m:
        return (m.group(1) + (m.group(2) or ""))[:60]
    return name[:60]


def profile(fn, iters: int = 10) -> dict:
    """{kernel label: (device us per call, launches per call)} over `iters` eager calls."""
    from torch.profiler import ProfilerActivity, profile as tprofile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    out = defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        dt = getattr(ev, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        t = getattr(ev, "device_time", None)
        if t is None:
            t = getattr(ev, "cuda_time", 0.0)
        lab = kernel_label(ev.name)
        out[lab][0] += t / iters
        out[lab][1] += 1
    return {k: (round(v[0], 1), v[1] / iters) for k, v in sorted(out.items(), key=lambda kv: -kv[1][0])}


def bench_shape(shape: str, device, repeat: int, warmup: int, do_profile: bool) -> dict:
    params, label = bops.build_params(shape)
    res = {"shape": shape, "label": label, "L": len(params.limbs(params.max_level)),
           "K": len(params.special_primes), "dnum": params.dnum}
    t0 = time.perf_counter()
    ctx = CKKSContext(params, device, seed=None)
    ctx.keygen(rotations=[1], power_of_two_rotations=False, conjugation=False)
    gen = torch.Generator().manual_seed(1)
    va, vb = bops._random_slots(params.slots, gen), bops._random_slots(params.slots, gen)
    a, b = ctx.encrypt_vector(va), ctx.encrypt_vector(vb)
    torch.cuda.synchronize()
    res["setup_s"] = round(time.perf_counter() - t0, 2)
    # bit-for-bit agreement of the two paths
    same = {}
    for op in OPS:
        fn = bops.make_op(ctx, op, a, b)
        outs = []
        for mode in MODES:
            set_mode(mode)
            outs.append(fn().data)
        set_fused(True)
        same[op] = all(bool(torch.equal(outs[0], o)) for o in outs[1:])
    res["fused_equals_unfused"] = same
    res.update(bops._check(ctx, a, b, va, vb))
    for mode in MODES:
        set_mode(mode)
        for op in OPS:
            fn = bops.make_op(ctx, op, a, b)
            common.release(device)
            try:
                r = common.time_graph(fn, device, repeat, warmup)
                res[f"{op}/{mode}"] = r["median_us"]
                res[f"{op}/{mode}/p10_p90"] = (r.get("p10_us"), r.get("p90_us"))
            except Exception as e:  # noqa: BLE001
                res[f"{op}/{mode}"] = None
                res[f"{op}/{mode}/error"] = common.error_text(e, 400)
        if do_profile:
            for op in ("hmult_rescale", "hrot"):
                try:
                    res[f"profile/{op}/{mode}"] = profile(bops.make_op(ctx, op, a, b))
                except Exception as e:  # noqa: BLE001
                    res[f"profile/{op}/{mode}"] = {"error": common.error_text(e, 400)}
    set_fused(True)
    del ctx, a, b
    common.release(device)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["48x12", "24x12", "preset"])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = torch.device("cuda")
    env = common.environment(device)
    print(f"ks_bench | {env['device']} | commit {env['commit']} | torch {env['torch']}", flush=True)
    results = []
    for shape in args.shapes:
        r = bench_shape(shape, device, args.repeat, args.warmup, not args.no_profile)
        results.append(r)
        print(f"\n== {shape} (L={r['L']}, K={r['K']}, dnum={r['dnum']}) setup {r['setup_s']} s; "
              f"fused == unfused: {r['fused_equals_unfused']}; precision: "
              f"{ {k: v for k, v in r.items() if 'precision' in k or 'check_error' in k} }", flush=True)
        for op in OPS:
            fmt = lambda v: f"{v:9.1f}" if v is not None else "     n/a "
            err = " ".join(r.get(f"{op}/{m}/error", "") for m in MODES).strip()
            print(f"   {op:<14} " + "  ".join(f"{m} {fmt(r.get(f'{op}/{m}'))} us" for m in MODES) + f"  {err[:120]}",
                  flush=True)
        for key in [k for k in r if k.startswith("profile/")]:
            prof = r[key]
            if "error" in prof:
                print(f"   {key}: {prof['error'][:200]}")
                continue
            total = sum(v[0] for v in prof.values())
            print(f"   {key}: {total:.1f} us of kernels per call")
            for lab, (us, n) in list(prof.items())[:14]:
                print(f"      {us:8.1f} us  x{n:<4g} {lab}")
    doc = {"suite": "ks_bench", **env, "results": results}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    print("\nsummary (graph medians, us; fused = MuKsAll inner product, fused_split = NTT + KsStream, the default):")
    print(f"{'shape':<8} {'op':<14} " + " ".join(f"{m:>11}" for m in MODES) + f" {'best x':>7}")
    for r in results:
        for op in OPS:
            vals = [r.get(f"{op}/{m}") for m in MODES]
            best = min((v for v in vals[1:] if v), default=None)
            sp = f"{vals[0] / best:6.2f}x" if vals[0] and best else "    n/a"
            print(f"{r['shape']:<8} {op:<14} " + " ".join(f"{'n/a' if v is None else round(v, 1)!s:>11}" for v in vals)
                  + f" {sp:>7}")


if __name__ == "__main__":
    main()
