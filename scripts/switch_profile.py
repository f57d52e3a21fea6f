"""Where a scheme switch spends its GPU time: per phase and per kernel, for one switch of M values.

ReLU over [-1, 1] at n16-bts40 with its default TFHE set (the switch ResNet-20's relu="lut" makes, values
at grid points), one warm-up call, then for each phase (to_lwe, pbs, pack: the LWE packing alone,
to_ckks: the packing, the key switch back, ModRaise, CoeffToSlot, EvalMod, rotations) a torch.profiler run
of one eager call: device time per kernel label (count, total) and the phase's summed kernel time
(benchmarks/switch.py's phases, scripts/bts_profile.py's report).

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
from benchmarks.switch import switch_phases  # noqa: E402
from scripts.bts_profile import report_phases  # noqa: E402


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
    _, groups, _, stride, count = s.geometry(m, device)
    out = {"preset": args.preset, "values": m, "bits": bits, "tfhe": s.params.name, "groups": int(groups.numel()),
           "leaves": count, "stride": stride, "packing": list(s.keys.config.packing),
           "one_kernel_bytes": glwe.FUSED_KEYSWITCH_BYTES, "commit": common.git_commit(),
           "device": common.device_name(device)}
    print(f"{args.preset}, {m} values, {bits}-bit grid ({s.params.name}); packing: {out['groups']} groups of "
          f"{count} leaves, stride {stride}, decomposition {s.keys.config.packing}; one-kernel GLWE key switch: "
          f"{glwe.FUSED_KEYSWITCH_BYTES > 0}", flush=True)
    out["phases"] = report_phases(switch_phases(ctx, ct, bits), device, args.top)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
