"""Bootstrapping suite: precision, levels left, key memory and latency of CKKS bootstrapping.

For each bootstrappable preset (default n16-bts40, n16-bts35; toy-n13-bts with --quick):
keygen(bootstrap=True) for full slots and a sparse packing (2^13 slots at N = 2^16), then

- precision: real inputs in [-1, 1] and complex inputs in the unit square, full slots, and
  the sparse packing and the two-real-ciphertext variant (u + i v): max and mean error and
  -log2(max error) ("bits");
- latency: eager (Python launches) and replayed as one CUDA graph, median of `repeat`;
- breakdown (eager, events around each phase): ModRaise (+ SubSum), CoeffToSlot (incl. the
  real/imaginary split), EvalMod (both parts), SlotToCoeff; one CoeffToSlot linear transform
  and EvalMod's cosine (one part) on their own;
- memory: bootstrapping keys, encoded DFT diagonals, peak GPU memory of one bootstrapping.
"""
from __future__ import annotations

import math
import time
import warnings

import torch

from . import common

ANCHORS = {"cheddar_h100_ms": 23.7, "cheddar_bits": 20.1, "desilo_h100_ms": 443.0, "theodosian_floor_gb": 53.0}


def _rand(n, kind, gen, device):
    if kind == "real":
        v = torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1
    else:
        v = torch.complex(torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1,
                          torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1)
    return v.to(device)


def _err(got, want) -> dict:
    e = (got - want).abs()
    mx, mean = float(e.max()), float(e.mean())
    return {"max_err": mx, "mean_err": mean, "bits": -math.log2(mx) if mx > 0 else math.inf,
            "mean_bits": -math.log2(mean) if mean > 0 else math.inf}


def _params(spec: str):
    """(Params, BootstrapConfig) of a preset name, or of 'preset:key=value,...' overriding its
    chain (dnum, user_levels, ... any BootstrapConfig field): variants for tuning, e.g.
    n16-bts40:user_levels=12,evalmod_bits=65."""
    import dataclasses
    from fhetorch.circuits.bootstrap_config import BOOTSTRAP_PRESETS, bootstrap_params

    name, _, over = spec.partition(":")
    literal, cfg = BOOTSTRAP_PRESETS[name]
    lit, bts = {}, {}
    for item in (over.split(";") if ";" in over else over.split("+")) if over else []:
        k, v = item.split("=")
        v = int(v) if v.lstrip("-").isdigit() else v
        (lit if k in ("dnum", "chain") else bts)[k] = v
    literal = dataclasses.replace(literal, name=spec, **lit)
    cfg = dataclasses.replace(cfg, **bts)
    return bootstrap_params(literal, cfg, allow_insecure=True), cfg


def _encrypt(ctx, v, slots):
    vv = v.to(torch.complex128)
    return ctx.encrypt_vector(vv, level=0, slots=slots)


def bench_preset(name: str, args, device, results: list) -> dict:
    import fhetorch as fhe
    from fhetorch.circuits import bootstrap as B
    from fhetorch._ckks.context import galois_element

    cuda = device.type == "cuda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params, cfg = _params(name)
        ctx = fhe.ckks.Context(params=params, device=device, bootstrap=cfg)
    cfg = ctx.bootstrap_config
    full = ctx.slots
    sparse = min(full, 2**13) if ctx.n >= 2**16 else full // 8
    t0 = time.perf_counter()
    ctx.keygen(bootstrap=True, bootstrap_slots=[full, sparse])
    common.sync(device)
    info = {"preset": name, "N": ctx.n, "levels": ctx.max_level, "levels_left": cfg.user_levels,
            "log_pq": round(ctx.params.log_pq, 1), "dnum": ctx.params.dnum, "config": cfg.describe(),
            "keygen_s": time.perf_counter() - t0, "key_bytes": ctx.key_bytes(), "rotation_keys": len(ctx.galois_keys)}
    bt = ctx.bootstrapper
    gen = torch.Generator().manual_seed(1)

    def record(case, **kw):
        row = {"preset": name, "case": case, **kw}
        results.append(row)
        _progress(row)
        return row

    # --- precision -------------------------------------------------------------------------
    for case, slots, kind in (("full real", full, "real"), ("full complex", full, "complex"),
                              (f"sparse {sparse} real", sparse, "real")):
        v = _rand(slots, kind, gen, device)
        out = bt.bootstrap(_encrypt(ctx, v, slots))
        got = ctx.decrypt_vector(out)
        record(case, level_out=out.level, **_err(got if kind == "complex" else got.real, v))
    a, b = _rand(full, "real", gen, device), _rand(full, "real", gen, device)
    u, w = bt.bootstrap_pair(_encrypt(ctx, a, full), _encrypt(ctx, b, full))
    e1, e2 = _err(ctx.decrypt_vector(u).real, a), _err(ctx.decrypt_vector(w).real, b)
    record("pair (u + i v) real", level_out=u.level, **(e1 if e1["max_err"] > e2["max_err"] else e2))
    info["diag_bytes"] = sum(lt.encoded_bytes() for lt in {id(lt): lt for lts in bt._dfts.values() for lt in lts}.values())
    # the keys full-slot bootstrapping itself needs (relinearisation, conjugation, its DFT and
    # encapsulation keys), as generated here
    steps = B.rotations(ctx, full)
    need = {galois_element(s, ctx.n) for s in steps} | {2 * ctx.n - 1}
    info["bts_full_key_bytes"] = (sum(ctx.galois_keys[g].nbytes for g in need) + ctx.relin_key.nbytes
                                  + ctx.encapsulation_keys.nbytes)

    # --- latency ---------------------------------------------------------------------------
    ct_full = _encrypt(ctx, _rand(full, "complex", gen, device), full)
    ct_sparse = _encrypt(ctx, _rand(sparse, "real", gen, device), sparse)
    ct_b = _encrypt(ctx, _rand(full, "real", gen, device), full)
    cases = {"bootstrap full": lambda: bt.bootstrap(ct_full).data,
             f"bootstrap sparse {sparse}": lambda: bt.bootstrap(ct_sparse).data,
             "bootstrap pair (2 real)": lambda: bt.bootstrap_pair(ct_full, ct_b)[0].data}
    for case, fn in cases.items():
        for mode in args.modes:
            row = {"mode": mode}
            try:
                if cuda:
                    torch.cuda.reset_peak_memory_stats(device)
                t = (common.time_eager(fn, device, args.repeat, args.warmup) if mode == "eager"
                     else common.time_graph(fn, device, args.repeat, args.warmup))
                row.update(t)
                if cuda:
                    row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
            except Exception as e:  # noqa: BLE001 - recorded, the suite goes on
                row["error"] = common.error_text(e, 300)
            record(case, **row)
            common.release(device)

    # --- breakdown (eager) ---------------------------------------------------------------------
    x0 = bt._prepare(ct_full)
    raised = bt.mod_raise(bt._scale_up(x0))
    re, im = bt.coeff_to_slot(raised)
    em = bt.eval_mod_parts(re, im)
    cts, stc = bt.transforms(full)
    parts = {"ModRaise": lambda: bt.mod_raise(bt._scale_up(x0)).data,
             "CoeffToSlot (+ split)": lambda: bt.coeff_to_slot(raised)[0].data,
             "EvalMod (2 parts, one batch)": lambda: bt.eval_mod_parts(re, im).data,
             "SlotToCoeff": lambda: bt.slot_to_coeff(em, full).data,
             f"one CtS transform ({cts[0].nonzero_diagonals} diagonals, top level)": lambda: cts[0](raised).data,
             f"cosine (even, degree {cfg.cos_degree})": lambda: bt.cosine(re).data}
    for case, fn in parts.items():
        row = {"mode": "eager"}
        try:
            row.update(common.time_eager(fn, device, args.repeat, args.warmup))
        except Exception as e:  # noqa: BLE001
            row["error"] = common.error_text(e, 300)
        record(case, **row)
    return info


def _progress(row):
    t = f"{row['median_us'] / 1e3:9.2f} ms ({row['mode']})" if "median_us" in row else ""
    p = f"bits {row['bits']:.1f} (mean {row['mean_bits']:.1f}), level {row['level_out']}" if "bits" in row else ""
    e = f"ERROR {row['error'][:120]}" if row.get("error") else ""
    print(f"  {row['preset']:12s} {row['case']:52s} {t} {p} {e}", flush=True)


COLUMNS = [
    ("preset", "preset", "", "l"),
    ("case", "case", "", "l"),
    ("mode", "mode", "", "l"),
    ("median_ms", lambda r: r["median_us"] / 1e3 if "median_us" in r else None, ".2f", "r"),
    ("p10_ms", lambda r: r["p10_us"] / 1e3 if "p10_us" in r else None, ".2f", "r"),
    ("p90_ms", lambda r: r["p90_us"] / 1e3 if "p90_us" in r else None, ".2f", "r"),
    ("bits", "bits", ".1f", "r"),
    ("mean_bits", "mean_bits", ".1f", "r"),
    ("max_err", "max_err", ".2e", "r"),
    ("level", "level_out", "", "r"),
    ("peak_GiB", lambda r: r["peak_mem_bytes"] / 2**30 if r.get("peak_mem_bytes") else None, ".2f", "r"),
    ("note", lambda r: ("ERROR " + r["error"].splitlines()[0][:60]) if r.get("error") else "", "", "l"),
]


def run(args, device: torch.device) -> dict:
    args.modes = ["eager", "graph"] if device.type == "cuda" and not args.eager_only else ["eager"]
    presets = args.shapes if args.shapes != ["48x12", "24x12", "preset"] else ["n16-bts40", "n16-bts35"]
    if args.quick and args.shapes == ["toy"]:
        presets = ["toy-n13-bts"]
    doc = {"suite": "bts", **common.environment(device), "anchors": ANCHORS}
    doc["config"] = {"repeat": args.repeat, "warmup": args.warmup, "modes": args.modes, "quick": args.quick}
    print(f"suite bts | device {doc['device']} | commit {doc['commit']} | {doc['date']} | torch {doc['torch']}")
    results, infos = [], {}
    for name in presets:
        try:
            infos[name] = bench_preset(name, args, device, results)
        except Exception as e:  # noqa: BLE001
            infos[name] = {"error": common.error_text(e, 2000)}
            print(f"  {name}: ERROR {infos[name]['error']}")
        common.release(device)
    doc["presets"] = infos
    doc["results"] = results
    print()
    common.print_table(results, COLUMNS)
    print()
    for name, s in infos.items():
        if "error" in s:
            continue
        print(f"{name}: N = {s['N']}, {s['levels']} levels, log2 PQ {s['log_pq']}, dnum {s['dnum']}, levels left "
              f"{s['levels_left']}; keygen {s['keygen_s']:.1f} s, keys {s['key_bytes'] / 2**30:.2f} GiB "
              f"({s['rotation_keys']} rotation keys; full-slot bootstrapping's own "
              f"{s['bts_full_key_bytes'] / 2**30:.2f} GiB), DFT diagonals {s['diag_bytes'] / 2**30:.2f} GiB")
    print(f"anchors (H100): Cheddar {ANCHORS['cheddar_h100_ms']} ms at {ANCHORS['cheddar_bits']} bits; "
          f"floor ~{ANCHORS['theodosian_floor_gb']} GB moved per bootstrapping (Theodosian)")
    return doc
