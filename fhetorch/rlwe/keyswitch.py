"""Hybrid key switching (Han-Ki 2020) on limb-index bases of a Ring.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.
"""
from __future__ import annotations

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


def switch_modulus(ring: Ring, x: torch.Tensor, src: tuple, dst: tuple) -> torch.Tensor:
    """x (..., len(src), N) over limbs src -> round-ish(x * A / D) over limbs dst, NTT form.

    D = src - dst (dropped), A = dst - src (added): rescaling (D = top primes, rational
    rescaling adds A), ModDown (D = P) and both at once. The result carries a small
    additive error (the fast base conversion's u), as usual for approximate rescaling.
    """
    pos = {i: k for k, i in enumerate(src)}
    drop = tuple(i for i in src if i not in set(dst))
    added = tuple(i for i in dst if i not in pos)
    b_drop, b_dst = ring.basis(drop), ring.basis(dst)
    prod_a = ring.basis(added).product if added else 1
    prod_d = b_drop.product
    x_drop = _select(x, [pos[i] for i in drop])
    y = ring.ntt(ring.bconv(x_drop, b_drop, b_dst, factor=prod_a), b_dst)
    if added:
        keep = torch.zeros(x.shape[:-2] + (len(dst), x.shape[-1]), dtype=x.dtype, device=x.device)
        kept_pos = [k for k, i in enumerate(dst) if i in pos]
        if kept_pos:  # (rational rescaling may keep no prime at all: then x*A = 0 on every limb)
            keep[..., kept_pos, :] = _select(x, [pos[dst[k]] for k in kept_pos])
    else:
        keep = _select(x, [pos[i] for i in dst])
    c_keep = b_dst.const([prod_a * pow(prod_d, -1, q) % q for q in b_dst.primes])
    c_sub = b_dst.const([(-pow(prod_d, -1, q)) % q for q in b_dst.primes])
    return _ops.axpby(keep, c_keep, y, c_sub, b_dst.mod)


def _select(x: torch.Tensor, positions: list) -> torch.Tensor:
    """Limbs at `positions` (a narrow view when they are contiguous)."""
    if positions == list(range(positions[0], positions[0] + len(positions))):
        return x.narrow(-2, positions[0], len(positions)).contiguous()
    return x.index_select(-2, torch.tensor(positions, device=x.device)).contiguous()


def mod_up(ring: Ring, a: torch.Tensor, level_idx: range, special_idx: range, alpha: int):
    """a (L, N) over the level -> (beta, L + K, N) over level + P, one lift per digit."""
    ext = tuple(level_idx) + tuple(special_idx)
    out = []
    for _, d in digits(level_idx, alpha):
        lo = d.start - level_idx.start
        part = a.narrow(-2, lo, len(d)).contiguous()
        others = tuple(i for i in ext if i not in d)
        y = ring.ntt(ring.bconv(part, ring.basis(tuple(d)), ring.basis(others)), ring.basis(others))
        out.append(torch.cat([y.narrow(-2, 0, lo), part, y.narrow(-2, lo, y.shape[-2] - lo)], dim=-2))
    return torch.stack(out)


def key_switch_inner(ring: Ring, d: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int):
    """sum_j d_j * key_j over level + P: (2, L + K, N)."""
    first_digit = level_idx.start // alpha
    b = ring.basis(tuple(level_idx) + tuple(special_idx))
    return _ops.keyswitch_inner(d, key.key_q, key.key_p, level_idx.start, first_digit, b.mod)


def key_switch(ring: Ring, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
               dst_idx: tuple | None = None):
    """(u0, u1) with u0 + u1*s = a*s' (key: s' -> s), over dst_idx (default: the level)."""
    d = mod_up(ring, a, level_idx, special_idx, alpha)
    u = key_switch_inner(ring, d, key, level_idx, special_idx, alpha)
    return switch_modulus(ring, u, tuple(level_idx) + tuple(special_idx),
                          tuple(level_idx) if dst_idx is None else dst_idx)
