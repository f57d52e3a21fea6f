"""python -m benchmarks --suite ops [--json PATH] [--device cuda|cpu] [--repeat R] [--shapes ...]
(the distributed suite under torchrun: torchrun --nproc-per-node 2 -m benchmarks --suite distributed)

Runs one benchmark suite, prints a table and writes JSON (see benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import importlib
import sys

import torch

from . import common

# suite name -> module with run(args, device) -> dict
SUITES = {
    "ops": "benchmarks.ops",
    "bts": "benchmarks.bts",
    "resnet20": "benchmarks.resnet20",
    "helr": "benchmarks.helr",
    "tfhe": "benchmarks.tfhe",
    "switch": "benchmarks.switch",
    "sort": "benchmarks.sort",
    "distributed": "benchmarks.distributed",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[3])
    p.add_argument("--suite", default="ops", choices=sorted(SUITES), help="suite to run (default: ops)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--repeat", type=int, default=None,
                   help="timed repeats per op and mode (default: 50 on cuda, 5 on cpu, 3 with --quick)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first (default: 5 on cuda, 1 on cpu)")
    p.add_argument("--shapes", default=None,
                   help="comma list of 48x12, 24x12, preset, toy (default: 48x12,24x12,preset; toy with --quick)")
    p.add_argument("--ops", default=None, help="comma list of ops to run (default: all of the suite's)")
    p.add_argument("--bandwidth-gbs", type=float, default=None,
                   help="memory bandwidth of the traffic floor, GB/s (default: on CUDA 3000, our H100's copy "
                        "bandwidth; on CPU this machine's copy bandwidth, measured at the start)")
    p.add_argument("--quick", action="store_true", help="smoke test: toy params (toy-n12), repeat 3, seconds on CPU")
    p.add_argument("--eager-only", action="store_true", help="skip the CUDA-graph mode")
    p.add_argument("--no-check", action="store_true", help="skip the decrypt-and-compare sanity check")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="where to write the JSON; 'auto': benchmarks/results/<date>-<device>-<suite>.json "
                        "(the default for full runs; --quick runs write only when given a path)")
    p.add_argument("--no-json", action="store_true", help="write no JSON")
    p.add_argument("--preset", default=None, help="resnet20 suite: the CKKS preset (default n16-bts40 on CUDA)")
    p.add_argument("--model", default=None, choices=("cifar", "digits"),
                   help="resnet20 suite: the CIFAR-10 checkpoint ($FHETORCH_DATA or ../shared/data; CUDA only) or "
                        "the digits network (default: cifar where it can run)")
    p.add_argument("--batches", default=None,
                   help="tfhe suite: comma list of batch sizes (default 1,132,1024,4096,16384; 1,8 with --quick); switch suite: value counts (default 1024,4096,32768; 64 with --quick)")
    p.add_argument("--max-call-s", type=float, default=60.0,
                   help="tfhe suite: an op slower than this per call skips its larger batches (default 60)")
    p.add_argument("--no-circuits", action="store_true", help="tfhe suite: skip the radix-circuit figures")
    args = p.parse_args(argv)
    if args.batches is not None:
        args.batches = [int(b) for b in args.batches.split(",") if b.strip()]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    module = SUITES[args.suite]
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("benchmarks: --device cuda but torch sees no CUDA GPU; use --device cpu", file=sys.stderr)
            return 2
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
    cuda = device.type == "cuda"
    if args.repeat is None:
        args.repeat = 3 if args.quick or args.suite == "distributed" else (50 if cuda else 5)
    if args.warmup is None:
        args.warmup = 1 if args.quick or not cuda else 5
    if args.repeat < 1 or args.warmup < 0:
        print("benchmarks: --repeat must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    if args.bandwidth_gbs is None:
        args.bandwidth_gbs = common.H100_COPY_GBS if cuda else common.copy_bandwidth_gbs(device)
        args.bandwidth_source = "H100 copy bandwidth" if cuda else "measured copy bandwidth of this CPU"
    else:
        args.bandwidth_source = "--bandwidth-gbs"
    shapes = args.shapes or ("toy" if args.quick else "48x12,24x12,preset")
    args.shapes = [s.strip() for s in shapes.split(",") if s.strip()]
    args.ops = [s.strip() for s in args.ops.split(",") if s.strip()] if args.ops else None

    doc = importlib.import_module(module).run(args, device)
    if doc is None:  # a rank other than 0 of a distributed suite: rank 0 writes
        return 0

    path = args.json
    if not args.no_json and (path or not args.quick):
        if path in (None, "auto"):
            path = common.default_json_path(device, args.suite)
        common.write_json(path, doc)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
