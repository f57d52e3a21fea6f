"""Hybrid key switching (Han-Ki 2020) and modulus switching on limb-index bases of a Ring.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.

Every function takes the context's ModulusTables (fhetorch/_rlwe/tables.py): each (source,
destination) pair's tables are built once, so a switch makes no host-to-device copy (it can
be captured in a CUDA graph) and little Python work. The ops read the ring's own NTT tables
through the table row of each limb, so no precomputation copies a table.

Every switch is one fused op (csrc/bind/schema.cpp) over any number of leading batch
dimensions: `mod_up` lifts every digit in one INTT, one BConv and one NTT launch;
`mod_up_keyswitch_inner` also forms the inner product with the key (the lifted digits are
never stored); `switch_modulus` gathers, converts and combines in one op. Their
specifications, compositions of the unfused ops, live in tests/_rlwe/reference.py.

Names (docs/glossary.md): keyswitch = mod_up + keyswitch_inner + switch_modulus (ModDown);
mod_up_keyswitch_inner = the first two in one op.
"""
from __future__ import annotations

import torch

from .. import _ops
from .tables import ModulusTables, digits, mod_up_tables, switch_modulus_tables  # noqa: F401  (digits, *_tables: re-exported)


def _planes(x: torch.Tensor, dims: int = 2) -> torch.Tensor:
    """x as the ops read it in place: planes of its last `dims` dimensions ((L, N), or a ciphertext's
    (c, L, N)) dense, its leading dimensions collapsing to one stride (a contiguous tensor, or some
    components of contiguous ciphertexts: a batch's c1, a giant's y1, (d0, d1) of (d0, d1, d2));
    anything else contiguous (a copy). csrc/bind/common.h's plane_stride is the ops' check."""
    if x.dim() < dims:
        return x.contiguous()
    plane = 1
    for n, st in zip(reversed(x.shape[-dims:]), reversed(x.stride()[-dims:])):
        if n != 1 and st != plane:
            return x.contiguous()
        plane *= n
    lead = [(n, st) for n, st in zip(x.shape[:-dims], x.stride()[:-dims]) if n != 1]
    if all(lead[i][1] == lead[i + 1][0] * lead[i + 1][1] for i in range(len(lead) - 1)) and \
            (not lead or lead[-1][1] >= plane):
        return x
    return x.contiguous()


def switch_modulus(tables: ModulusTables, x: torch.Tensor, src: tuple, dst: tuple,
                   addend: torch.Tensor | None = None, factor: int = 1, galois: int = 1) -> torch.Tensor:
    """x (..., len(src), N) over limbs src -> x * A / D over limbs dst, NTT form.

    D = src - dst (dropped), A = dst - src (added): rescaling (D = top primes, rational
    rescaling adds A), ModDown (D = P) and both at once. The result carries a small
    additive error (the fast base conversion's u), as usual for approximate rescaling.
    addend, over dst, in the same op: (..., k, len(dst), N) with x's leading dimensions is
    added to the first k polynomials of each ciphertext of x (..., c, len(src), N)
    (relinearisation's (d0, d1)); (..., len(dst), N) to the first one (a rotation's sigma(c0)).
    factor: switch factor * x instead (an integer, folded into the tables' constants).
    galois: the addend is added as automorphism(addend, galois), in the same pass (a rotation's
    sigma(c0) without a pass of its own).
    """
    tabs, rows = _switch_args(tables, src, dst, factor)
    return _ops.switch_modulus(x.contiguous(), *tabs, None if addend is None else addend.contiguous(), *rows, galois)


def _switch_args(tables: ModulusTables, src: tuple, dst: tuple, factor: int = 1) -> tuple:
    """switch_modulus's rows and tables (drop_rows .. c_sub) and its table row maps, on the ring's full tables."""
    p = tables.switch(src, dst, factor)
    ring = tables.ring
    return ((p.drop_rows, p.keep_rows, p.pre, p.b_drop.mod, ring.psi_inv, p.b_dst.mod, ring.psi, p.matrix, p.c_keep,
             p.c_sub), (p.psi_inv_drop_rows, p.psi_dst_rows))


def mod_up(tables: ModulusTables, a: torch.Tensor, limbs: range, special_limbs: range, alpha: int) -> torch.Tensor:
    """a (..., L, N) over the level -> (..., beta, L + K, N) over level + P, one lift per digit."""
    tab = tables.mod_up(limbs, special_limbs, alpha)
    ring = tables.ring
    return _ops.mod_up(_planes(a), tab.pre, tab.ext.mod, ring.psi, ring.psi_inv, tab.mats, tab.bounds,
                       tab.psi_rows)


def keyswitch_inner(tables: ModulusTables, d: torch.Tensor, key, limbs: range, special_limbs: range,
                    alpha: int) -> torch.Tensor:
    """sum_j d_j * key_j over level + P: d (..., beta, L + K, N) -> (..., 2, L + K, N)."""
    ext = tables.mod_up(limbs, special_limbs, alpha).ext
    return _ops.keyswitch_inner(d.contiguous(), key.key_q, key.key_p, limbs.start, limbs.start // alpha,
                                ext.mod)


def keyswitch_inner_sum(tables: ModulusTables, d: torch.Tensor, keys, galois, limbs: range, special_limbs: range,
                        alpha: int, addend: torch.Tensor, c_add: torch.Tensor,
                        acc: torch.Tensor | None = None) -> torch.Tensor:
    """sum_k of the key switches of sigma_k(y_k) left over P*Q, plus acc: d (..., G, beta, L + K, N) the
    ModUp'd digits of the y_k1 (mod_up of (..., G, L, N)), addend (..., G, La, N) the y_k0 (added as
    sigma_k(y_k0) * c_add on component 0), keys[k] and galois[k] the rotation's -> (..., 2, L + K, N).
    The digits are rotated after their ModUp (hoisted), which is as valid a ModUp of sigma_k(y_k1) as
    ModUp(sigma_k(y_k1)), not the same one: its results differ from mod_up_keyswitch_inner's in the
    small ModUp error, not in value."""
    ext = tables.mod_up(limbs, special_limbs, alpha).ext
    return _ops.keyswitch_inner_sum(d.contiguous(), [k.key_q for k in keys], [k.key_p for k in keys], list(galois),
                                    limbs.start, limbs.start // alpha, _planes(addend), c_add,
                                    None if acc is None else acc.contiguous(), ext.mod)


def mod_up_keyswitch_inner(tables: ModulusTables, a: torch.Tensor, key, limbs: range, special_limbs: range,
                           alpha: int, addend: torch.Tensor | None = None, c_add: torch.Tensor | None = None,
                           b: torch.Tensor | None = None, acc: torch.Tensor | None = None,
                           galois: int = 1) -> torch.Tensor:
    """keyswitch_inner(mod_up(a)) over level + P: a (..., L, N) -> (..., 2, L + K, N), one op.

    With addend (..., 2, La, N) and c_add (La,) (Montgomery constants), addend * c_add is
    added to the first La limbs (P * (d0, d1) on the level's limbs); an addend (..., 1, La, N) adds
    to component 0 only (a rotation's P * sigma(c0)). acc (the result's shape) is added to the
    whole result (a running sum, in the same pass). With b (HMult's tensor
    product fused in): a and b are ciphertexts (..., 2, L, N) over the level (b may also be
    one ciphertext (2, L, N) for the whole batch), d = a (tensor) b, and the result is
    keyswitch_inner(mod_up(d2)) + (d0, d1) * c_add on the level's limbs (no addend then). galois (not
    with b): of automorphism(a, galois), the addend rotated alike (a rotation's sigma(c1) and
    P * sigma(c0), read through the automorphism instead of made by a pass of their own)."""
    return _ops.mod_up_keyswitch_inner(*_key_args(tables, a, key, limbs, special_limbs, alpha, addend, c_add, b),
                                       None if acc is None else acc.contiguous(), galois)


def _key_args(tables: ModulusTables, a: torch.Tensor, key, limbs: range, special_limbs: range, alpha: int,
              addend: torch.Tensor | None, c_add: torch.Tensor | None, b: torch.Tensor | None) -> tuple:
    """mod_up_keyswitch_inner's arguments a .. psi_rows (keyswitch's first ones too), on the ring's full tables."""
    tab = tables.mod_up(limbs, special_limbs, alpha)
    ring = tables.ring
    a = a.contiguous() if b is not None else _planes(a)  # ciphertexts with b; else read in place
    return (a, tab.pre, tab.ext.mod, ring.psi, ring.psi_inv, tab.mats, tab.bounds, key.key_q, key.key_p, limbs.start,
            tab.digit_start, None if addend is None else _planes(addend, 3), c_add,
            None if b is None else b.contiguous(), tab.psi_rows)


def keyswitch(tables: ModulusTables, a: torch.Tensor, key, limbs: range, special_limbs: range, alpha: int,
              dst_idx: tuple | None = None, addend: torch.Tensor | None = None, galois: int = 1, *,
              b: torch.Tensor | None = None, inner_addend: torch.Tensor | None = None,
              c_add: torch.Tensor | None = None) -> torch.Tensor:
    """(u0, u1) with u0 + u1*s = a*s' (key: s' -> s), over dst_idx (default: the level): one op,
    switch_modulus(mod_up_keyswitch_inner(...)) (on the GPU the key product runs beside ModDown).

    a (..., L, N) -> (..., 2, len(dst), N). addend: as switch_modulus's (added to u0 when
    (..., len(dst), N), to u0 and u1 when (..., 2, len(dst), N)). galois: of automorphism(a, galois)
    plus automorphism(addend, galois) (a rotation: its automorphisms fused into the passes).
    b, inner_addend, c_add: mod_up_keyswitch_inner's b, addend and c_add (a relinearisation's
    tensor product or P * (d0, d1) added over Q_l * P; dst_idx may then drop the level's top primes
    too: HMult's rescale)."""
    tabs, rows = _switch_args(tables, tuple(limbs) + tuple(special_limbs),
                              tuple(limbs) if dst_idx is None else tuple(dst_idx))
    return _ops.keyswitch(*_key_args(tables, a, key, limbs, special_limbs, alpha, inner_addend, c_add, b), galois,
                          *tabs, None if addend is None else addend.contiguous(), *rows)
