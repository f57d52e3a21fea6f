"""Specifications of the fused key-switching ops: compositions of the unfused ops (ntt, intt,
bconv, keyswitch_inner, tensor_product, axpby, add), built from the Ring alone (not from the
tables fhetorch._rlwe.keyswitch hands to the fused ops), digit by digit. Used only by tests.
Each takes any number of leading batch dimensions, as the fused ops do.
"""
import torch

from fhetorch import _ops
from fhetorch._ring.ring import bconv_matrix, bconv_pre
from fhetorch._rlwe import digits


def mod_up_reference(ring, a, limbs: range, special_limbs: range, alpha: int) -> torch.Tensor:
    """a (..., L, N) over the level -> (..., beta, L + K, N): digit j lifted to level + P."""
    ext = tuple(limbs) + tuple(special_limbs)
    out = []
    for _, d in digits(limbs, alpha):
        bd, bo = ring.basis(tuple(d)), ring.basis(tuple(i for i in ext if i not in d))
        lo = d.start - limbs.start
        part = a.narrow(-2, lo, len(d)).contiguous()
        t = ring.intt(part, bd, post=bconv_pre(bd))
        y = ring.ntt(_ops.bconv(t, bd.mod, bo.mod, bconv_matrix(bd, bo)), bo)
        out.append(torch.cat([y.narrow(-2, 0, lo), part, y.narrow(-2, lo, y.shape[-2] - lo)], dim=-2))
    return torch.stack(out, dim=-3)


def add_to_front(y: torch.Tensor, addend: torch.Tensor, mod: torch.Tensor) -> torch.Tensor:
    """switch_modulus's addend rule: y (..., c, Ld, N) plus addend (..., k, Ld, N) on its first
    k polynomials, or addend (..., Ld, N) on the first; y (Ld, N) plus addend (Ld, N)."""
    if y.dim() == 2:
        return _ops.add(y, addend.contiguous(), mod)
    if addend.dim() < y.dim():
        addend = addend.unsqueeze(-3)
    k = addend.shape[-3]
    head = _ops.add(y.narrow(-3, 0, k).contiguous(), addend.contiguous(), mod)
    return torch.cat([head, y.narrow(-3, k, y.shape[-3] - k)], dim=-3)


def switch_modulus_reference(ring, x, src: tuple, dst: tuple, addend=None) -> torch.Tensor:
    """x (..., len(src), N) -> x * A / D over dst (D = src - dst, A = dst - src), + addend."""
    drop = tuple(i for i in src if i not in dst)
    added = tuple(i for i in dst if i not in src)
    b_drop, b_dst = ring.basis(drop), ring.basis(dst)
    prod_a = ring.basis(added).product if added else 1
    pos = {i: k for k, i in enumerate(src)}
    rows = torch.tensor([pos[i] for i in drop], device=x.device)
    t = ring.intt(x.index_select(-2, rows).contiguous(), b_drop, post=bconv_pre(b_drop, prod_a))
    y = ring.ntt(_ops.bconv(t, b_drop.mod, b_dst.mod, bconv_matrix(b_drop, b_dst)), b_dst)
    # x * A is 0 modulo the added primes: their kept row is a zero row
    padded = torch.cat([x, torch.zeros_like(x.narrow(-2, 0, 1))], dim=-2)
    keep = padded.index_select(-2, torch.tensor([pos.get(i, len(src)) for i in dst], device=x.device)).contiguous()
    inv_d = [pow(b_drop.product, -1, q) for q in b_dst.primes]
    c_keep = b_dst.const([prod_a * v % q for v, q in zip(inv_d, b_dst.primes)])
    c_sub = b_dst.const([-v % q for v, q in zip(inv_d, b_dst.primes)])
    out = _ops.axpby(keep, c_keep, y, c_sub, b_dst.mod)
    return out if addend is None else add_to_front(out, addend, b_dst.mod)


def mod_up_keyswitch_inner_reference(ring, a, key, limbs: range, special_limbs: range, alpha: int,
                                     addend=None, c_add=None, b=None) -> torch.Tensor:
    """keyswitch_inner(mod_up(a)) + addend * c_add on the first La limbs; with b, of the tensor
    product d = a x b: ModUp of d2 and the addend (d0, d1)."""
    ext = tuple(limbs) + tuple(special_limbs)
    if b is not None:
        d = _ops.tensor_product(a.contiguous(), b.contiguous(), ring.basis(tuple(limbs)).mod)
        a, addend = d.select(-3, 2), d.narrow(-3, 0, 2)
    lifted = mod_up_reference(ring, a, limbs, special_limbs, alpha)
    u = _ops.keyswitch_inner(lifted, key.key_q, key.key_p, limbs.start, limbs.start // alpha,
                             ring.basis(ext).mod)
    if addend is None:
        return u
    La = addend.shape[-2]
    bl = ring.basis(ext[:La])
    head = _ops.axpby(addend.contiguous(), c_add, u.narrow(-2, 0, La).contiguous(), bl.one, bl.mod)
    return torch.cat([head, u.narrow(-2, La, u.shape[-2] - La)], dim=-2)


def keyswitch_reference(ring, a, key, limbs: range, special_limbs: range, alpha: int, dst_idx=None,
                        addend=None) -> torch.Tensor:
    """The whole key switch: ModUp, inner product, ModDown to dst_idx (default: the level)."""
    u = mod_up_keyswitch_inner_reference(ring, a, key, limbs, special_limbs, alpha)
    dst = tuple(limbs) if dst_idx is None else tuple(dst_idx)
    return switch_modulus_reference(ring, u, tuple(limbs) + tuple(special_limbs), dst, addend)
