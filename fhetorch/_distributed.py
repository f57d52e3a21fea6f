"""Collectives on ciphertext tensors over a torch.distributed process group (issue 15).

One rule shares work out everywhere (TFHE waves, HELR's data, a compiled model's inputs):
rank r of p takes items r, r + p, r + 2p, ... (`shard`). A batch laid out group after group
(a wave's ciphertexts node by node) so gives every rank an equal share, +-1, of each group:
ArctyrEX's equal share of each operation type per device.

What crosses ranks is exact integer data: LWE rows are gathered as they are, and residues
mod q are summed as int64 (p residues < 2^31 each) and reduced mod q once, which equals
adding them in one process (the kernels keep residues canonical, in [0, q)). Works with any
backend torch.distributed has for the tensors' device (NCCL on GPUs, gloo on CPUs).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .errors import DistributedError


def group_size(group) -> int:
    """The ranks of `group` (1 without torch.distributed initialised). Raises nothing."""
    if not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size(group)


def group_rank(group) -> int:
    """This process's rank in `group` (0 without torch.distributed initialised). Raises nothing."""
    if not dist.is_available() or not dist.is_initialized():
        return 0
    return dist.get_rank(group)


def check_group(group, what: str) -> None:
    """Raises DistributedError unless torch.distributed is initialised (group None: the default group)."""
    if not dist.is_available() or not dist.is_initialized():
        raise DistributedError(f"{what}: torch.distributed is not initialised; call "
                               "torch.distributed.init_process_group (torchrun sets its environment) first")


def global_rank(group, rank: int) -> int:
    """Rank `rank` of `group` as torch.distributed's collectives name it (None: the default group,
    whose ranks are global). Raises nothing."""
    return rank if group is None else dist.get_global_rank(group, rank)


def shard(n: int, rank: int, size: int) -> slice:
    """The items of rank `rank` among n: rank, rank + size, ... (a slice). Raises nothing."""
    return slice(rank, n, size)


def gather_rows(local: torch.Tensor, n: int, group) -> torch.Tensor:
    """Every rank's shard of rows (rows `shard(n, rank, size)` of a (n, w) whole, in order) back
    into the whole (n, w) on every rank: one all_gather of equal, zero-padded parts."""
    size = group_size(group)
    if size == 1:
        return local
    m = -(-n // size)  # the largest shard
    part = local.new_zeros(m, *local.shape[1:])
    part[: local.shape[0]] = local
    parts = [torch.empty_like(part) for _ in range(size)]
    dist.all_gather(parts, part, group=group)
    # rank i's j-th row is item j size + i of the whole
    return torch.stack(parts, 1).reshape(size * m, *local.shape[1:])[:n]


def sum_residues(data: torch.Tensor, moduli: torch.Tensor, group) -> torch.Tensor:
    """The sum over the ranks of `group` of int32 residues in [0, q), reduced mod q: data
    (..., L, N), moduli (L,) int64 on data's device. One all_reduce of int64 sums."""
    if group_size(group) == 1:
        return data
    wide = data.to(torch.int64)
    dist.all_reduce(wide, op=dist.ReduceOp.SUM, group=group)
    return torch.remainder(wide, moduli.view(-1, 1)).to(torch.int32)


def check_same(values: list, group, what: str, names: str):
    """Raises DistributedError unless every rank of `group` passes the same int64 `values`
    (shapes, levels, scales, checksums): the guard before a collective whose ranks must agree.
    One tiny all_gather; the comparison is on the host (one sync)."""
    size = group_size(group)
    if size == 1:
        return
    mine = torch.tensor(values, dtype=torch.int64)
    if dist.get_backend(group) == "nccl":
        mine = mine.cuda()
    parts = [torch.empty_like(mine) for _ in range(size)]
    dist.all_gather(parts, mine, group=group)
    every = torch.stack(parts).cpu()
    if not bool((every == every[0]).all()):
        differ = [r for r in range(size) if not torch.equal(every[r], every[0])]
        raise DistributedError(f"{what}: the ranks of the process group disagree on {names} (ranks {differ} differ "
                               "from rank 0); every rank must call it with the same operands")


def checksum(data: torch.Tensor) -> int:
    """An int64 fingerprint of an integer tensor (its rows' sums times their position + 1, wrapping
    mod 2^64, so equal data gives equal checksums on every device, in any summation order). One
    pass over the data and a host sync. Raises nothing."""
    rows = data.reshape(data.shape[0] if data.dim() > 1 else 1, -1).to(torch.int64).sum(1)
    weights = torch.arange(1, rows.numel() + 1, device=rows.device, dtype=torch.int64)
    return int((rows * weights).sum())
