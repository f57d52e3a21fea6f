"""Where a scheme switch spends its GPU time: per phase and per kernel, for one switch of M values.

ReLU over [-1, 1] at n16-bts40 with its default TFHE set (the switch ResNet-20's relu="lut" makes, values
at grid points), one warm-up call, then for each phase (to_lwe, pbs, pack: the LWE packing alone,
to_ckks: the packing, the key switch back, ModRaise, CoeffToSlot, EvalMod, rotations) a torch.profiler run
of one eager call: device time per kernel label (count, total) and the phase's summed kernel time.

    python scripts/switch_profile.py --values 16384 --json out/switch_profile.json
    python scripts/switch_profile.py --device cpu --preset toy-n13-bts --values 64   (eager times only)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from scripts.bts_profile import kernels  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="n16-bts40")
    ap.add_argument("--values", type=int, default=16384)
    ap.add_argument("--json", default=None)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--device", default="cuda", help="cuda; cpu (eager times only, e.g. with --preset toy-n13-bts)")
    args = ap.parse_args()
    import fhetorch as fhe
    from fhetorch._tfhe import glwe
    from fhetorch.circuits import switching as sw

    device = torch.device(args.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = fhe.ckks.Context(args.preset, device)
        ctx.keygen(lut=True)
    s = ctx.switcher
    bits, m = s.default_bits, min(args.values, ctx.slots)
    pts = sw.grid_points((-1.0, 1.0), bits)
    ct = ctx.encrypt(pts[torch.randint(0, 1 << bits, (m,))].to(device)).ciphertext
    table = [torch.relu(pts)]
    lwe = s.to_lwe(ct, (-1.0, 1.0), bits)
    outs, scales = s.apply_luts(lwe, table, bits)
    nt = ctx.params.n // s.keys.stride
    _, groups, _, stride, count = s.geometry(m, device)
    leaves = lwe.new_zeros(groups.numel(), count, nt + 1)
    phases = {"to_lwe": lambda: s.to_lwe(ct, (-1.0, 1.0), bits), "pbs": lambda: s.apply_luts(lwe, table, bits),
              "pack": lambda: glwe.pack_lwe_ciphertexts(s.keys.tfhe.ring, s.keys.packing, leaves, stride),
              "to_ckks": lambda: s.to_ckks(outs[0], scales[0])}
    out = {"preset": args.preset, "values": m, "bits": bits, "tfhe": s.params.name, "groups": int(groups.numel()),
           "leaves": count, "stride": stride, "one_kernel_bytes": glwe.FUSED_KEYSWITCH_BYTES,
           "commit": common.git_commit(), "device": common.device_name(device), "phases": {}}
    print(f"{args.preset}, {m} values, {bits}-bit grid ({s.params.name}); packing: {out['groups']} groups of "
          f"{count} leaves, stride {stride}; one-kernel GLWE key switch: {glwe.FUSED_KEYSWITCH_BYTES > 0}", flush=True)
    for name, fn in phases.items():
        fn()
        eager = common.time_eager(fn, device, 3, 1)["median_us"]
        table_k, total = kernels(fn, device) if device.type == "cuda" else ({}, 0.0)
        out["phases"][name] = {"eager_us": eager, "kernel_us": total, "kernels": table_k}
        print(f"\n== {name}: kernels {total / 1e3:.2f} ms (eager wall {eager / 1e3:.2f} ms), "
              f"{sum(c for c, _ in table_k.values())} launches", flush=True)
        for label, (c, t) in sorted(table_k.items(), key=lambda kv: -kv[1][1])[: args.top]:
            print(f"   {t / 1e3:8.2f} ms  {c:5d} x {t / max(c, 1):8.1f} us  {label}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
