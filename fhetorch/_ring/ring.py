"""The RNS ring Z_Q[X]/(X^N + 1) on tensors: per-prime tables and limb-subset views.

A `Ring` owns the tables of an ordered list of primes (the storage order of every
polynomial); operations that touch a subset of limbs (a level, a key-switching digit, the
special primes) ask for `ring.basis(limbs)`, the `Basis` of those limbs. A basis of a
contiguous limb range is a view: its tables are `narrow`s of the ring's, sharing their
storage. A basis of other limbs gathers only its per-limb constants (a few words a limb);
its NTTs read the ring's full tables through the row of each limb (the ops' psi_rows).
Residues are kept in Montgomery form x * 2^32 mod q (csrc/arith.h).
"""
from __future__ import annotations

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


def runs(limbs) -> list:
    """Split limb indices into (start, length) runs of consecutive values, in order."""
    out = []
    for i in limbs:
        if out and out[-1][0] + out[-1][1] == i:
            out[-1][1] += 1
        else:
            out.append([i, 1])
    return [tuple(r) for r in out]


class Basis:
    """Tables of one ordered subset of the ring's limbs (tensors on the ring's device).

    mod (L, 2): q, q^-1 mod 2^32; n_inv_mont (L,): N^-1 * 2^32 (INTT to Montgomery form);
    n_inv (L,): N^-1 (INTT to standard form); r2 (L,): 2^64 mod q (to_rns); psi, psi_inv
    (L, N): the NTT tables. Contiguous limbs: views of the ring's tables; other limbs: the
    transforms read the ring's tables by row, and psi / psi_inv, only for ops that take
    dense tables (kernel tests), are gathered on first use.

    Scalar constants (`scalar`) are cached for the life of the basis and never evicted: a
    captured CUDA graph holds pointers to the tensors it was captured with.
    """

    def __init__(self, ring: "Ring", limbs: tuple):
        self.limbs = limbs
        self.primes = tuple(ring.primes[i] for i in limbs)
        self.runs = runs(limbs)
        self._ring = ring
        self._scalars: dict[int, torch.Tensor] = {}
        self._scalar_tables: dict[tuple, torch.Tensor] = {}
        self.mod, self.n_inv_mont, self.n_inv, self.r2 = (self._select(t) for t in
                                                          (ring.mod, ring.n_inv_mont, ring.n_inv, ring.r2))

    @property
    def contiguous(self) -> bool:
        return len(self.runs) <= 1

    def _select(self, table: torch.Tensor) -> torch.Tensor:
        if self.contiguous:
            start = self.runs[0][0] if self.runs else 0
            return table.narrow(0, start, len(self.limbs))
        return table.index_select(0, torch.tensor(self.limbs, dtype=torch.long, device=table.device))

    @cached_property
    def psi(self) -> torch.Tensor:
        return self._select(self._ring.psi)

    @cached_property
    def psi_inv(self) -> torch.Tensor:
        return self._select(self._ring.psi_inv)

    @property
    def tensors(self) -> list:
        """Every table this basis holds, views included (for memory reports)."""
        built = [self.__dict__[k] for k in ("psi", "psi_inv", "one", "garner") if k in self.__dict__]
        return [self.mod, self.n_inv_mont, self.n_inv, self.r2] + built

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

        Cached for the life of this basis (never evicted): circuits reuse their constants, a
        cached tensor needs no host-to-device copy (so the call can run inside CUDA graph
        capture), and a captured graph keeps reading the tensors it was captured with."""
        c = int(c)
        t = self._scalars.get(c)
        if t is None:
            t = self._scalars[c] = self.const([c % q for q in self.primes])
        return t

    def scalar_table(self, cs) -> torch.Tensor:
        """The integers cs as a (len(cs), L) table of per-limb Montgomery constants (row t is
        scalar(cs[t]); the consts of _ops.lincomb). Cached for the life of this basis, as scalar."""
        key = tuple(int(c) for c in cs)
        t = self._scalar_tables.get(key)
        if t is None:
            t = self._scalar_tables[key] = torch.tensor([[mont(c % q, q) for q in self.primes] for c in key],
                                                        dtype=torch.int32, device=self.mod.device)
        return t

    @property
    def scalars(self) -> list:
        """The cached scalar constants and tables (for memory reports)."""
        return list(self._scalars.values()) + list(self._scalar_tables.values())

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


def bconv_matrix(src: Basis, dst: Basis) -> torch.Tensor:
    """(len(dst), len(src)) centred Montgomery constants (Q/q_j) * 2^64 mod p_i: fast base
    conversion from src to dst (Q = src.product)."""
    Q = src.product
    rows = []
    for p in dst.primes:
        row = []
        for q in src.primes:
            v = (Q // q) * R * R % p
            row.append(v - p if v > p // 2 else v)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int32, device=src.mod.device)


def bconv_pre(src: Basis, factor: int = 1) -> torch.Tensor:
    """INTT post-constants giving standard-form [x * factor * (Q/q_j)^-1]_{q_j}: BConv's input."""
    Q, n = src.product, src._ring.n
    vals = [pow(n, -1, q) * factor * pow(Q // q, -1, q) % q for q in src.primes]
    return torch.tensor(vals, dtype=torch.int32, device=src.mod.device)


class Ring:
    """Tables of the NTT over Z_q[X]/(X^N + 1) for every prime of an ordered list.

    Full tables (one row per prime): mod (R, 2), psi and psi_inv (R, N), n_inv_mont, n_inv,
    r2 (R,). Bases of limb subsets are built once per subset and kept (`basis`)."""

    def __init__(self, log_n: int, primes, device="cpu"):
        self.log_n = int(log_n)
        self.n = 1 << self.log_n
        self.primes = tuple(int(q) for q in primes)
        self.device = torch.device(device)
        for q in self.primes:
            if not (q < 2**31 and q % (2 * self.n) == 1):
                raise ParameterError(f"Ring: {q} is not an NTT-friendly prime below 2^31 for N = {self.n} "
                                     "(q = 1 mod 2N); pick primes with ntt_primes()")
        self.mod, self.psi, self.psi_inv, self.n_inv_mont, self.n_inv, self.r2 = self._build_tables()
        self._bases: dict[tuple, Basis] = {}

    def _build_tables(self):
        n, rev = self.n, bit_reverse_indices(self.log_n)
        psi_t, psi_inv_t, mod = [], [], []
        for q in self.primes:
            psi = primitive_root_2n(q, self.log_n)
            rq = np.uint64(R % q)
            psi_t.append((_powers(psi, q, n)[rev] * rq % np.uint64(q)).astype(np.int64))
            psi_inv_t.append((_powers(pow(psi, -1, q), q, n)[rev] * rq % np.uint64(q)).astype(np.int64))
            mod.append((q, signed32(pow(q, -1, R))))
        as32 = lambda a: torch.tensor(np.asarray(a, dtype=np.int64).astype(np.int32), device=self.device)  # noqa: E731
        return (as32(mod), as32(np.stack(psi_t)), as32(np.stack(psi_inv_t)),
                as32([mont(pow(n, -1, q), q) for q in self.primes]), as32([pow(n, -1, q) for q in self.primes]),
                as32([R * R % q for q in self.primes]))

    @property
    def tables(self) -> list:
        """The full tables (their storage is what every contiguous basis views)."""
        return [self.mod, self.psi, self.psi_inv, self.n_inv_mont, self.n_inv, self.r2]

    def basis(self, limbs=None) -> Basis:
        """The tables of `limbs` (indices into self.primes, in order; None: all of them)."""
        limbs = tuple(range(len(self.primes))) if limbs is None else tuple(int(i) for i in limbs)
        b = self._bases.get(limbs)
        if b is None:
            b = self._bases[limbs] = Basis(self, limbs)
        return b

    @property
    def bases(self) -> list:
        """The bases built so far (for memory reports)."""
        return list(self._bases.values())

    def to(self, device) -> "Ring":
        return Ring(self.log_n, self.primes, device)

    # --- transforms on a basis ------------------------------------------------------
    def ntt(self, x: torch.Tensor, basis: Basis) -> torch.Tensor:
        if basis.contiguous:
            return _ops.ntt(x, basis.mod, basis.psi)
        return _ops.ntt(x, basis.mod, self.psi, basis.limbs)

    def intt(self, x: torch.Tensor, basis: Basis, post: torch.Tensor | None = None) -> torch.Tensor:
        """Inverse NTT; output in Montgomery form unless `post` (per-limb) says otherwise."""
        post = basis.n_inv_mont if post is None else post
        if basis.contiguous:
            return _ops.intt(x, basis.mod, basis.psi_inv, post)
        return _ops.intt(x, basis.mod, self.psi_inv, post, basis.limbs)

    def from_integers(self, coeffs: torch.Tensor, basis: Basis) -> torch.Tensor:
        """Signed int64 coefficients (..., N) -> NTT-domain residues (..., L, N)."""
        return self.ntt(_ops.to_rns(coeffs.to(self.device, torch.int64).contiguous(), basis.mod, basis.r2), basis)

    def bconv(self, x_ntt: torch.Tensor, src: Basis, dst: Basis, factor: int = 1) -> torch.Tensor:
        """NTT-domain x over `src` -> coefficient-domain (Montgomery) [x*factor]_src + u*Q_src over `dst`."""
        t = self.intt(x_ntt, src, post=bconv_pre(src, factor))
        return _ops.bconv(t, src.mod, dst.mod, bconv_matrix(src, dst))

    def to_integers(self, x_ntt: torch.Tensor, basis: Basis) -> list:
        """Exact centred integer coefficients (Python ints), for tests and small N."""
        digits = self.crt_digits(x_ntt, basis).cpu().numpy().astype(object)
        w = basis.radix_weights
        out = digits[..., 0, :] * 0
        for k in range(len(w)):
            out = out + digits[..., k, :] * w[k]
        return out

    def to_int64(self, x_ntt: torch.Tensor, basis: Basis) -> torch.Tensor:
        """Exact centred int64 coefficients (..., N) of NTT-domain residues over a basis whose
        product is below 2^62 (level 0's: ModRaise, scheme switching)."""
        digits = self.crt_digits(x_ntt, basis).to(torch.int64)
        out = digits[..., 0, :]
        for k, w in enumerate(basis.radix_weights[1:], start=1):
            out = out + digits[..., k, :] * w
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
