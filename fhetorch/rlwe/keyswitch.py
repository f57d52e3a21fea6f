"""Hybrid key switching (Han-Ki 2020) and modulus switching on limb-index bases of a Ring.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.

Each (source, destination) pair gets a cached plan holding its index tensors and
constants, so a switch makes no host-to-device copy (it can be captured in a CUDA graph)
and little Python work.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _ops
from ..ring import Ring


def digits(level_idx: range, alpha: int) -> list:
    """[(digit number, range of limb indices)] covering the level."""
    out = []
    for j in range(level_idx.start // alpha, (level_idx.stop - 1) // alpha + 1):
        lo, hi = max(level_idx.start, j * alpha), min(level_idx.stop, (j + 1) * alpha)
        if lo < hi:
            out.append((j, range(lo, hi)))
    return out


def _runs(positions):
    """Split sorted positions into (start, length) runs of consecutive values."""
    runs = []
    for p in positions:
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1][1] += 1
        else:
            runs.append([p, 1])
    return [tuple(r) for r in runs]


def _gather(x: torch.Tensor, runs, index: torch.Tensor | None) -> torch.Tensor:
    if len(runs) == 1:
        return x.narrow(-2, runs[0][0], runs[0][1]).contiguous()
    return x.index_select(-2, index).contiguous()


@dataclass
class SwitchPlan:
    """round-ish(x * A / D) from limbs src to limbs dst (D = src - dst, A = dst - src)."""

    drop_runs: list
    drop_index: torch.Tensor | None
    keep_runs: list  # positions in src of the kept limbs, in dst order
    keep_index: torch.Tensor | None
    pad: tuple  # zero limbs before/after the kept ones, for added primes
    b_drop: object
    b_dst: object
    pre: torch.Tensor  # INTT post-constants: [x * A * (D/d_j)^-1]_{d_j}
    matrix: torch.Tensor
    c_keep: torch.Tensor  # A / D on every destination limb
    c_sub: torch.Tensor  # -1 / D


def switch_plan(ring: Ring, src: tuple, dst: tuple) -> SwitchPlan:
    key = ("switch", src, dst)
    plan = ring.cache.get(key)
    if plan is not None:
        return plan
    pos = {i: k for k, i in enumerate(src)}
    drop = tuple(i for i in src if i not in set(dst))
    added = tuple(i for i in dst if i not in pos)
    kept_dst = [k for k, i in enumerate(dst) if i in pos]
    if kept_dst and kept_dst != list(range(kept_dst[0], kept_dst[0] + len(kept_dst))):
        raise ValueError("switch_modulus: kept limbs must be contiguous in the destination")
    b_drop, b_dst = ring.basis(drop), ring.basis(dst)
    prod_a = ring.basis(added).product if added else 1
    prod_d = b_drop.product
    dev = ring.device
    drop_pos, keep_pos = [pos[i] for i in drop], [pos[dst[k]] for k in kept_dst]
    front = kept_dst[0] if kept_dst else len(dst)
    plan = SwitchPlan(
        drop_runs=_runs(drop_pos), drop_index=torch.tensor(drop_pos, device=dev),
        keep_runs=_runs(keep_pos), keep_index=torch.tensor(keep_pos, device=dev, dtype=torch.long),
        pad=(front, len(dst) - front - len(kept_dst)), b_drop=b_drop, b_dst=b_dst,
        pre=ring.bconv_pre(b_drop, prod_a), matrix=ring.bconv_matrix(b_drop, b_dst),
        c_keep=b_dst.const([prod_a * pow(prod_d, -1, q) % q for q in b_dst.primes]),
        c_sub=b_dst.const([(-pow(prod_d, -1, q)) % q for q in b_dst.primes]))
    ring.cache[key] = plan
    return plan


def switch_modulus(ring: Ring, x: torch.Tensor, src: tuple, dst: tuple) -> torch.Tensor:
    """x (..., len(src), N) over limbs src -> x * A / D over limbs dst, NTT form.

    D = src - dst (dropped), A = dst - src (added): rescaling (D = top primes, rational
    rescaling adds A), ModDown (D = P) and both at once. The result carries a small
    additive error (the fast base conversion's u), as usual for approximate rescaling.
    """
    p = switch_plan(ring, src, dst)
    t = ring.intt(_gather(x, p.drop_runs, p.drop_index), p.b_drop, post=p.pre)
    y = ring.ntt(_ops.bconv(t, p.b_drop.mod, p.b_dst.mod, p.matrix), p.b_dst)
    if p.keep_runs:
        keep = _gather(x, p.keep_runs, p.keep_index)
        if p.pad != (0, 0):  # rational rescaling adds primes: x * A is 0 modulo them
            keep = torch.nn.functional.pad(keep, (0, 0, p.pad[0], p.pad[1]))
    else:  # no prime kept at all: x * A = 0 on every destination limb
        return _ops.mul_const(y, p.c_sub, p.b_dst.mod)
    return _ops.axpby(keep, p.c_keep, y, p.c_sub, p.b_dst.mod)


@dataclass
class ModUpPlan:
    ext: object  # basis of level + P
    parts: list  # per digit: (offset in level, length, digit basis, others basis, pre, matrix)


def mod_up_plan(ring: Ring, level_idx: range, special_idx: range, alpha: int) -> ModUpPlan:
    key = ("modup", level_idx.start, level_idx.stop, special_idx.start, special_idx.stop, alpha)
    plan = ring.cache.get(key)
    if plan is None:
        ext = tuple(level_idx) + tuple(special_idx)
        parts = []
        for _, d in digits(level_idx, alpha):
            bd = ring.basis(tuple(d))
            bo = ring.basis(tuple(i for i in ext if i not in d))
            parts.append((d.start - level_idx.start, len(d), bd, bo, ring.bconv_pre(bd), ring.bconv_matrix(bd, bo)))
        plan = ModUpPlan(ring.basis(ext), parts)
        ring.cache[key] = plan
    return plan


def mod_up(ring: Ring, a: torch.Tensor, level_idx: range, special_idx: range, alpha: int):
    """a (L, N) over the level -> (beta, L + K, N) over level + P, one lift per digit."""
    plan = mod_up_plan(ring, level_idx, special_idx, alpha)
    out = []
    for lo, cnt, bd, bo, pre, mat in plan.parts:
        part = a.narrow(-2, lo, cnt).contiguous()
        y = ring.ntt(_ops.bconv(ring.intt(part, bd, post=pre), bd.mod, bo.mod, mat), bo)
        out.append(torch.cat([y.narrow(-2, 0, lo), part, y.narrow(-2, lo, y.shape[-2] - lo)], dim=-2))
    return torch.stack(out)


def key_switch_inner(ring: Ring, d: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int):
    """sum_j d_j * key_j over level + P: (2, L + K, N)."""
    ext = mod_up_plan(ring, level_idx, special_idx, alpha).ext
    return _ops.keyswitch_inner(d, key.key_q, key.key_p, level_idx.start, level_idx.start // alpha, ext.mod)


def key_switch(ring: Ring, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
               dst_idx: tuple | None = None):
    """(u0, u1) with u0 + u1*s = a*s' (key: s' -> s), over dst_idx (default: the level)."""
    d = mod_up(ring, a, level_idx, special_idx, alpha)
    u = key_switch_inner(ring, d, key, level_idx, special_idx, alpha)
    return switch_modulus(ring, u, tuple(level_idx) + tuple(special_idx),
                          tuple(level_idx) if dst_idx is None else dst_idx)
