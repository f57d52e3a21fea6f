"""Precomputed tables of modulus changes on a Ring: switch_modulus between two limb sets
and ModUp of a level to the special primes.

Limbs are named by their index in `ring.primes` = Q_max primes then special primes P.
A level is a contiguous run of Q_max indices; key-switching digit j is the run
[j*alpha, (j+1)*alpha) of Q_max, intersected with the level.

`ModulusTables` (one per context) builds each table set once and keeps it: a switch makes no
host-to-device copy (so it can be captured in a CUDA graph) and little Python work. The
fused ops read the NTT tables of the ring itself, through the table row of each limb
(`psi_rows`, ...), so no table set copies a table. What only the reference compositions read
(each digit's bases and BConv matrices) is built on first use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from .._ring import Basis, Ring
from .._ring.ring import bconv_matrix, bconv_pre, runs
from ..errors import InternalError


def digits(limbs: range, alpha: int) -> list:
    """[(digit number, range of limb indices)] covering the level."""
    out = []
    for j in range(limbs.start // alpha, (limbs.stop - 1) // alpha + 1):
        lo, hi = max(limbs.start, j * alpha), min(limbs.stop, (j + 1) * alpha)
        if lo < hi:
            out.append((j, range(lo, hi)))
    return out


@dataclass
class SwitchModulusTables:
    """round-ish(x * A / D) from limbs src to limbs dst (D = src - dst, A = dst - src)."""

    drop_runs: list
    drop_index: torch.Tensor | None
    keep_runs: list  # positions in src of the kept limbs, in dst order
    keep_index: torch.Tensor | None
    pad: tuple  # zero limbs before/after the kept ones, for added primes
    b_drop: Basis
    b_dst: Basis
    pre: torch.Tensor  # INTT post-constants: [x * A * (D/d_j)^-1]_{d_j}
    matrix: torch.Tensor
    c_keep: torch.Tensor  # A / D on every destination limb
    c_sub: torch.Tensor  # -1 / D
    drop_rows: list  # positions in src of the dropped limbs (the fused op's arguments)
    keep_rows: list  # per destination limb: its position in src, or -1 (an added prime)
    psi_inv_drop_rows: list  # the ring's table row of each dropped limb
    psi_dst_rows: list  # the ring's table row of each destination limb

    @property
    def tensors(self) -> list:
        return [t for t in (self.drop_index, self.keep_index, self.pre, self.matrix, self.c_keep, self.c_sub)
                if t is not None]


def _scaled_constants(b_drop: Basis, b_dst: Basis, scale: int) -> dict:
    """pre and c_keep of a switch that multiplies x by the integer `scale` (A, or A * factor)."""
    prod_d = b_drop.product
    return dict(pre=bconv_pre(b_drop, scale), c_keep=b_dst.const([scale * pow(prod_d, -1, q) % q for q in b_dst.primes]))


def switch_modulus_tables(ring: Ring, src: tuple, dst: tuple) -> SwitchModulusTables:
    """The tables of switch_modulus from limbs src to limbs dst (built, not cached:
    ModulusTables keeps them)."""
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
    return SwitchModulusTables(
        drop_runs=runs(drop_pos), drop_index=torch.tensor(drop_pos, device=dev),
        keep_runs=runs(keep_pos), keep_index=torch.tensor(keep_pos, device=dev, dtype=torch.long),
        pad=(front, len(dst) - front - len(kept_dst)), b_drop=b_drop, b_dst=b_dst,
        matrix=bconv_matrix(b_drop, b_dst), **_scaled_constants(b_drop, b_dst, prod_a),
        c_sub=b_dst.const([(-pow(prod_d, -1, q)) % q for q in b_dst.primes]),
        drop_rows=drop_pos, keep_rows=[pos.get(i, -1) for i in dst], psi_inv_drop_rows=list(drop),
        psi_dst_rows=list(dst))


class ModUpTables:
    """ModUp of a level to level + P, digit by digit.

    ext: basis of level + P; pre (L,): every digit's INTT post-constants, in level order;
    mats (beta, L + K, alpha_max): digit j's BConv rows to every ext limb (own rows 0);
    bounds [0, ..., L]: digit j is level positions [bounds[j], bounds[j+1]); digit_start:
    the key digit of the level's first digit; psi_rows: the ring's table row of each ext limb."""

    def __init__(self, ring: Ring, limbs: range, special_limbs: range, alpha: int):
        self.ring, self.limbs, self.special_limbs, self.alpha = ring, limbs, special_limbs, alpha
        self.ext = ring.basis(tuple(limbs) + tuple(special_limbs))
        ds = digits(limbs, alpha)
        amax = max(len(d) for _, d in ds)
        self.mats = torch.zeros((len(ds), len(self.ext), amax), dtype=torch.int32, device=ring.device)
        pres, self.bounds = [], [0]
        for j, (_, d) in enumerate(ds):
            bd = ring.basis(tuple(d))
            lo = d.start - limbs.start
            pres.append(bconv_pre(bd))
            self.bounds.append(lo + len(d))
            self.mats[j, :, : len(d)] = bconv_matrix(bd, self.ext)
            self.mats[j, lo : lo + len(d)] = 0  # the digit's own limbs are copied, not converted
        self.pre = torch.cat(pres).contiguous()
        self.digit_start = limbs.start // alpha
        self.psi_rows = list(self.ext.limbs)

    @cached_property
    def parts(self) -> list:
        """Per digit: (offset in level, length, digit basis, others basis, pre, matrix) -- what
        the digit-by-digit reference composition reads (built on first use)."""
        out = []
        ext = self.ext.limbs
        for _, d in digits(self.limbs, self.alpha):
            bd = self.ring.basis(tuple(d))
            bo = self.ring.basis(tuple(i for i in ext if i not in d))
            out.append((d.start - self.limbs.start, len(d), bd, bo, bconv_pre(bd), bconv_matrix(bd, bo)))
        return out

    @property
    def tensors(self) -> list:
        own = [self.mats, self.pre]
        if "parts" in self.__dict__:
            own += [t for part in self.parts for t in part[4:]]
        return own


def mod_up_tables(ring: Ring, limbs: range, special_limbs: range, alpha: int) -> ModUpTables:
    """The tables of ModUp from limbs to limbs + special_limbs (built, not cached)."""
    return ModUpTables(ring, limbs, special_limbs, alpha)


class ModulusTables:
    """The switch and ModUp tables of one ring, each built on first use and kept for the life
    of this object (the context's): captured CUDA graphs hold pointers to their tensors."""

    def __init__(self, ring: Ring):
        self.ring = ring
        self._switch: dict[tuple[tuple, tuple, int], SwitchModulusTables] = {}
        self._mod_up: dict[tuple[range, range, int], ModUpTables] = {}

    def switch(self, src: tuple, dst: tuple, factor: int = 1) -> SwitchModulusTables:
        """The table set of switch_modulus from limbs src to limbs dst; with `factor`, of the
        switch of factor * x (the integer folded into pre and c_keep, the constants of the dropped
        and the kept rows: drop_level's; the other tables are the plain switch's)."""
        key = (tuple(src), tuple(dst), int(factor))
        p = self._switch.get(key)
        if p is None:
            if factor == 1:
                p = switch_modulus_tables(self.ring, *key[:2])
            else:
                base = self.switch(src, dst)
                added = [q for q, row in zip(base.b_dst.primes, base.keep_rows) if row < 0]
                p = replace(base, **_scaled_constants(base.b_drop, base.b_dst, math.prod(added) * int(factor)))
            self._switch[key] = p
        return p

    def mod_up(self, limbs: range, special_limbs: range, alpha: int) -> ModUpTables:
        """The table set of ModUp of the level's limbs to level + special_limbs with alpha-limb digits."""
        key = (limbs, special_limbs, int(alpha))
        p = self._mod_up.get(key)
        if p is None:
            p = self._mod_up[key] = mod_up_tables(self.ring, *key)
        return p

    @property
    def tensors(self) -> list:
        """The tables' own tensors (their bases are the ring's; for memory reports), each once
        (a factor's switch shares the plain switch's tensors but pre and c_keep)."""
        return list({id(t): t for p in list(self._switch.values()) + list(self._mod_up.values())
                     for t in p.tensors}.values())
