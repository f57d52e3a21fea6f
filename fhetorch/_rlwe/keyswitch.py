"""Hybrid key switching (Han-Ki 2020) and modulus switching on limb-index bases of a Ring.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.

Each (source, destination) pair gets a cached plan holding its index tensors and
constants, so a switch makes no host-to-device copy (it can be captured in a CUDA graph)
and little Python work.

Every switch is one fused op (csrc/bind/schema.cpp) over any number of leading batch
dimensions: `mod_up` lifts every digit in one INTT, one BConv and one NTT launch;
`mod_up_keyswitch_inner` also forms the inner product with the key (the lifted digits are
never stored); `switch_modulus` gathers, converts and combines in one op. Their
specifications, compositions of the unfused ops, live in tests/_rlwe/reference.py.

Names (docs/glossary.md): keyswitch = mod_up + keyswitch_inner + switch_modulus (ModDown);
mod_up_keyswitch_inner = the first two in one op.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _ops
from ..errors import InternalError
from .._ring import Ring


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
    drop_rows: list  # positions in src of the dropped limbs (the fused op's arguments)
    keep_rows: list  # per destination limb: its position in src, or -1 (an added prime)


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
        raise InternalError("switch_modulus: kept limbs must be contiguous in the destination")
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
        c_sub=b_dst.const([(-pow(prod_d, -1, q)) % q for q in b_dst.primes]),
        drop_rows=drop_pos, keep_rows=[pos.get(i, -1) for i in dst])
    ring.cache[key] = plan
    return plan


def switch_modulus(ring: Ring, x: torch.Tensor, src: tuple, dst: tuple,
                   addend: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., len(src), N) over limbs src -> x * A / D over limbs dst, NTT form.

    D = src - dst (dropped), A = dst - src (added): rescaling (D = top primes, rational
    rescaling adds A), ModDown (D = P) and both at once. The result carries a small
    additive error (the fast base conversion's u), as usual for approximate rescaling.
    addend, over dst, in the same op: (..., k, len(dst), N) with x's leading dimensions is
    added to the first k polynomials of each ciphertext of x (..., c, len(src), N)
    (relinearisation's (d0, d1)); (..., len(dst), N) to the first one (a rotation's sigma(c0)).
    """
    p = switch_plan(ring, src, dst)
    b_drop, b_dst = p.b_drop, p.b_dst
    return _ops.switch_modulus(x.contiguous(), p.drop_rows, p.keep_rows, p.pre, b_drop.mod, b_drop.psi_inv,
                               b_dst.mod, b_dst.psi, p.matrix, p.c_keep, p.c_sub,
                               None if addend is None else addend.contiguous())


@dataclass
class ModUpPlan:
    ext: object  # basis of level + P
    parts: list  # per digit: (offset in level, length, digit basis, others basis, pre, matrix)
    pre: torch.Tensor  # (L,): every digit's INTT post-constants, in level order
    mats: torch.Tensor  # (beta, L + K, alpha_max): digit j's BConv rows to every ext limb (own rows 0)
    bounds: list  # [0, ..., L]: digit j is level positions [bounds[j], bounds[j+1])
    digit_start: int  # the key digit of the level's first digit


def mod_up_plan(ring: Ring, level_idx: range, special_idx: range, alpha: int) -> ModUpPlan:
    key = ("modup", level_idx.start, level_idx.stop, special_idx.start, special_idx.stop, alpha)
    plan = ring.cache.get(key)
    if plan is None:
        ext = tuple(level_idx) + tuple(special_idx)
        b_ext = ring.basis(ext)
        parts, pres, bounds = [], [], [0]
        amax = max(len(d) for _, d in digits(level_idx, alpha))
        mats = torch.zeros((len(digits(level_idx, alpha)), len(ext), amax), dtype=torch.int32, device=ring.device)
        for j, (_, d) in enumerate(digits(level_idx, alpha)):
            bd = ring.basis(tuple(d))
            bo = ring.basis(tuple(i for i in ext if i not in d))
            lo = d.start - level_idx.start
            parts.append((lo, len(d), bd, bo, ring.bconv_pre(bd), ring.bconv_matrix(bd, bo)))
            pres.append(ring.bconv_pre(bd))
            bounds.append(lo + len(d))
            m = ring.bconv_matrix(bd, b_ext)
            mats[j, :, : len(d)] = m
            mats[j, lo : lo + len(d)] = 0  # the digit's own limbs are copied, not converted
        plan = ModUpPlan(b_ext, parts, torch.cat(pres).contiguous(), mats, bounds, level_idx.start // alpha)
        ring.cache[key] = plan
    return plan


def mod_up(ring: Ring, a: torch.Tensor, level_idx: range, special_idx: range, alpha: int) -> torch.Tensor:
    """a (..., L, N) over the level -> (..., beta, L + K, N) over level + P, one lift per digit."""
    plan = mod_up_plan(ring, level_idx, special_idx, alpha)
    e = plan.ext
    return _ops.mod_up(a.contiguous(), plan.pre, e.mod, e.psi, e.psi_inv, plan.mats, plan.bounds)


def keyswitch_inner(ring: Ring, d: torch.Tensor, key, level_idx: range, special_idx: range,
                    alpha: int) -> torch.Tensor:
    """sum_j d_j * key_j over level + P: d (..., beta, L + K, N) -> (..., 2, L + K, N)."""
    ext = mod_up_plan(ring, level_idx, special_idx, alpha).ext
    return _ops.keyswitch_inner(d.contiguous(), key.key_q, key.key_p, level_idx.start, level_idx.start // alpha,
                                ext.mod)


def mod_up_keyswitch_inner(ring: Ring, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
                           addend: torch.Tensor | None = None, c_add: torch.Tensor | None = None,
                           b: torch.Tensor | None = None) -> torch.Tensor:
    """keyswitch_inner(mod_up(a)) over level + P: a (..., L, N) -> (..., 2, L + K, N), one op.

    With addend (..., 2, La, N) and c_add (La,) (Montgomery constants), addend * c_add is
    added to the first La limbs (P * (d0, d1) on the level's limbs). With b (HMult's tensor
    product fused in): a and b are ciphertexts (..., 2, L, N) over the level (b may also be
    one ciphertext (2, L, N) for the whole batch), d = a (tensor) b, and the result is
    keyswitch_inner(mod_up(d2)) + (d0, d1) * c_add on the level's limbs (no addend then)."""
    plan = mod_up_plan(ring, level_idx, special_idx, alpha)
    e = plan.ext
    return _ops.mod_up_keyswitch_inner(a.contiguous(), plan.pre, e.mod, e.psi, e.psi_inv, plan.mats, plan.bounds,
                                       key.key_q, key.key_p, level_idx.start, plan.digit_start,
                                       None if addend is None else addend.contiguous(), c_add,
                                       None if b is None else b.contiguous())


def keyswitch(ring: Ring, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
              dst_idx: tuple | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
    """(u0, u1) with u0 + u1*s = a*s' (key: s' -> s), over dst_idx (default: the level).

    a (..., L, N) -> (..., 2, len(dst), N). addend: as switch_modulus's (added to u0 when
    (..., len(dst), N), to u0 and u1 when (..., 2, len(dst), N))."""
    u = mod_up_keyswitch_inner(ring, a, key, level_idx, special_idx, alpha)
    return switch_modulus(ring, u, tuple(level_idx) + tuple(special_idx),
                          tuple(level_idx) if dst_idx is None else dst_idx, addend)
