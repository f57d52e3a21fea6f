"""Suite `ops`: CKKS basic operations at N = 2^16, at the top level of each shape.

Ops: NTT of one limb, NTT and INTT of a ciphertext (2 x L limbs), HMult (multiply and
relinearise) without and with the rescale, HRot (rotation by one slot), HAdd, Rescale.
On CUDA each is timed eagerly (Python launches) and as a replayed CUDA graph. Each result
carries its memory-traffic floor: every input read once, every output written once, the
key limbs in use read once, at --bandwidth-gbs.
"""
from __future__ import annotations

import math
import time
import warnings

import torch

from fhetorch._ckks import evaluator as ev
from fhetorch._ckks.context import CKKSContext
from fhetorch._ckks.params import make_params
from fhetorch._ckks.presets import preset
from fhetorch.errors import InsecureParametersWarning
from fhetorch._rlwe.keyswitch import digits

from . import common

WORD = 4  # bytes per residue

# name -> (how to build the Params, label printed beside it)
SHAPES = {
    "48x12": (lambda: make_params(16, chain="dr60", levels=23, dnum=4, allow_insecure=True),
              "Cheddar Table 7's 48/12 shape; shape only, log2 PQ = 1812 > 1772 (not 128-bit secure)"),
    "24x12": (lambda: make_params(16, chain="dr60", levels=11, dnum=2, allow_insecure=True),
              "Cheddar Table 7's 24/12 shape; shape only (secure bound met, built with allow_insecure)"),
    "preset": (lambda: preset("n16-rr40"), "secure preset n16-rr40 (128-bit, rational rescaling, delta = 2^40)"),
    "toy": (lambda: preset("toy-n12"), "toy-n12: N = 2^12, insecure; smoke test only"),
}

OPS = ["ntt_limb", "ntt_ct", "intt_ct", "hmult", "hmult_rescale", "hrot", "hadd", "rescale"]
OP_INFO = {
    "ntt_limb": "NTT of one limb (N coefficients)",
    "ntt_ct": "NTT of a ciphertext (2 x L limbs)",
    "intt_ct": "INTT of a ciphertext (2 x L limbs)",
    "hmult": "multiply + relinearise, no rescale",
    "hmult_rescale": "multiply + relinearise + rescale",
    "hrot": "rotate by 1 slot (automorphism + key switch)",
    "hadd": "add two ciphertexts",
    "rescale": "rescale a relinearised product (its rescale deferred)",
}


def build_params(shape: str):
    if shape not in SHAPES:
        raise SystemExit(f"ops: unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    make, label = SHAPES[shape]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return make(), label


def floor_bytes(params, op: str) -> int:
    """Bytes an op must move at least, at the top level (inputs read, outputs written once)."""
    top = params.max_level
    lvl = params.limbs(top)
    L, L1 = len(lvl), len(params.limbs(top - 1))
    K, N = len(params.special_primes), params.n
    beta = len(digits(lvl, params.alpha))
    poly, poly1 = L * N * WORD, L1 * N * WORD
    key = 2 * beta * (L + K) * N * WORD  # (b_j, a_j) over level + P for each digit in use
    return {
        "ntt_limb": 2 * N * WORD,
        "ntt_ct": 2 * 2 * poly,
        "intt_ct": 2 * 2 * poly,
        "hmult": 4 * poly + 2 * poly + key,
        "hmult_rescale": 4 * poly + 2 * poly1 + key,
        "hrot": 2 * poly + 2 * poly + key,
        "hadd": 3 * 2 * poly,
        "rescale": 2 * poly + 2 * poly1,
    }[op]


def shape_summary(params, label: str) -> dict:
    top = params.max_level
    lvl = params.limbs(top)
    return {
        "label": label,
        "name": params.name,
        "log_n": params.log_n,
        "N": params.n,
        "chain": params.chain,
        "levels": params.max_level,
        "dnum": params.dnum,
        "alpha": params.alpha,
        "top_level_limbs": len(lvl),
        "next_level_limbs": len(params.limbs(top - 1)),
        "q_max_limbs": len(params.primes),
        "special_limbs": len(params.special_primes),
        "digits_at_top": len(digits(lvl, params.alpha)),
        "log_pq": round(params.log_pq, 2),
        "scale_bits": params.scale_bits,
        "secure_128": params.security_bits >= 128,
    }


def _random_slots(n: int, gen: torch.Generator) -> torch.Tensor:
    re = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
    im = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
    return torch.complex(re, im) / math.sqrt(2)


def make_operands(params, device, seed: int = 1) -> tuple:
    """(ctx, a, b, va, vb): a context with the relinearisation key and the rotation-by-1 key, and
    top-level encryptions a, b of random slot vectors va, vb: the operands of make_op's ops."""
    ctx = CKKSContext(params, device, seed=None)
    ctx.keygen(rotations=[1], power_of_two_rotations=False, conjugation=False)
    gen = torch.Generator().manual_seed(seed)
    va, vb = _random_slots(params.slots, gen), _random_slots(params.slots, gen)
    return ctx, ctx.encrypt_vector(va), ctx.encrypt_vector(vb), va, vb


def make_op(ctx, op: str, a, b):
    """A zero-argument callable performing `op` on the top-level ciphertexts a, b."""
    ring = ctx.ring
    top = ctx.max_level
    basis = ctx.basis(top)
    if op == "ntt_limb":
        b1 = ring.basis((ctx.params.limbs(top).start,))
        x1 = a.data[0, :1].contiguous()
        return lambda: ring.ntt(x1, b1)
    if op == "ntt_ct":
        x = a.data.contiguous()
        return lambda: ring.ntt(x, basis)
    if op == "intt_ct":
        x = a.data.contiguous()
        return lambda: ring.intt(x, basis)
    if op == "hmult":
        return lambda: ev.mul(ctx, a, b, rescale_result=False)
    if op == "hmult_rescale":
        return lambda: ev.mul(ctx, a, b)
    if op == "hrot":
        return lambda: ev.rotate(ctx, a, 1)
    if op == "hadd":
        return lambda: ev.add(ctx, a, b)
    if op == "rescale":  # of a product (its rescale deferred): a fresh ciphertext's rescale is refused
        ab = ev.mul(ctx, a, b, rescale_result=False)
        return lambda: ev.rescale(ctx, ab)
    raise ValueError(op)


def _check(ctx, a, b, va, vb) -> dict:
    """Decrypted precision (log2 of the max error) of HMult+rescale and HRot: a sanity check."""
    out = {}
    try:
        m = ctx.decrypt_vector(ev.mul(ctx, a, b)).cpu()
        out["hmult_precision_bits"] = round(-math.log2(max((m - va * vb).abs().max().item(), 2.0**-60)), 2)
    except Exception as e:  # noqa: BLE001 - recorded, the timing goes on
        out["hmult_check_error"] = common.error_text(e, 500)
    try:
        r = ctx.decrypt_vector(ev.rotate(ctx, a, 1)).cpu()
        out["hrot_precision_bits"] = round(-math.log2(max((r - torch.roll(va, -1)).abs().max().item(), 2.0**-60)), 2)
    except Exception as e:  # noqa: BLE001
        out["hrot_check_error"] = common.error_text(e, 500)
    return out


def bench_shape(shape: str, args, device: torch.device, results: list) -> dict:
    params, label = build_params(shape)
    summary = shape_summary(params, label)
    print(f"\n== shape {shape}: {label}")
    print(f"   N = 2^{params.log_n}, top level {params.max_level}: L = {summary['top_level_limbs']} limbs "
          f"(next {summary['next_level_limbs']}), K = {summary['special_limbs']} special, dnum = {params.dnum} "
          f"(alpha = {params.alpha}, {summary['digits_at_top']} digits in use), log2 PQ = {params.log_pq:.1f}",
          flush=True)
    cuda = device.type == "cuda"
    if cuda:
        common.release(device)
        torch.cuda.reset_peak_memory_stats(device)
    try:
        t0 = time.perf_counter()
        ctx = CKKSContext(params, device, seed=None)
        ctx.keygen(rotations=[1], power_of_two_rotations=False, conjugation=False)
        common.sync(device)
        summary["keygen_s"] = round(time.perf_counter() - t0, 3)
        summary["key_bytes"] = ctx.key_bytes()
        gen = torch.Generator().manual_seed(1)
        va, vb = _random_slots(params.slots, gen), _random_slots(params.slots, gen)
        a, b = ctx.encrypt_vector(va), ctx.encrypt_vector(vb)
        common.sync(device)
    except Exception as e:  # noqa: BLE001 - a shape that cannot even start is recorded
        summary["error"] = common.error_text(e)
        print(f"   setup failed: {summary['error']}")
        for op in args.ops:
            for mode in args.modes:
                results.append(_row(shape, op, mode, params, args, error="setup failed: " + summary["error"]))
        return summary
    print(f"   keygen {summary['keygen_s']} s, key bytes {summary['key_bytes'] / 2**20:.1f} MiB", flush=True)
    if not args.no_check:
        summary.update(_check(ctx, a, b, va, vb))
        checks = {k: v for k, v in summary.items() if "precision" in k or "check_error" in k}
        print(f"   check: {checks}", flush=True)
    graph_broken = None
    for op in args.ops:
        fn = make_op(ctx, op, a, b)
        for mode in args.modes:
            if cuda:
                common.release(device)
                torch.cuda.reset_peak_memory_stats(device)
            row = _row(shape, op, mode, params, args)
            try:
                if mode == "eager":
                    row.update(common.time_eager(fn, device, args.repeat, args.warmup))
                elif graph_broken:
                    row["error"] = f"skipped: an earlier graph failure left CUDA unusable ({graph_broken})"
                else:
                    row.update(common.time_graph(fn, device, args.repeat, args.warmup))
            except Exception as e:  # noqa: BLE001 - record and go on
                row["error"] = common.error_text(e)
                if mode == "graph":
                    try:
                        common.release(device)
                    except Exception as e2:  # noqa: BLE001 - CUDA context poisoned
                        graph_broken = common.error_text(e2, 200)
            if cuda and not graph_broken:
                row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
            if row.get("median_us") is not None and row["floor_us"]:
                row["x_floor"] = row["median_us"] / row["floor_us"]
            results.append(row)
            _progress(row)
    if cuda and not graph_broken:
        summary["peak_mem_bytes"] = max((r.get("peak_mem_bytes") or 0) for r in results if r["shape"] == shape)
    del ctx, a, b, fn
    if not graph_broken:
        common.release(device)
    return summary


def _row(shape, op, mode, params, args, error=None) -> dict:
    fb = floor_bytes(params, op)
    row = {"shape": shape, "op": op, "mode": mode, "median_us": None, "min_us": None, "p10_us": None,
           "p90_us": None, "repeats": 0, "floor_bytes": fb, "floor_us": fb / (args.bandwidth_gbs * 1e9) * 1e6}
    if error:
        row["error"] = error
    return row


def _progress(row):
    if row.get("error"):
        print(f"   {row['op']:<14} {row['mode']:<6} error: {row['error'].splitlines()[0][:160]}", flush=True)
    else:
        print(f"   {row['op']:<14} {row['mode']:<6} {row['median_us']:>10.1f} us", flush=True)


COLUMNS = [
    ("shape", "shape", "", "l"),
    ("op", "op", "", "l"),
    ("mode", "mode", "", "l"),
    ("median_us", "median_us", ".1f", "r"),
    ("min_us", "min_us", ".1f", "r"),
    ("p10_us", "p10_us", ".1f", "r"),
    ("p90_us", "p90_us", ".1f", "r"),
    ("host_us", "host_median_us", ".1f", "r"),
    ("floor_MB", lambda r: r["floor_bytes"] / 1e6, ".2f", "r"),
    ("floor_us", "floor_us", ".1f", "r"),
    ("x_floor", "x_floor", ".1f", "r"),
    ("peak_MiB", lambda r: r["peak_mem_bytes"] / 2**20 if r.get("peak_mem_bytes") else None, ".0f", "r"),
    ("note", lambda r: ("ERROR " + r["error"].splitlines()[0][:60]) if r.get("error") else "", "", "l"),
]


def run(args, device: torch.device) -> dict:
    args.modes = ["eager", "graph"] if device.type == "cuda" and not args.eager_only else ["eager"]
    args.ops = OPS if not args.ops else args.ops
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        raise SystemExit(f"ops: unknown op(s) {unknown}; choose from {', '.join(OPS)}")
    doc = {"suite": "ops", **common.environment(device)}
    doc["config"] = {"repeat": args.repeat, "warmup": args.warmup, "bandwidth_gbs": args.bandwidth_gbs,
                     "bandwidth_source": args.bandwidth_source,
                     "modes": args.modes, "quick": args.quick,
                     "timing": ("cuda events on the current stream, GPU idle before each repeat"
                                if device.type == "cuda" else "time.perf_counter per call")}
    print(f"suite ops | device {doc['device']} | commit {doc['commit']} | {doc['date']} | torch {doc['torch']}"
          + (f" | cuda {doc['cuda']}" if doc["cuda"] else ""))
    print(f"repeat {args.repeat}, warm-up {args.warmup}, modes {'/'.join(args.modes)}, "
          f"floor at {args.bandwidth_gbs:.4g} GB/s ({args.bandwidth_source})")
    results, shapes = [], {}
    for shape in args.shapes:
        shapes[shape] = bench_shape(shape, args, device, results)
    doc["shapes"] = shapes
    doc["results"] = results
    print()
    common.print_table(results, COLUMNS)
    print()
    for shape, s in shapes.items():
        extra = ""
        if s.get("key_bytes") is not None:
            extra += f", keys {s['key_bytes'] / 2**20:.1f} MiB"
        if s.get("peak_mem_bytes"):
            extra += f", peak GPU memory {s['peak_mem_bytes'] / 2**20:.0f} MiB"
        if s.get("error"):
            extra += f", ERROR {s['error'].splitlines()[0][:100]}"
        print(f"{shape}: {s['label']}; L={s['top_level_limbs']}, K={s['special_limbs']}, dnum={s['dnum']}{extra}")
    print("floor = bytes read + written at least (inputs once, outputs once, key limbs in use once) "
          f"/ {args.bandwidth_gbs:.4g} GB/s ({args.bandwidth_source}); x_floor = median / floor")
    return doc
