"""The CPUs this process may really use, and torch's thread count capped to them.

torch sizes its thread pool by the machine's cores; in a container or a CI job limited to 2
CPUs (an affinity mask, or a cgroup CPU quota that no core count shows) that is more threads
than CPUs, and each parallel region then waits for threads that are not running: training
and the encrypted run slow down several times.
"""
from __future__ import annotations

import math
import os

import torch


def _words(path: str) -> list:
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return []


def _limit(directory: str, v2: bool) -> float | None:
    """CPUs a cgroup directory's quota allows: v2 cpu.max "quota period", v1 cpu.cfs_quota_us /
    cpu.cfs_period_us; None when it has none."""
    try:
        if v2:
            q = _words(os.path.join(directory, "cpu.max"))
            return int(q[0]) / int(q[1]) if len(q) == 2 and q[0] != "max" else None
        q, p = _words(os.path.join(directory, "cpu.cfs_quota_us")), _words(os.path.join(directory, "cpu.cfs_period_us"))
        return int(q[0]) / int(p[0]) if q and p and int(q[0]) > 0 and int(p[0]) > 0 else None
    except ValueError:
        return None


def cgroup_cpus(root: str = "/sys/fs/cgroup", self_cgroup: str = "/proc/self/cgroup") -> float | None:
    """The smallest CPU quota over this process's cgroup and its parents (v1 or v2), None if unlimited."""
    try:
        with open(self_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        v2 = controllers == ""
        if v2:
            bases = [root, os.path.join(root, "unified")]
        elif "cpu" in controllers.split(","):
            bases = [os.path.join(root, c) for c in dict.fromkeys((controllers, "cpu", "cpu,cpuacct"))]
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for base in bases:
            for k in range(len(parts), -1, -1):
                limit = _limit(os.path.join(base, *parts[:k]), v2)
                if limit:
                    limits.append(limit)
    return min(limits) if limits else None


def available_cpus(root: str = "/sys/fs/cgroup", self_cgroup: str = "/proc/self/cgroup") -> int:
    """min(the CPUs in this process's affinity mask, the cgroup quota rounded up), at least 1."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpus(root, self_cgroup)
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)


def limit_threads() -> int:
    """Cap torch's intra-op threads (fhetorch's CPU kernels run on the same pool) at
    available_cpus(); returns the thread count in use."""
    n = available_cpus()
    if torch.get_num_threads() > n:
        torch.set_num_threads(n)
    return torch.get_num_threads()
