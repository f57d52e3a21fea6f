"""Key-switching benchmark: HMult / HRot / Rescale at N = 2^16 on the fused ops, CUDA-graph
replay medians of benchmarks/ops.py's ops and a per-kernel breakdown of HMult+rescale and
HRot (torch.profiler, eager calls, device time per call). Prints a table; --json writes it all.

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

OPS = ["hmult", "hmult_rescale", "hrot", "rescale"]


def kernel_label(name: str) -> str:
    name = re.sub(r"fhetorch::cuda::(ntt_detail::|\(anonymous namespace\)::)?", "", name)
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
    ctx, a, b, va, vb = bops.make_operands(params, device)
    torch.cuda.synchronize()
    res["setup_s"] = round(time.perf_counter() - t0, 2)
    res.update(bops._check(ctx, a, b, va, vb))
    for op in OPS:
        fn = bops.make_op(ctx, op, a, b)
        common.release(device)
        try:
            r = common.time_graph(fn, device, repeat, warmup)
            res[op] = r["median_us"]
            res[f"{op}/p10_p90"] = (r.get("p10_us"), r.get("p90_us"))
        except Exception as e:  # noqa: BLE001
            res[op] = None
            res[f"{op}/error"] = common.error_text(e, 400)
    if do_profile:
        for op in ("hmult_rescale", "hrot"):
            try:
                res[f"profile/{op}"] = profile(bops.make_op(ctx, op, a, b))
            except Exception as e:  # noqa: BLE001
                res[f"profile/{op}"] = {"error": common.error_text(e, 400)}
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
              f"precision: "
              f"{ {k: v for k, v in r.items() if 'precision' in k or 'check_error' in k} }", flush=True)
        for op in OPS:
            v = r.get(op)
            print(f"   {op:<14} " + (f"{v:9.1f} us" if v is not None else "      n/a") + f"  {r.get(f'{op}/error', '')[:120]}",
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


if __name__ == "__main__":
    main()
