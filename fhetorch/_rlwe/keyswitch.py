"""Hybrid key switching (Han-Ki 2020) and modulus switching on limb-index bases of a Ring.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.

Every function takes the context's ModulusPlans (fhetorch/_rlwe/plans.py): each (source,
destination) pair's tables are built once, so a switch makes no host-to-device copy (it can
be captured in a CUDA graph) and little Python work.

The hot paths are fused ops (csrc/bind/schema.cpp): `mod_up` lifts every digit in one
INTT, one BConv and one NTT launch; `mod_up_keyswitch` also folds the inner product with
the key into the NTT's last phase (the lifted digits are never stored); `switch_modulus`
gathers, converts and combines in one op. The per-step compositions they replace stay
here (`*_reference`) as the specification the fused ops are tested against, and as the
path for CUDA sizes the fused kernels do not cover (N outside [2^10, 2^17]).
"""
from __future__ import annotations

import torch

from .. import _ops
from .._ring import Ring
from .plans import ModulusPlans, digits, mod_up_plan, switch_plan  # noqa: F401  (digits, *_plan: re-exported)


def fused_ok(ring: Ring) -> bool:
    """Whether the fused key-switching ops serve this ring (CPU: always; CUDA: 2^10 <= N <= 2^17)."""
    return ring.device.type != "cuda" or 10 <= ring.log_n <= 17


def _gather(x: torch.Tensor, runs, index: torch.Tensor | None) -> torch.Tensor:
    if len(runs) == 1:
        return x.narrow(-2, runs[0][0], runs[0][1]).contiguous()
    return x.index_select(-2, index).contiguous()


def switch_modulus(plans: ModulusPlans, x: torch.Tensor, src: tuple, dst: tuple,
                   addend: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., len(src), N) over limbs src -> x * A / D over limbs dst, NTT form.

    D = src - dst (dropped), A = dst - src (added): rescaling (D = top primes, rational
    rescaling adds A), ModDown (D = P) and both at once. The result carries a small
    additive error (the fast base conversion's u), as usual for approximate rescaling.
    addend (k, len(dst), N) or (len(dst), N), over dst: added to the first k polynomials
    of the result (relinearisation's (d0, d1), a rotation's sigma(c0)) in the same op.
    """
    p = plans.switch(src, dst)
    if p.drop_rows and fused_ok(plans.ring):
        x = x.contiguous()
        b_drop, b_dst = p.b_drop, p.b_dst
        ring = plans.ring
        return _ops.switch_modulus(x, p.drop_rows, p.keep_rows, p.pre, b_drop.mod, ring.psi_inv, b_dst.mod,
                                   ring.psi, p.matrix, p.c_keep, p.c_sub,
                                   None if addend is None else addend.contiguous(), p.psi_inv_drop_rows,
                                   p.psi_dst_rows)
    y = switch_modulus_reference(plans, x, src, dst)
    return y if addend is None else _add_front(y, addend, p.b_dst.mod)


def _add_front(y: torch.Tensor, addend: torch.Tensor, mod: torch.Tensor) -> torch.Tensor:
    """y with addend added to its first addend.shape[0] polynomials (one when addend is 2-D)."""
    a = addend if addend.dim() == 3 else addend.unsqueeze(0)
    k = a.shape[0]
    if k == y.shape[0]:
        return _ops.add(y.contiguous(), a.contiguous(), mod)
    return torch.cat([_ops.add(y[:k].contiguous(), a.contiguous(), mod), y[k:]])


def switch_modulus_reference(plans: ModulusPlans, x: torch.Tensor, src: tuple, dst: tuple) -> torch.Tensor:
    """switch_modulus as a composition of the unfused ops (the fused op's specification)."""
    ring, p = plans.ring, plans.switch(src, dst)
    t = ring.intt(_gather(x, p.drop_runs, p.drop_index), p.b_drop, post=p.pre)
    y = ring.ntt(_ops.bconv(t, p.b_drop.mod, p.b_dst.mod, p.matrix), p.b_dst)
    if p.keep_runs:
        keep = _gather(x, p.keep_runs, p.keep_index)
        if p.pad != (0, 0):  # rational rescaling adds primes: x * A is 0 modulo them
            keep = torch.nn.functional.pad(keep, (0, 0, p.pad[0], p.pad[1]))
    else:  # no prime kept at all: x * A = 0 on every destination limb
        return _ops.mul_const(y, p.c_sub, p.b_dst.mod)
    return _ops.axpby(keep, p.c_keep, y, p.c_sub, p.b_dst.mod)


def mod_up(plans: ModulusPlans, a: torch.Tensor, level_idx: range, special_idx: range, alpha: int):
    """a (L, N) over the level -> (beta, L + K, N) over level + P, one lift per digit."""
    plan = plans.mod_up(level_idx, special_idx, alpha)
    if a.dim() == 2 and fused_ok(plans.ring):
        ring = plans.ring
        return _ops.mod_up(a.contiguous(), plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats, plan.bounds,
                           plan.psi_rows)
    return mod_up_reference(plans, a, level_idx, special_idx, alpha)


def mod_up_reference(plans: ModulusPlans, a: torch.Tensor, level_idx: range, special_idx: range, alpha: int):
    """mod_up as a composition of the unfused ops, digit by digit (the fused op's specification)."""
    ring, plan = plans.ring, plans.mod_up(level_idx, special_idx, alpha)
    out = []
    for lo, cnt, bd, bo, pre, mat in plan.parts:
        part = a.narrow(-2, lo, cnt).contiguous()
        y = ring.ntt(_ops.bconv(ring.intt(part, bd, post=pre), bd.mod, bo.mod, mat), bo)
        out.append(torch.cat([y.narrow(-2, 0, lo), part, y.narrow(-2, lo, y.shape[-2] - lo)], dim=-2))
    return torch.stack(out)


def key_switch_inner(plans: ModulusPlans, d: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int):
    """sum_j d_j * key_j over level + P: (2, L + K, N)."""
    ext = plans.mod_up(level_idx, special_idx, alpha).ext
    return _ops.keyswitch_inner(d, key.key_q, key.key_p, level_idx.start, level_idx.start // alpha, ext.mod)


def mod_up_key_switch_inner(plans: ModulusPlans, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
                            addend: torch.Tensor | None = None, c_add: torch.Tensor | None = None):
    """key_switch_inner(mod_up(a)) over level + P: (2, L + K, N), in one fused op.

    With addend (2, La, N) and c_add (La,) (Montgomery constants), addend * c_add is added
    to the first La limbs (multiply's P * (d0, d1) on the level's limbs)."""
    plan = plans.mod_up(level_idx, special_idx, alpha)
    if a.dim() == 2 and fused_ok(plans.ring):
        ring = plans.ring
        return _ops.mod_up_keyswitch(a.contiguous(), plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats,
                                     plan.bounds, key.key_q, key.key_p, level_idx.start, plan.digit_start,
                                     None if addend is None else addend.contiguous(), c_add, psi_rows=plan.psi_rows)
    u = key_switch_inner(plans, mod_up_reference(plans, a, level_idx, special_idx, alpha), key, level_idx,
                         special_idx, alpha)
    if addend is None:
        return u
    La = addend.shape[-2]
    b = plans.ring.basis(plan.ext.limbs[:La])
    head = _ops.axpby(addend.contiguous(), c_add, u.narrow(1, 0, La).contiguous(), b.one, b.mod)
    return torch.cat([head, u.narrow(1, La, u.shape[1] - La)], dim=1) if La < u.shape[1] else head


def tensor_key_switch_inner(plans: ModulusPlans, x: torch.Tensor, y: torch.Tensor, key, level_idx: range, special_idx: range,
                            alpha: int, c_add: torch.Tensor):
    """HMult's tensor product and key switching before ModDown, in one fused op.

    x, y (2, L, N) over the level; d = x (tensor) y. Returns (2, L + K, N):
    key_switch_inner(mod_up(d2)) + (d0, d1) * c_add on the level's limbs."""
    plan = plans.mod_up(level_idx, special_idx, alpha)
    if x.dim() == 3 and fused_ok(plans.ring):
        ring = plans.ring
        return _ops.mod_up_keyswitch(x.contiguous(), plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats,
                                     plan.bounds, key.key_q, key.key_p, level_idx.start, plan.digit_start, None, c_add,
                                     y.contiguous(), plan.psi_rows)
    d = _ops.tensor_product(x.contiguous(), y.contiguous(), plans.ring.basis(level_idx).mod)
    return mod_up_key_switch_inner(plans, d[2], key, level_idx, special_idx, alpha, addend=d[:2], c_add=c_add)


def key_switch(plans: ModulusPlans, a: torch.Tensor, key, level_idx: range, special_idx: range, alpha: int,
               dst_idx: tuple | None = None, addend: torch.Tensor | None = None):
    """(u0, u1) with u0 + u1*s = a*s' (key: s' -> s), over dst_idx (default: the level).

    addend (k, len(dst), N) or (len(dst), N): added to the first k result polynomials."""
    u = mod_up_key_switch_inner(plans, a, key, level_idx, special_idx, alpha)
    return switch_modulus(plans, u, tuple(level_idx) + tuple(special_idx),
                          tuple(level_idx) if dst_idx is None else dst_idx, addend)
