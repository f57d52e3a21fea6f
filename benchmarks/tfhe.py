"""Suite `tfhe`: TFHE programmable bootstrapping (KS-PBS) latency and throughput.

For each preset (default tfhe-2bit, tfhe-4bit, tfhe-4bit-p128, tfhe-4bit-mb4 (multi-bit, grouping
4), tfhe-6bit, tfhe-8bit; toy-tfhe-4bit
with --quick): keygen time and key sizes, a decrypt check of one batched LUT, then per batch
(default 1, 132, 1024, 4096, 16384; --batches) three ops:

- `ks`: the LWE key switch alone (k N -> n), with keyswitch_lwe_ciphertext's default kernel (the
  int8 tensor-core product where the key allows, else the GEMM of csrc/tfhe.h; FHETORCH_TFHE_KEYSWITCH);
- `pbs`: blind rotation + sample extraction of key-switched ciphertexts (the PBS alone);
- `ks_pbs`: both, as Context.bootstrap runs them (the atomic pattern's whole PBS);
- `ks_gemm` (only when asked: --ops ks,ks_gemm): the key switch with the int64 GEMM kernel (method
  "gemm"), to compare the two kernels (scripts/ks_timing.py times them alone, with the phases).

Timing: CUDA events on the current stream, GPU idle before each repeat, median after warm-up
(common.time_eager); on CUDA batches up to GRAPH_MAX_BATCH are also timed as one replayed CUDA
graph (launch gaps gone). A call slower than --max-call-s skips the larger batches of that op;
the repeats shrink so that one measurement takes about REPEAT_BUDGET_S (at least 3). Batches
whose estimated memory exceeds the GPU's free memory are skipped with the estimate printed.

Every row carries the floor of a small model (pbs_model): the operations (the key switch's integer
multiply-adds, the PBS's float64 operations on the torus or its Montgomery IMADs mod q) and bytes of
the op at that batch against the H100's rate (64 of either per clock per SM) and copy bandwidth.

Radix circuits: when benchmarks/tfhe_circuits.py exists (CIRCUITS_MODULE, found by
importlib.util.find_spec, never by catching an ImportError), its `run(args, device) -> dict` is
called after the PBS figures and its result stored under "circuits" in the JSON; --no-circuits
skips it.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import time
import warnings

import torch

from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.context import TFHEContext
from fhetorch._tfhe.lut import test_polynomial
from fhetorch._tfhe.presets import preset as tfhe_preset
from fhetorch.errors import FHEError, InsecureParametersWarning

from . import common

PRESETS = ["tfhe-2bit", "tfhe-4bit", "tfhe-4bit-p128", "tfhe-4bit-mb4", "tfhe-6bit", "tfhe-8bit"]
QUICK_PRESETS = ["toy-tfhe-4bit"]
BATCHES = [1, 132, 1024, 4096, 16384]
QUICK_BATCHES = [1, 8]
OPS = ["ks", "pbs", "ks_pbs"]
OPTIONAL_OPS = ["ks_gemm"]  # run only when --ops names them
GRAPH_MAX_BATCH = 1024
REPEAT_BUDGET_S = 5.0
CIRCUITS_MODULE = "benchmarks.tfhe_circuits"

# the model's H100 SXM: 132 SMs x 64 32-bit IMAD, or 64 float64 operations (add, multiply or fma), per
# clock (CUDA C Programming Guide, compute capability 9.0 throughput table) at the 1.98 GHz boost clock:
# an upper bound on the rate of either kind
H100_OPS_PER_S = 132 * 64 * 1.98e9
# the largest block the fused Fourier rotation can use on the H100 (its shared-memory opt-in limit);
# rings whose accumulator and digits need more run csrc/cuda/fourier_split_core.cuh
H100_BLOCK_SMEM = 227 * 1024
# TFHE-rs's CUDA backend on our H100, 4-bit messages, p_fail 2^-128 (../shared/reference/ANCHORS.md)
ANCHORS = {"tfhers_ks_pbs_per_s_16384": 42600, "tfhers_pbs_per_s_16384": 48200, "tfhers_ks_pbs_ms_batch1": 4.40,
           "tfhers_pbs_ms_batch1": 4.27, "tfhers_multibit_pbs_ms_batch1": 1.04, "tfhers_ks_per_s_16384": 385000,
           "target_ks_pbs_per_s": 64000, "target_ks_pbs_ms_batch1": 0.8}


# --- the model ------------------------------------------------------------------------------------
def pbs_model(p) -> dict:
    """Operations and bytes of one ciphertext's key switch and PBS at TFHEParams p (docs/tfhe.md,
    "Benchmarks"). Key bytes are read once per batch (CMux-level batching, the GEMM key switch);
    ciphertext bytes once per ciphertext. The key switch: its multiply-adds (one 32 x 32 -> 64-bit
    IMAD each, both primes). The PBS, n CMuxes (multi-bit: n / G steps, each also building its key
    bundle, 2^G - 1 products per bundle entry; the key is the n / G groups' 2^G GGSWs):
    - on the 2^64 torus (p.blind_rotation "fft", the default): float64 operations, per step the
      forward FFTs of (k+1) level digit rows (M/2 log M butterflies of 6 fmas, M = N/2), the inverse
      FFTs of k + 1 (8 operations a butterfly) and (k+1)^2 level M complex products (4 fmas); keys of
      16-byte complex values; a ring whose accumulator and digits outgrow a block also moves its
      spectra through memory every step (large_ring_bytes_per_bit);
    - mod q = q0 q1 ("ntt"): Montgomery multiplications (3 IMAD each: the NTT butterflies of
      2 (k+1) level forward and 2 (k+1) inverse NTTs and the 2 (k+1)^2 level N products per step)."""
    n_in, w, k1, big_n, g = p.k * p.N, p.n + 1, p.k + 1, p.N, p.grouping_factor
    steps, ggsws = (p.n // g, (p.n // g) << g) if g > 1 else (p.n, p.n)
    model = {
        "ks_imad": n_in * p.ks_level * w * 2,
        "ks_key_bytes": n_in * p.ks_level * 2 * w * 4,
        "ks_ct_bytes": (n_in + 1) * 8 + w * 8,
        "pbs_rotation": p.blind_rotation,
        "pbs_ct_bytes": w * 8 + (n_in + 1) * 8,
    }
    if p.blind_rotation == "fft":
        m = big_n // 2
        fft = (m // 2) * (m.bit_length() - 1)  # butterflies of one transform
        entries = k1 * p.pbs_level * k1 * m  # complex values of one GGSW
        step_ops = 6 * fft * k1 * p.pbs_level + 8 * fft * k1 + 4 * entries
        if g > 1:
            step_ops += 4 * ((1 << g) - 1) * entries
        model.update(pbs_ops=steps * step_ops, pbs_key_bytes=ggsws * entries * 16)
        model["pbs_ct_bytes"] += steps * large_ring_bytes_per_bit(p)
        return model
    ntt_mults = (big_n // 2) * p.log_n
    ggsw_words = k1 * p.pbs_level * k1 * 2 * big_n
    cmux_mults = 2 * (k1 * p.pbs_level + k1) * ntt_mults + ggsw_words
    if g > 1:
        cmux_mults += ((1 << g) - 1) * ggsw_words
    model.update(pbs_mont_mults=steps * cmux_mults, pbs_ops=3 * steps * cmux_mults, pbs_key_bytes=ggsws * ggsw_words * 4)
    return model


def large_ring_bytes_per_bit(p) -> int:
    """Bytes one ciphertext moves per key bit on the 2^64 torus where its accumulator and digits
    outgrow a block (H100_BLOCK_SMEM; csrc/cuda/fourier_split_core.cuh, classical keys): the spectra
    written and read twice, 16 M (2 (k+1) level + 2 (k+1)), and the accumulator read twice and
    written once, 24 (k+1) N. 0 where the rotation runs on chip."""
    k1, big_n = p.k + 1, p.N
    if p.blind_rotation != "fft" or p.grouping_factor > 1 or 8 * k1 * big_n * (1 + p.pbs_level) <= H100_BLOCK_SMEM:
        return 0
    return 16 * (big_n // 2) * (2 * k1 * p.pbs_level + 2 * k1) + 24 * k1 * big_n


def floor_of(model: dict, op: str, batch: int, bandwidth_gbs: float) -> dict:
    """The op's floor at `batch`: max(operations / H100 rate, bytes / bandwidth), seconds, and which bound
    (the key switch's IMADs and the PBS's float64 operations or IMADs, at 64 per clock per SM either way)."""
    parts = {"ks": ["ks"], "ks_gemm": ["ks"], "pbs": ["pbs"], "ks_pbs": ["ks", "pbs"]}[op]
    ops = sum(model["ks_imad" if x == "ks" else "pbs_ops"] for x in parts) * batch
    nbytes = sum(model[f"{x}_key_bytes"] + model[f"{x}_ct_bytes"] * batch for x in parts)
    t_ops, t_mem = ops / H100_OPS_PER_S, nbytes / (bandwidth_gbs * 1e9)
    return {"floor_ops": ops, "floor_bytes": nbytes, "floor_us": max(t_ops, t_mem) * 1e6,
            "floor_bound": "compute" if t_ops >= t_mem else "memory"}


def bytes_per_ciphertext(p) -> int:
    """GPU memory one ciphertext of a KS-PBS batch needs (input, key-switched copy, accumulator,
    the blind rotation's scratch, the extraction's temporaries), times 1.5 for the allocator."""
    k1, big_n, n_in = p.k + 1, p.N, p.k * p.N
    words = 2 * k1 * big_n + 2 * big_n + 2 * k1 * big_n  # tfhe_scratch_words
    return int(1.5 * ((n_in + 1) * 8 * 5 + (p.n + 1) * 8 + k1 * big_n * 8 + words * 4))


# --- measuring ------------------------------------------------------------------------------------
def _measure(fn, device, args, mode) -> dict:
    t0 = time.perf_counter()
    fn()  # first call: warm-up and an estimate of the repeats that fit the budget
    common.sync(device)
    first = time.perf_counter() - t0
    repeat = max(3, min(args.repeat, int(REPEAT_BUDGET_S / max(first, 1e-6))))
    if args.quick:
        repeat = min(repeat, args.repeat)
    if mode == "graph":
        out = common.time_graph(fn, device, repeat, 1)
    else:
        out = common.time_eager(fn, device, repeat, max(0, args.warmup - 1))
    out["first_call_s"] = first
    return out


def bench_preset(name: str, args, device, results: list) -> dict:
    cuda = device.type == "cuda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = tfhe_preset(name)
        ctx = TFHEContext(p, device)
    t0 = time.perf_counter()
    ctx.keygen()
    common.sync(device)
    model = pbs_model(p)
    info = {"preset": name, "n": p.n, "N": p.N, "k": p.k, "grouping_factor": p.grouping_factor, "pbs": [p.pbs_base_log, p.pbs_level],
            "ks": [p.ks_base_log, p.ks_level], "bits": p.bits, "security_bits": p.security_bits,
            "log2_p_fail": p.log2_p_fail, "keygen_s": time.perf_counter() - t0,
            "bootstrap_key_bytes": ctx.bootstrap_key.data.nbytes, "keyswitch_key_bytes": ctx.keyswitch_key.data.nbytes,
            "model": model, "bytes_per_ciphertext": bytes_per_ciphertext(p),
            "ks_method": alg.keyswitch_method(ctx.keyswitch_key)}
    print(f"\n== {name}: n = {p.n}, N = {p.N}, k = {p.k}, grouping {p.grouping_factor}, PBS 2^{p.pbs_base_log} x {p.pbs_level}, KS "
          f"2^{p.ks_base_log} x {p.ks_level}, {p.bits} bits; keygen {info['keygen_s']:.1f} s, bootstrapping key "
          f"{info['bootstrap_key_bytes'] / 2**20:.1f} MiB, key-switching key {info['keyswitch_key_bytes'] / 2**20:.1f} MiB, "
          f"key switch {info['ks_method']}",
          flush=True)

    space = p.message_space
    table = [(3 * m + 1) % space for m in range(space)]
    tv = test_polynomial([table], space, p.N, p.delta, p.q).to(device).unsqueeze(0)
    gen = torch.Generator().manual_seed(1)

    def ks(x, method=None):
        return alg.keyswitch_lwe_ciphertext(ctx.keyswitch_key, x, ctx.modulus, method=method)

    def pbs(x):
        return alg.programmable_bootstrap_lwe_ciphertext(ctx.ring, ctx.bootstrap_key, x, tv)[0]

    # a decrypt check at the first batch: KS + PBS of the LUT (3 m + 1) mod p
    m = torch.randint(0, p.message_modulus, (min(max(args.batches), 1024),), generator=gen)
    out = pbs(ks(ctx.encrypt(m).data))
    got = ctx.decode(alg.decrypt_lwe_ciphertext(ctx.modulus, ctx.glwe_key.as_lwe_key(), out)).cpu()
    info["check_ok"] = bool(torch.equal(got, (3 * m + 1) % space))
    print(f"   check: KS + PBS of (3 m + 1) mod {space} on {m.numel()} ciphertexts: "
          f"{'ok' if info['check_ok'] else 'WRONG'}", flush=True)

    free = torch.cuda.mem_get_info(device)[0] if cuda else None
    slow = set()
    for batch in args.batches:
        need = batch * info["bytes_per_ciphertext"]
        if cuda and need > 0.9 * free:
            reason = f"needs ~{need / 2**30:.1f} GiB (model), {free / 2**30:.1f} GiB free"
            for op in args.ops:
                results.append(_row(name, op, batch, "eager", model, args, skipped=reason))
            print(f"   batch {batch}: skipped, {reason}", flush=True)
            continue
        x = ctx.encrypt(torch.randint(0, p.message_modulus, (batch,), generator=gen)).data
        xs = ks(x)
        fns = {"ks": lambda: ks(x), "ks_gemm": lambda: ks(x, "gemm"), "pbs": lambda: pbs(xs),
               "ks_pbs": lambda: pbs(ks(x))}
        for op in args.ops:
            modes = ["eager"] + (["graph"] if cuda and not args.eager_only and batch <= GRAPH_MAX_BATCH else [])
            for mode in modes:
                row = _row(name, op, batch, mode, model, args)
                if (op, mode) in slow:
                    row["skipped"] = f"a smaller batch took more than --max-call-s {args.max_call_s} s per call"
                else:
                    if cuda:
                        common.release(device)
                        torch.cuda.reset_peak_memory_stats(device)
                    try:
                        row.update(_measure(fns[op], device, args, mode))
                        if row["first_call_s"] > args.max_call_s:
                            slow.add((op, mode))
                    except (RuntimeError, FHEError) as e:  # a kernel's refusal is recorded, the suite goes on
                        row["error"] = common.error_text(e, 500)
                    if cuda:
                        row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
                if row.get("median_us"):
                    row["per_s"] = batch / (row["median_us"] * 1e-6)
                    row["x_floor"] = row["median_us"] / row["floor_us"]
                results.append(row)
                _progress(row)
        del x, xs, fns
    del ctx
    common.release(device)
    return info


def _row(preset, op, batch, mode, model, args, skipped=None) -> dict:
    row = {"preset": preset, "op": op, "batch": batch, "mode": mode, "median_us": None,
           **floor_of(model, op, batch, args.bandwidth_gbs)}
    if skipped:
        row["skipped"] = skipped
    return row


def _progress(row):
    if row.get("median_us"):
        print(f"   {row['op']:<7} batch {row['batch']:>6} {row['mode']:<6} {row['median_us'] / 1e3:10.3f} ms "
              f"{row['per_s']:12,.0f}/s  (floor {row['floor_us'] / 1e3:.3f} ms, {row['floor_bound']})", flush=True)
    else:
        why = row.get("error") or row.get("skipped")
        print(f"   {row['op']:<7} batch {row['batch']:>6} {row['mode']:<6} {why.splitlines()[0][:140]}", flush=True)


COLUMNS = [
    ("preset", "preset", "", "l"),
    ("op", "op", "", "l"),
    ("batch", "batch", "", "r"),
    ("mode", "mode", "", "l"),
    ("median_ms", lambda r: r["median_us"] / 1e3 if r.get("median_us") else None, ".3f", "r"),
    ("p10_ms", lambda r: r["p10_us"] / 1e3 if r.get("p10_us") else None, ".3f", "r"),
    ("p90_ms", lambda r: r["p90_us"] / 1e3 if r.get("p90_us") else None, ".3f", "r"),
    ("per_s", "per_s", ",.0f", "r"),
    ("floor_ms", lambda r: r["floor_us"] / 1e3, ".3f", "r"),
    ("bound", "floor_bound", "", "l"),
    ("x_floor", "x_floor", ".1f", "r"),
    ("peak_GiB", lambda r: r["peak_mem_bytes"] / 2**30 if r.get("peak_mem_bytes") else None, ".2f", "r"),
    ("note", lambda r: (r.get("error") or r.get("skipped") or "").splitlines()[0][:60] if (r.get("error") or r.get("skipped")) else "", "", "l"),
]


def markdown_table(results: list, batches: list) -> str:
    """docs/benchmarks.md's layout: one line per (preset, op), batch 1 as a latency (ms, the best
    mode), every other batch as a throughput (ciphertexts per second, the best mode)."""
    best = {}
    for r in results:
        if r.get("median_us"):
            key = (r["preset"], r["op"], r["batch"])
            best[key] = min(best.get(key, math.inf), r["median_us"])
    head = "| preset | op | " + " | ".join(f"batch {b}" for b in batches) + " |"
    lines = [head, "|" + " --- |" * (len(batches) + 2)]
    for preset, op in dict.fromkeys((r["preset"], r["op"]) for r in results):
        cells = []
        for b in batches:
            t = best.get((preset, op, b))
            cells.append("-" if t is None else (f"{t / 1e3:.2f} ms" if b == 1 else f"{b / (t * 1e-6):,.0f}/s"))
        lines.append(f"| {preset} | {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def circuits_available() -> bool:
    """True when benchmarks/tfhe_circuits.py (the radix-circuit figures) is present."""
    return importlib.util.find_spec(CIRCUITS_MODULE) is not None


def run(args, device: torch.device) -> dict:
    default = args.shapes in (["48x12", "24x12", "preset"], ["toy"])
    presets = (QUICK_PRESETS if args.quick else PRESETS) if default else args.shapes
    if args.batches is None:
        args.batches = QUICK_BATCHES if args.quick else BATCHES
    args.ops = args.ops or OPS
    unknown = [o for o in args.ops if o not in OPS + OPTIONAL_OPS]
    if unknown:
        raise SystemExit(f"tfhe: unknown op(s) {unknown}; choose from {', '.join(OPS + OPTIONAL_OPS)}")
    doc = {"suite": "tfhe", **common.environment(device), "anchors": ANCHORS}
    doc["config"] = {"repeat": args.repeat, "warmup": args.warmup, "batches": args.batches, "ops": args.ops,
                     "bandwidth_gbs": args.bandwidth_gbs, "bandwidth_source": args.bandwidth_source,
                     "ops_per_s": H100_OPS_PER_S, "max_call_s": args.max_call_s, "quick": args.quick,
                     "graph_max_batch": GRAPH_MAX_BATCH,
                     "timing": ("cuda events on the current stream, GPU idle before each repeat"
                                if device.type == "cuda" else "time.perf_counter per call")}
    print(f"suite tfhe | device {doc['device']} | commit {doc['commit']} | {doc['date']} | torch {doc['torch']}")
    print(f"presets {', '.join(presets)}; batches {args.batches}; floor: {H100_OPS_PER_S:.3g} IMAD or float64 operations/s (H100), "
          f"{args.bandwidth_gbs:.4g} GB/s ({args.bandwidth_source})")
    results, infos = [], {}
    for name in presets:
        try:
            infos[name] = bench_preset(name, args, device, results)
        except (FHEError, RuntimeError) as e:  # e.g. a preset the Context refuses: recorded
            infos[name] = {"error": common.error_text(e, 2000)}
            print(f"   {name}: skipped: {infos[name]['error'].splitlines()[0][:200]}")
        common.release(device)
    doc["presets"] = infos
    doc["results"] = results
    print()
    common.print_table(results, COLUMNS)
    print()
    print(markdown_table(results, args.batches))
    print(f"\nanchors (TFHE-rs, our H100, 4-bit, 2^-128): KS+PBS {ANCHORS['tfhers_ks_pbs_per_s_16384']:,}/s and PBS "
          f"{ANCHORS['tfhers_pbs_per_s_16384']:,}/s at 16384, {ANCHORS['tfhers_ks_pbs_ms_batch1']} ms KS+PBS at batch 1")
    if args.no_circuits:
        print("circuits: skipped (--no-circuits)")
    elif circuits_available():
        doc["circuits"] = importlib.import_module(CIRCUITS_MODULE).run(args, device)
    else:
        print(f"circuits: {CIRCUITS_MODULE.replace('.', '/')}.py not present; no radix-circuit figures")
    return doc
