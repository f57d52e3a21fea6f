"""The slot-domain DFT of CKKS decoding, factored into sparse stages (for bootstrapping).

For n slots (n = N/2: full packing; fewer: the sparse packing of _ckks/encoder.py, whose
polynomial lives in the subring of Y = X^(N/2n)), decoding is z = U w with

    w_k = m_k + i m_(k+n)   (k < n; m the message polynomial's 2n coefficients in Y, unscaled),
    U[j, k] = xi^(k 5^j),   xi = exp(2 pi i / 4n).

(The coefficient X^(k+n) evaluates to i times X^k at every slot since 5^j = 1 mod 4.) With w
in bit-reversed order, U = B_L ... B_1 (L = log2 n) where B_s is a radix-2 butterfly stage
of half-width h = 2^(s-1): in each block of 2h slots, out[p] = x[p] + w x[p+h] and
out[p+h] = x[p] - w x[p+h] (Cheon et al. 2018, "Improved bootstrapping"). Each stage has
three nonzero diagonals (shifts 0, +h, -h), so a product of g consecutive stages has at most
2^(g+1) - 1: CoeffToSlot applies B_L^-1 ... B_1^-1 (bit-reversed coefficients come out) and
SlotToCoeff B_1 ... B_L, each merged into as many groups as levels they may use
(the level budget of Han-Ki 2020 / Bossuat et al. 2021).

Diagonal dictionaries {k: d} mean x -> sum_k d * rot_k(x), rot_k(x)[i] = x[(i + k) mod n],
as circuits/linear.py.
"""
from __future__ import annotations

import math

import torch

from ..errors import SlotError


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise SlotError(f"dft: n must be a power of two, got {n}")
    return n.bit_length() - 1


def bit_reverse(n: int) -> torch.Tensor:
    """The bit-reversal permutation of range(n)."""
    bits = _log2(n)
    i = torch.arange(n)
    r = torch.zeros_like(i)
    for b in range(bits):
        r |= ((i >> b) & 1) << (bits - 1 - b)
    return r


def matrix(n: int) -> torch.Tensor:
    """U (n, n), complex128: slots = U w (for tests and small n)."""
    m = 4 * n
    rot = torch.tensor([pow(5, j, m) for j in range(n)], dtype=torch.float64)
    k = torch.arange(n, dtype=torch.float64)
    return torch.polar(torch.ones(n, n, dtype=torch.float64), 2 * math.pi * torch.outer(rot, k) / m)


def _twiddles(n: int, h: int) -> torch.Tensor:
    """w_j, j < h, of the stage with half-width h."""
    m, lenq = 4 * n, 8 * h
    idx = torch.tensor([pow(5, j, lenq) * (m // lenq) for j in range(h)], dtype=torch.float64)
    return torch.polar(torch.ones(h, dtype=torch.float64), 2 * math.pi * idx / m)


def stage(n: int, s: int, *, inverse: bool = False) -> dict:
    """Diagonals of B_s (or B_s^-1), s in 1 .. log2 n."""
    h = 1 << (s - 1)
    w = _twiddles(n, h).repeat(n // (2 * h))  # w_(j mod h) per (block, j)
    lo = (torch.arange(n) % (2 * h)) < h
    hi = ~lo
    d0 = torch.zeros(n, dtype=torch.complex128)
    dp = torch.zeros(n, dtype=torch.complex128)  # shift +h, on the low half of each block
    dm = torch.zeros(n, dtype=torch.complex128)  # shift -h, on the high half
    wl = w.reshape(-1, h)  # (blocks, h)
    wfull = torch.cat([wl, wl], dim=1).flatten()  # twiddle of the pair each slot belongs to
    if not inverse:  # out[p] = x[p] + w x[p+h]; out[p+h] = x[p] - w x[p+h]
        d0[lo], dp[lo] = 1, wfull[lo]
        d0[hi], dm[hi] = -wfull[hi], 1
    else:  # x[p] = (o[p] + o[p+h]) / 2; x[p+h] = (o[p] - o[p+h]) / (2 w)
        d0[lo], dp[lo] = 0.5, 0.5
        d0[hi], dm[hi] = -0.5 / wfull[hi], 0.5 / wfull[hi]
    out = {0: d0}
    for k, d in ((h % n, dp), ((-h) % n, dm)):  # +h and -h coincide when h = n/2
        out[k] = out[k] + d if k in out else d
    return out


def compose(a: dict, b: dict, n: int) -> dict:
    """Diagonals of A B (B applied first): diag_(ka+kb) += a_ka * rot_ka(b_kb)."""
    out = {}
    for ka, da in a.items():
        for kb, db in b.items():
            k = (ka + kb) % n
            t = da * torch.roll(db, -ka)
            out[k] = out[k] + t if k in out else t
    return {k: d for k, d in out.items() if bool((d != 0).any())}


def apply(diags: dict, x: torch.Tensor) -> torch.Tensor:
    """sum_k d * rot_k(x) on a plaintext vector (tests, simulation)."""
    return sum(d * torch.roll(x, -k) for k, d in diags.items())


def split_stages(count: int, groups: int, *, small_first: bool = True) -> list:
    """Sizes of `groups` consecutive groups covering `count` stages, as even as possible; the
    smaller groups first (the first group runs at the highest level, where rotations cost most)."""
    groups = max(1, min(groups, count))
    base, extra = divmod(count, groups)
    sizes = [base + (1 if i < extra else 0) for i in range(groups)]
    return sorted(sizes) if small_first else sizes


def coeff_to_slot_groups(n: int, groups: int) -> list:
    """[diags of group 1 (applied first), ...]: their product is U^-1 up to the bit reversal:
    slots z -> bit-reversed w."""
    order = [stage(n, s, inverse=True) for s in range(_log2(n), 0, -1)]  # B_L^-1 first
    return _merge(order, split_stages(len(order), groups), n)


def slot_to_coeff_groups(n: int, groups: int) -> list:
    """[diags of group 1 (applied first), ...]: their product is U on bit-reversed w."""
    order = [stage(n, s) for s in range(1, _log2(n) + 1)]  # B_1 first
    return _merge(order, split_stages(len(order), groups), n)


def _merge(order: list, sizes: list, n: int) -> list:
    out, i = [], 0
    for size in sizes:
        m = {0: torch.ones(n, dtype=torch.complex128)}
        for st in order[i : i + size]:
            m = compose(st, m, n)
        out.append(m)
        i += size
    if not order:  # one slot: the identity
        out = [{0: torch.ones(n, dtype=torch.complex128)}]
    return out
