"""DRAM bytes of one key switch, kernel by kernel, as the L2 really carries them between kernels.

Runs one HRot and one HMult + rescale at 48x12 (after a 200 MB scrub each) between
cudaProfilerStart / Stop, for Nsight Compute in application replay (kernel replay restores memory
between a kernel's passes, which hides the L2 reuse between kernels):

    ncu --replay-mode application --profile-from-start off --cache-control none --clock-control none \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
        --csv --print-units base python3 scripts/ks_ncu.py > ncu.csv
    python3 scripts/ks_ncu.py --summary ncu.csv

--summary prints a kernel table (us, DRAM MB read / written, L2 hit rate) and the totals per op.
"""
from __future__ import annotations

import argparse
import collections
import csv
import os
import sys

OPS = ("hrot", "hmult_rescale")


def run(ops) -> None:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks import ops as bops

    dev = torch.device("cuda")
    ctx, a, b, _, _ = bops.make_operands(bops.build_params("48x12")[0], dev)
    fns = {op: bops.make_op(ctx, op, a, b) for op in ops}
    for _ in range(3):
        for f in fns.values():
            f()
    torch.cuda.synchronize()
    for op, f in fns.items():
        junk = torch.empty(50 * 2**20, dtype=torch.int32, device=dev)  # 200 MB: the L2 starts cold-ish
        junk.add_(1)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        print(f"profiled {op}", file=sys.stderr, flush=True)


def summary(path: str, ops) -> None:
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    head = rows[0]
    col = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
    kernels = collections.OrderedDict()
    for r in rows[1:]:
        d = kernels.setdefault(int(r[col["ID"]]), {"name": r[col["Kernel Name"]]})
        d[r[col["Metric Name"]]] = float(r[col["Metric Value"]].replace(",", ""))
    per_op = len(kernels) // len(ops) if ops else len(kernels)
    tot = collections.defaultdict(float)
    for n, (i, d) in enumerate(kernels.items()):
        name = d["name"]
        name = name[name.find("<") + 1:][:70] if "program_kernel" in name else name[:70]
        op = ops[min(n // per_op, len(ops) - 1)]
        us, rd, wr = d.get("gpu__time_duration.sum", 0) / 1e3, d.get("dram__bytes_read.sum", 0) / 1e6, \
            d.get("dram__bytes_write.sum", 0) / 1e6
        tot[op, "us"] += us
        tot[op, "rd"] += rd
        tot[op, "wr"] += wr
        print(f"{i:>3} {op:<14} {us:7.1f} us  rd {rd:6.1f} MB  wr {wr:6.1f} MB  "
              f"L2 hit {d.get('lts__t_sector_hit_rate.pct', float('nan')):5.1f} %  {name}")
    for op in ops:
        print(f"# {op}: kernels {tot[op, 'us']:.1f} us, DRAM read {tot[op, 'rd']:.1f} MB, written {tot[op, 'wr']:.1f} MB, "
              f"total {tot[op, 'rd'] + tot[op, 'wr']:.1f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", default=list(OPS), choices=["hmult", "hmult_rescale", "hrot", "rescale"])
    ap.add_argument("--summary", metavar="CSV", help="print the table of an ncu --csv --print-units base output")
    args = ap.parse_args()
    if args.summary:
        summary(args.summary, args.ops)
    else:
        run(args.ops)


if __name__ == "__main__":
    main()
