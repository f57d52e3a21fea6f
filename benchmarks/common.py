"""Shared machinery of the benchmark suites: timing, environment, JSON, tables.

Timing on CUDA uses torch.cuda.Event pairs recorded on the current stream; every repeat
starts from an idle GPU (a synchronize before it), so one sample is the latency of one
call, launches included. On CPU time.perf_counter takes the same place. Statistics are
in microseconds: median, min, p10, p90 (linear interpolation between order statistics).
"""
from __future__ import annotations

import datetime
import gc
import json
import math
import os
import platform
import re
import subprocess
import time
from typing import Callable

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPO, "benchmarks", "results")


# --- environment -----------------------------------------------------------------------
def git_commit() -> str:
    """Short hash of HEAD, "-dirty" when tracked files differ from it.

    $FHETORCH_COMMIT, when set, wins: a tree copied to a GPU machine may carry a stale .git
    (seen: it reported an older HEAD, "-dirty"). Outside a git checkout without it: "unknown".
    """
    if os.environ.get("FHETORCH_COMMIT"):
        return os.environ["FHETORCH_COMMIT"]
    try:
        h = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("FHETORCH_COMMIT", "unknown")
    try:
        st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        st = ""
    return h + ("-dirty" if st else "")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "\
           f"{torch.get_num_threads()} torch threads)"


def device_slug(device: torch.device) -> str:
    """Short file-name tag: 'nvidia-h100-80gb-hbm3', 'cpu'."""
    if device.type != "cuda":
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(device).lower()).strip("-")


def environment(device: torch.device) -> dict:
    return {
        "device": device_name(device),
        "commit": git_commit(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "host": platform.node(),
    }


def default_json_path(device: torch.device, suite: str) -> str:
    day = datetime.date.today().isoformat()
    return os.path.join(RESULTS_DIR, f"{day}-{device_slug(device)}-{suite}.json")


# --- statistics ---------------------------------------------------------------------------
def percentile(sorted_values: list, q: float) -> float:
    """q in [0, 1], linear interpolation (numpy's default) over already sorted values."""
    if not sorted_values:
        return math.nan
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_us: list) -> dict:
    s = sorted(times_us)
    return {
        "median_us": percentile(s, 0.5),
        "min_us": s[0],
        "p10_us": percentile(s, 0.1),
        "p90_us": percentile(s, 0.9),
        "mean_us": sum(s) / len(s),
        "repeats": len(s),
    }


# --- timing -------------------------------------------------------------------------------
def sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_eager(fn: Callable, device: torch.device, repeat: int, warmup: int) -> dict:
    """Time `repeat` calls of fn() after `warmup` untimed ones.

    CUDA: events around each call on the current stream (GPU time from the first launch
    to the last kernel's end, Python launch gaps included); also reports the host-side
    time of the call (host_median_us). CPU: perf_counter around each call.
    """
    for _ in range(warmup):
        fn()
    sync(device)
    if device.type != "cuda":
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return summarize(times)
    stream = torch.cuda.current_stream(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    host = []
    for i in range(repeat):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        starts[i].record(stream)
        fn()
        ends[i].record(stream)
        host.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize(device)
    out = summarize([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)])
    out["host_median_us"] = percentile(sorted(host), 0.5)
    return out


def capture_graph(fn: Callable, device: torch.device, warmup: int = 3):
    """PyTorch's capture recipe: warm up on a side stream, then capture one call of fn.

    Returns (graph, static output). The output stays valid (and is overwritten) by replays.
    """
    s = torch.cuda.Stream(device)
    s.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(s)
    torch.cuda.synchronize(device)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize(device)
    return g, out


def time_graph(fn: Callable, device: torch.device, repeat: int, warmup: int) -> dict:
    """Capture fn() in a CUDA graph, then time `repeat` replays (events, idle GPU before each).

    Raises whatever capture raises; the caller records it.
    """
    g, out = capture_graph(fn, device, warmup=max(warmup, 3))
    try:
        stream = torch.cuda.current_stream(device)
        for _ in range(max(warmup, 1)):
            g.replay()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
        for i in range(repeat):
            torch.cuda.synchronize(device)
            starts[i].record(stream)
            g.replay()
            ends[i].record(stream)
        torch.cuda.synchronize(device)
        return summarize([s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)])
    finally:
        del out
        g.reset()
        del g


H100_COPY_GBS = 3000.0  # our H100's measured device-to-device copy bandwidth (docs/benchmarks.md)


def copy_bandwidth_gbs(device: torch.device, mib: int = 256, repeat: int = 5) -> float:
    """Bytes read + written per second by a copy of `mib` MiB on the device (best of `repeat`):
    the memory bandwidth a traffic floor is measured against on this machine."""
    src = torch.ones(mib * 2**18, dtype=torch.int32, device=device)
    dst = torch.empty_like(src)
    best = math.inf
    for _ in range(repeat + 1):  # the first copy touches fresh pages
        sync(device)
        t = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * src.numel() * 4 / best / 1e9


def release(device: torch.device):
    """Drop garbage and cached blocks so the next measurement starts clean."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def error_text(e: BaseException, limit: int = 2000) -> str:
    """'Type: message', followed by the exceptions it was raised from or while handling
    (a failed capture's first error is usually the informative one)."""
    parts, seen = [], set()
    while e is not None and id(e) not in seen and len(parts) < 4:
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}".strip())
        e = e.__cause__ or e.__context__
    t = parts[0] + "".join(f" [while handling {p}]" for p in parts[1:])
    return t if len(t) <= limit else t[:limit] + " ..."


# --- output ---------------------------------------------------------------------------------
def write_json(path: str, doc: dict):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")


def _fmt(v, spec: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if spec and not isinstance(v, str):
        return format(v, spec)
    return str(v)


def print_table(rows: list, columns: list, out=None):
    """columns: [(header, key or callable(row), format spec, 'l' or 'r')]."""
    cells = []
    for r in rows:
        line = []
        for _, key, spec, _ in columns:
            v = key(r) if callable(key) else r.get(key)
            line.append(_fmt(v, spec))
        cells.append(line)
    widths = [max([len(c[0])] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]

    def fmt_line(vals):
        return "  ".join(v.ljust(w) if c[3] == "l" else v.rjust(w) for v, w, c in zip(vals, widths, columns))

    print(fmt_line([c[0] for c in columns]), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for line in cells:
        print(fmt_line(line), file=out)
