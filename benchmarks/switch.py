"""Suite `switch`: CKKS -> TFHE LUT -> CKKS round trips (fhetorch/circuits/switching).

For each CKKS preset of --shapes (default n16-bts40 with its default TFHE set, tfhe-4bit-p128;
toy-n13-bts with --quick or on a CPU; "n16-bts40:tfhe-6bit" names another TFHE set and
"n16-bts40:tfhe-8bit-p128:10" also the grid bits): keygen(lut=True) time and the switching keys'
bytes, then for each value count (default 2^10, 2^12, 2^15; --batches) a ReLU over [-1, 1] on
values at grid points, at the default grid (ctx.switcher.default_bits, one PBS per value) unless
the bits are given (up to max_bits: the full torus, two PBS per value):

- phases (CUDA events, GPU idle before each): `to_lwe` (x - lo, SlotToCoeff, the drop to level
  0, modulus switch, GLWE key switch s -> z(X^r), extraction), `pbs` (LWE key switch, centered
  modulus switch, blind rotation, extraction), `to_ckks` (LWE packing, key switch back, modulus
  switch, ModRaise, CoeffToSlot, EvalMod, the rotations of a sparse result), of which `pack`
  (the packing alone) is also timed; `total` = one `EncryptedTensor.lut` call;
- medians of --repeat calls (3 on CUDA by default: a 2^15 round trip is seconds) after one
  warm-up; the error against ReLU of the grid points, in bits;
- memory on CUDA: `resident_gib` (the keys and the row's inputs), `cache_gib` (what the phases made
  on first use and keep: diagonals, tables) and, per phase, `<phase>_extra_gib`, its temporaries at
  their peak above what was allocated before it (after a first call).

Anchor: Chameleon, 7.3 s for 1,024 slots on an A100 (../shared/papers/chameleon_scheme_switching.txt,
Table 7); targets on the H100: 2^15 values <= 2 s, 2^10 values <= 0.1 s.
"""
from __future__ import annotations

import math
import time
import warnings

import torch

from . import common

PRESETS = ["n16-bts40"]
QUICK_PRESETS = ["toy-n13-bts"]
COUNTS = [1 << 10, 1 << 12, 1 << 15]
QUICK_COUNTS = [64]
ANCHORS = {"chameleon_a100_s_1024": 7.3, "target_s_32768": 2.0, "target_s_1024": 0.1}
COLUMNS = [(k, k, spec, "l" if spec == "" else "r") for k, spec in
           (("preset", ""), ("values", ""), ("bits", ""), ("to_lwe_ms", ".1f"), ("pbs_ms", ".1f"), ("pack_ms", ".1f"),
            ("to_ckks_ms", ".1f"), ("total_ms", ".1f"), ("err_bits", ".1f"))]


def _median_ms(fn, device, repeat, warmup=1):
    return common.time_eager(fn, device, repeat, warmup)["median_us"] / 1e3


def switch_phases(ctx, ct, bits: int) -> dict:
    """{phase: a call of it} for a ReLU over [-1, 1] of ct's values: to_lwe, pbs, pack (the LWE packing
    alone, of zero leaves), to_ckks; their inputs made once here."""
    from fhetorch._tfhe import glwe
    from fhetorch.circuits import switching as sw

    s = ctx.switcher
    table = [torch.relu(sw.grid_points((-1.0, 1.0), bits))]
    lwe = s.to_lwe(ct, (-1.0, 1.0), bits)
    out, scales = s.apply_luts(lwe, table, bits)
    nt = ctx.params.n // s.keys.stride
    _, groups, _, stride, count = s.geometry(ct.slots, lwe.device)
    leaves = lwe.new_zeros(groups.numel(), count, nt + 1)
    return {"to_lwe": lambda: s.to_lwe(ct, (-1.0, 1.0), bits), "pbs": lambda: s.apply_luts(lwe, table, bits),
            "pack": lambda: glwe.pack_lwe_ciphertexts(s.keys.tfhe.ring, s.keys.packing, leaves, stride),
            "to_ckks": lambda: s.to_ckks(out[0], scales[0])}


def bench_preset(name: str, args, device, results: list) -> dict:
    import fhetorch as fhe
    from fhetorch.circuits import switching as sw

    preset, _, rest = name.partition(":")  # "n16-bts40:tfhe-6bit[:bits]": another TFHE set, a grid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = fhe.ckks.Context(preset, device)
        t0 = time.perf_counter()
        tfhe, _, grid = rest.partition(":")
        ctx.keygen(lut=tfhe or True)
        common.sync(device)
        keygen_s = time.perf_counter() - t0
    s = ctx.switcher
    bits = int(grid) if grid else s.default_bits
    info = {"tfhe": s.params.name, "bits": bits, "keygen_s": keygen_s, "switch_key_bytes": ctx.switch_keys.nbytes,
            "key_bytes": ctx.key_bytes(), "output_level": s.output_level,
            "grid_log2_p_fail": s.grid(bits)[1].log2_p_fail}
    print(f"{name}: TFHE {s.params.name}, grid {bits} bits (p_fail 2^{info['grid_log2_p_fail']:.1f}), keygen "
          f"{keygen_s:.1f} s, switching keys {ctx.switch_keys.nbytes / 2**20:.1f} MiB")
    counts = args.batches or (QUICK_COUNTS if args.quick or device.type != "cuda" else COUNTS)
    pts = sw.grid_points((-1.0, 1.0), bits)
    for m in counts:
        m = min(m, ctx.slots)
        idx = torch.randint(0, 1 << bits, (m,))
        x = pts[idx]
        ex = ctx.encrypt(x.to(device))
        phases = {**switch_phases(ctx, ex.ciphertext, bits), "total": lambda: ex.lut(torch.relu, bits=bits)}
        resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0  # keys and these inputs
        row = {"preset": name, "values": m, "bits": bits}
        for phase, fn in phases.items():
            if device.type == "cuda":  # the warm-up call makes what a phase caches (diagonals, tables) before the peak
                fn()
                torch.cuda.synchronize(device)
                base = torch.cuda.memory_allocated(device)
                torch.cuda.reset_peak_memory_stats(device)
            row[f"{phase}_ms"] = _median_ms(fn, device, args.repeat, warmup=0 if device.type == "cuda" else 1)
            if device.type == "cuda":  # the phase's temporaries at their peak, above what was allocated
                row[f"{phase}_extra_gib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**30
        if device.type == "cuda":
            row["cache_gib"] = (torch.cuda.memory_allocated(device) - resident) / 2**30
        got = ctx.decrypt(ex.lut(torch.relu, bits=bits)).cpu()
        err = float((got - torch.relu(x)).abs().max())
        row["max_err"] = err
        row["err_bits"] = -math.log2(err) if err > 0 else math.inf
        if device.type == "cuda":
            row["resident_gib"] = resident / 2**30
        results.append(row)
        print("   " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
        common.release(device)
    return info


def run(args, device: torch.device) -> dict:
    default = args.shapes in (["48x12", "24x12", "preset"], ["toy"])
    quick = args.quick or device.type != "cuda"
    presets = (QUICK_PRESETS if quick else PRESETS) if default else args.shapes
    if args.repeat == 50:  # the generic CUDA default is for microseconds; a round trip is seconds
        args.repeat = 3
    doc = {"suite": "switch", **common.environment(device), "anchors": ANCHORS}
    doc["config"] = {"repeat": args.repeat, "counts": args.batches, "function": "relu over [-1, 1]",
                     "timing": "cuda events, GPU idle before each; median after one warm-up"
                     if device.type == "cuda" else "time.perf_counter per call"}
    print(f"suite switch | device {doc['device']} | commit {doc['commit']} | {doc['date']}")
    results, infos = [], {}
    for name in presets:
        infos[name] = bench_preset(name, args, device, results)
        common.release(device)
    doc["presets"], doc["results"] = infos, results
    print()
    common.print_table(results, COLUMNS)
    return doc
