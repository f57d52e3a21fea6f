"""The RNS ring Z_Q[X]/(X^N + 1) on tensors: per-prime tables and limb-subset views.

A `Ring` owns the tables of an ordered list of primes (the storage order of every
polynomial); operations that touch a subset of limbs (a level, a key-switching digit, the
special primes) ask for `ring.basis(idx)`, a cached `Basis` of tensors for those limbs.
Residues are kept in Montgomery form x * 2^32 mod q (csrc/arith.h).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from .. import _ops
from ..errors import ParameterError
from .primes import primitive_root_2n

R = 1 << 32


def signed32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def mont(c: int, q: int) -> int:
    """Montgomery form of the integer c modulo q."""
    return c * R % q


def _powers(base: int, q: int, n: int) -> np.ndarray:
    """[base^0, ..., base^(n-1)] mod q, vectorised by doubling (q < 2^31, uint64 products)."""
    out = np.ones(n, dtype=np.uint64)
    length, b = 1, base % q
    while length < n:
        out[length : 2 * length] = out[:length] * np.uint64(b) % np.uint64(q)
        b = b * b % q
        length *= 2
    return out


def bit_reverse_indices(log_n: int) -> np.ndarray:
    n = 1 << log_n
    idx = np.arange(n, dtype=np.int64)
    rev = np.zeros(n, dtype=np.int64)
    for b in range(log_n):
        rev |= ((idx >> b) & 1) << (log_n - 1 - b)
    return rev


@dataclass(frozen=True)
class Basis:
    """Tables for one ordered subset of the ring's primes (all tensors on the ring's device)."""

    idx: tuple
    primes: tuple
    mod: torch.Tensor  # (L, 2): q, q^-1 mod 2^32
    psi: torch.Tensor  # (L, N)
    psi_inv: torch.Tensor  # (L, N)
    n_inv_mont: torch.Tensor  # (L,) N^-1 * 2^32: INTT to Montgomery form
    n_inv: torch.Tensor  # (L,) N^-1: INTT to standard form
    r2: torch.Tensor  # (L,) 2^64 mod q: to_rns
    _scalars: dict = field(default_factory=dict, compare=False, repr=False)

    def __len__(self):
        return len(self.primes)

    @cached_property
    def product(self) -> int:
        p = 1
        for q in self.primes:
            p *= q
        return p

    def const(self, values) -> torch.Tensor:
        """Per-limb Montgomery constants from Python integers (one per limb, or one for all)."""
        if isinstance(values, int):
            values = [values] * len(self.primes)
        return torch.tensor([mont(v, q) for v, q in zip(values, self.primes)], dtype=torch.int32,
                            device=self.mod.device)

    @cached_property
    def one(self) -> torch.Tensor:
        """The constant 1 on every limb (Montgomery form)."""
        return self.const(1)

    def scalar(self, c: int) -> torch.Tensor:
        """The integer c (any size, any sign) as per-limb Montgomery constants.

        Cached per basis: circuits reuse their constants, and a cached tensor needs no
        host-to-device copy (so the call can run inside CUDA graph capture)."""
        c = int(c)
        t = self._scalars.get(c)
        if t is None:
            if len(self._scalars) >= 4096:
                self._scalars.clear()
            t = self._scalars[c] = self.const([c % q for q in self.primes])
        return t

    @cached_property
    def garner(self) -> torch.Tensor:
        L = len(self.primes)
        g = np.zeros((L, L), dtype=np.int64)
        for k, qk in enumerate(self.primes):
            w = 1
            for i in range(k):
                g[k, i] = mont(w % qk, qk)
                w *= self.primes[i]
            g[k, k] = mont(pow(w, -1, qk), qk)
        return torch.tensor(g.astype(np.int32), device=self.mod.device)

    @cached_property
    def radix_weights(self) -> list[int]:
        """W_k = q_0 ... q_(k-1): the mixed-radix weights of crt_digits."""
        w, out = 1, []
        for q in self.primes:
            out.append(w)
            w *= q
        return out


class Ring:
    """Tables of the NTT over Z_q[X]/(X^N + 1) for every prime of an ordered list."""

    def __init__(self, log_n: int, primes, device="cpu"):
        self.log_n = int(log_n)
        self.n = 1 << self.log_n
        self.primes = tuple(int(q) for q in primes)
        self.device = torch.device(device)
        for q in self.primes:
            if not (q < 2**31 and q % (2 * self.n) == 1):
                raise ParameterError(f"Ring: {q} is not an NTT-friendly prime below 2^31 for N = {self.n} "
                                     "(q = 1 mod 2N); pick primes with ntt_primes()")
        self._full = self._build_tables()
        self._bases: dict = {}
        self.cache: dict = {}  # plans of higher layers (index tensors, constants), per device

    def _build_tables(self):
        n, rev = self.n, bit_reverse_indices(self.log_n)
        psi_t, psi_inv_t, mod = [], [], []
        for q in self.primes:
            psi = primitive_root_2n(q, self.log_n)
            rq = np.uint64(R % q)
            psi_t.append((_powers(psi, q, n)[rev] * rq % np.uint64(q)).astype(np.int64))
            psi_inv_t.append((_powers(pow(psi, -1, q), q, n)[rev] * rq % np.uint64(q)).astype(np.int64))
            mod.append((q, signed32(pow(q, -1, R))))
        as32 = lambda a: torch.tensor(np.asarray(a, dtype=np.int64).astype(np.int32), device=self.device)
        return {
            "mod": as32(mod),
            "psi": as32(np.stack(psi_t)),
            "psi_inv": as32(np.stack(psi_inv_t)),
            "n_inv_mont": as32([mont(pow(n, -1, q), q) for q in self.primes]),
            "n_inv": as32([pow(n, -1, q) for q in self.primes]),
            "r2": as32([R * R % q for q in self.primes]),
        }

    def basis(self, idx=None) -> Basis:
        """The tables of limbs `idx` (indices into self.primes; None: all of them)."""
        idx = tuple(range(len(self.primes))) if idx is None else tuple(int(i) for i in idx)
        b = self._bases.get(idx)
        if b is None:
            sel = torch.tensor(idx, dtype=torch.long, device=self.device)
            t = {k: v.index_select(0, sel).contiguous() for k, v in self._full.items()}
            b = Basis(idx=idx, primes=tuple(self.primes[i] for i in idx), **t)
            self._bases[idx] = b
        return b

    def to(self, device) -> "Ring":
        return Ring(self.log_n, self.primes, device)

    # --- transforms on a basis ------------------------------------------------------
    def ntt(self, x: torch.Tensor, basis: Basis) -> torch.Tensor:
        return _ops.ntt(x, basis.mod, basis.psi)

    def intt(self, x: torch.Tensor, basis: Basis, post: torch.Tensor | None = None) -> torch.Tensor:
        """Inverse NTT; output in Montgomery form unless `post` (per-limb) says otherwise."""
        return _ops.intt(x, basis.mod, basis.psi_inv, basis.n_inv_mont if post is None else post)

    def from_integers(self, coeffs: torch.Tensor, basis: Basis) -> torch.Tensor:
        """Signed int64 coefficients (..., N) -> NTT-domain residues (..., L, N)."""
        return self.ntt(_ops.to_rns(coeffs.to(self.device, torch.int64).contiguous(), basis.mod, basis.r2), basis)

    def bconv_matrix(self, src: Basis, dst: Basis) -> torch.Tensor:
        """(len(dst), len(src)) centred Montgomery constants (Q/q_j) * 2^64 mod p_i."""
        key = ("bconv", src.idx, dst.idx)
        m = self._bases.get(key)
        if m is None:
            Q = src.product
            rows = []
            for p in dst.primes:
                row = []
                for q in src.primes:
                    v = (Q // q) * R * R % p
                    row.append(v - p if v > p // 2 else v)
                rows.append(row)
            m = torch.tensor(rows, dtype=torch.int32, device=self.device)
            self._bases[key] = m
        return m

    def bconv_pre(self, src: Basis, factor: int = 1) -> torch.Tensor:
        """INTT post-constants giving standard-form [x * factor * (Q/q_j)^-1]_{q_j}: BConv's input."""
        key = ("bconv_pre", src.idx, factor)
        c = self._bases.get(key)
        if c is None:
            Q = src.product
            vals = [pow(self.n, -1, q) * factor * pow(Q // q, -1, q) % q for q in src.primes]
            c = torch.tensor(vals, dtype=torch.int32, device=self.device)
            self._bases[key] = c
        return c

    def bconv(self, x_ntt: torch.Tensor, src: Basis, dst: Basis, factor: int = 1) -> torch.Tensor:
        """NTT-domain x over `src` -> coefficient-domain (Montgomery) [x*factor]_src + u*Q_src over `dst`."""
        t = self.intt(x_ntt, src, post=self.bconv_pre(src, factor))
        return _ops.bconv(t, src.mod, dst.mod, self.bconv_matrix(src, dst))

    def to_integers(self, x_ntt: torch.Tensor, basis: Basis) -> list:
        """Exact centred integer coefficients (Python ints), for tests and small N."""
        digits = self.crt_digits(x_ntt, basis).cpu().numpy().astype(object)
        w = basis.radix_weights
        out = digits[..., 0, :] * 0
        for k in range(len(w)):
            out = out + digits[..., k, :] * w[k]
        return out

    def crt_digits(self, x_ntt: torch.Tensor, basis: Basis) -> torch.Tensor:
        return _ops.crt_digits(self.intt(x_ntt, basis, post=basis.n_inv), basis.mod, basis.garner)

    def to_float(self, x_ntt: torch.Tensor, basis: Basis, divisor: float) -> torch.Tensor:
        """Centred coefficients divided by `divisor`, in float64 (exact digits, one rounding each)."""
        digits = self.crt_digits(x_ntt, basis).to(torch.float64)
        out = torch.zeros(digits.shape[:-2] + digits.shape[-1:], dtype=torch.float64, device=digits.device)
        for k, w in enumerate(basis.radix_weights):
            # A digit beyond ~2^1000 could only be non-zero for a coefficient far above any
            # scaled message (a wrapped-around decryption), and its weight is no float.
            if w.bit_length() > 1000:
                break
            out += digits[..., k, :] * (w / divisor)
        return out
