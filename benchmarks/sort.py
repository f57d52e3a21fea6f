"""Sort suite: the bitonic sort of n encrypted values (fhetorch/circuits/sort.py).

For each preset (default n16-bts35 and n16-bts40 at 2^14 values, the default composite sign;
--quick or a CPU: toy-n13-bts, 2 values, the shallow sign (7, 3) at eps 2^-3, which fits the
top level without bootstrapping): keygen (the sparse packing's own bootstrapping keys), one
sort for precision (max |encrypted - sorted plaintext| in bits, and against the plaintext
simulation plain_sort), then latency: eager (median of min(repeat, 3)) and, on CUDA, the whole
sort replayed as one CUDA graph; the bootstraps and pairs it ran (equal to the level plan) and
the time of one bootstrap and one pair bootstrap of the packing, so that the sort's time splits
into bootstrapping and the rest (sign polynomials, masks, rotations). The H100 model:
(bootstraps + pairs) x the measured sparse bootstrap (29.5 ms at 2^13, n16-bts40) + stages x
(sign multiplications + 1) x HMult (393 us at 48 limbs: an upper bound at the user levels).
"""
from __future__ import annotations

import math
import time
import warnings

import torch

from . import common

ANCHORS = {"cheddar_h100_pcie_s": 10.2, "cheddar_bits": 12.08, "target_s": 5.0, "target_bits": 12.0}
H100 = {"bootstrap_sparse_ms": 29.5, "hmult_48_limbs_ms": 0.393, "hrot_48_limbs_ms": 0.374}


def h100_model(counts, mults: int) -> dict:
    """Seconds on the H100 from the level plan and the figures of docs/benchmarks.md."""
    bts = (counts.bootstraps + counts.pair_bootstraps) * H100["bootstrap_sparse_ms"] / 1e3
    poly = counts.stages * (mults + 1) * H100["hmult_48_limbs_ms"] / 1e3
    rot = counts.rotations * H100["hrot_48_limbs_ms"] / 1e3
    return {"model_bootstrap_s": bts, "model_poly_s": poly, "model_rotation_s": rot, "model_total_s": bts + poly + rot}


def bench_preset(name: str, n: int, sign: dict, args, device, results: list) -> dict:
    import fhetorch as fhe
    from fhetorch.circuits.polynomial import composite_cost
    from fhetorch.circuits.sort import BitonicSort

    cuda = device.type == "cuda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = fhe.ckks.Context(name, device=device)
    bs = BitonicSort(ctx, n, **sign)
    cfg = ctx.bootstrap_config
    plan = bs.plan(cfg.user_levels, ctx.max_level)
    t0 = time.perf_counter()
    if plan.bootstraps + plan.pair_bootstraps:
        ctx.keygen(bootstrap=True, bootstrap_slots=[n])
    else:
        ctx.keygen()
    common.sync(device)
    mults = composite_cost(list(bs.stages)).mults
    info = {"preset": name, "n": n, "degrees": list(bs.degrees), "eps": bs.eps,
            "stage_depth": bs.stage_depth, "sign_mults": mults, "sign_error": bs.sign_error,
            "error_bound": bs.error_bound(), "keygen_s": time.perf_counter() - t0, "key_bytes": ctx.key_bytes(),
            "plan": plan.__dict__, "h100_model": h100_model(plan, mults)}

    def record(case, **kw):
        row = {"preset": name, "case": case, **kw}
        results.append(row)
        t = f"{row['median_us'] / 1e6:8.3f} s ({row['mode']})" if "median_us" in row else ""
        print(f"  {name:12s} {case:34s} {t} {row.get('error', '')[:100]}", flush=True)
        return row

    gen = torch.Generator().manual_seed(1)
    x = (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1).to(device)
    ct = ctx.encrypt_vector(x.to(torch.complex128), slots=n)
    out = bs(ct)
    got = ctx.decrypt_vector(out).real[:n].cpu()
    err = float((got - torch.sort(x.cpu()).values).abs().max())
    sim = float((got - bs.plain(x.cpu())).abs().max())
    info.update(max_err=err, bits=-math.log2(err) if err > 0 else math.inf, vs_plain=sim,
                counts=bs.counts.__dict__, level_out=out.level)
    print(f"  {name}: {n} values, {err:.3e} max error ({info['bits']:.2f} bits), plain simulation within {sim:.1e}; "
          f"{bs.counts.bootstraps} + {bs.counts.pair_bootstraps} pair bootstraps (plan {plan.bootstraps} + "
          f"{plan.pair_bootstraps})", flush=True)

    repeat = min(args.repeat, 3)
    cases = {"sort": lambda: bs(ct).data}
    if plan.bootstraps + plan.pair_bootstraps:
        bt = ctx.bootstrapper
        low = ctx.encrypt_vector(x.to(torch.complex128), slots=n, level=0)
        cases["bootstrap"] = lambda: bt.bootstrap(low).data
        cases["bootstrap pair"] = lambda: bt.bootstrap_pair(low, low)[0].data
    for case, fn in cases.items():
        for mode in (["eager", "graph"] if cuda and not args.eager_only else ["eager"]):
            if case != "sort" and mode == "graph":
                continue
            row = {"mode": mode}
            try:
                t = (common.time_eager(fn, device, repeat, min(args.warmup, 1)) if mode == "eager"
                     else common.time_graph(fn, device, repeat, 1))
                row.update(t)
            except Exception as e:  # noqa: BLE001 - recorded, the suite goes on
                row["error"] = common.error_text(e, 300)
            record(case, **row)
            common.release(device)
    rows = {(r["case"], r["mode"]): r for r in results if r["preset"] == name and "median_us" in r}
    if ("bootstrap", "eager") in rows and ("sort", "eager") in rows:
        b, p = rows[("bootstrap", "eager")]["median_us"] / 1e6, rows[("bootstrap pair", "eager")]["median_us"] / 1e6
        total = rows[("sort", "eager")]["median_us"] / 1e6
        boot = plan.bootstraps * b + plan.pair_bootstraps * p
        info["breakdown_eager_s"] = {"bootstrapping": boot, "sign, masks, rotations": total - boot, "total": total}
    return info


def run(args, device: torch.device) -> dict:
    quick = args.quick or device.type != "cuda"
    if quick:
        configs = [("toy-n13-bts", 2, {"degrees": (7, 3), "eps": 2.0**-3})]
    else:
        presets = args.shapes if args.shapes != ["48x12", "24x12", "preset"] else ["n16-bts35", "n16-bts40"]
        configs = [(p, 2**14, {}) for p in presets]
    doc = {"suite": "sort", **common.environment(device), "anchors": ANCHORS, "h100_figures": H100}
    doc["config"] = {"repeat": min(args.repeat, 3), "quick": quick}
    print(f"suite sort | device {doc['device']} | commit {doc['commit']} | {doc['date']} | torch {doc['torch']}")
    results, infos = [], {}
    for name, n, sign in configs:
        try:
            infos[name] = bench_preset(name, n, sign, args, device, results)
        except Exception as e:  # noqa: BLE001
            infos[name] = {"error": common.error_text(e, 2000)}
            print(f"  {name}: ERROR {infos[name]['error']}")
        common.release(device)
    doc["presets"], doc["results"] = infos, results
    print()
    common.print_table(results, [("preset", "preset", "", "l"), ("case", "case", "", "l"), ("mode", "mode", "", "l"),
                                 ("median_s", lambda r: r["median_us"] / 1e6 if "median_us" in r else None, ".3f", "r"),
                                 ("note", lambda r: r.get("error", "")[:60], "", "l")])
    for name, s in infos.items():
        if "error" not in s:
            m = s["h100_model"]
            print(f"{name}: {s['n']} values, {s['bits']:.2f} bits (bound {s['error_bound']:.1e}), stage depth "
                  f"{s['stage_depth']}, {s['plan']['bootstraps']} + {s['plan']['pair_bootstraps']} pair bootstraps; "
                  f"H100 model {m['model_total_s']:.2f} s (bootstrapping {m['model_bootstrap_s']:.2f} s)")
    print(f"anchors: Cheddar {ANCHORS['cheddar_h100_pcie_s']} s at {ANCHORS['cheddar_bits']} bits (H100 PCIe); "
          f"target <= {ANCHORS['target_s']} s at >= {ANCHORS['target_bits']} bits")
    return doc
