"""RLWE keys: secret, public and key-switching keys; generation and encryption.

All polynomials are NTT-domain residues in Montgomery form (fhetorch/ring). Key-switching
keys live modulo P * Q_max and are valid at every level (Cheddar 3.2): a level's limbs are
a subset of Q_max, so the key is used by taking those limbs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _ops
from ..ring import Ring, Sampler


@dataclass
class SecretKey:
    s: torch.Tensor  # (L_max + K, N) over all limbs

    def to(self, device):
        return SecretKey(self.s.to(device))


@dataclass
class PublicKey:
    data: torch.Tensor  # (2, L_max, N): (-a*s + e, a) over Q_max

    def to(self, device):
        return PublicKey(self.data.to(device))


@dataclass
class SwitchingKey:
    """Key switching s' -> s, one (b_j, a_j) pair per digit, b_j = -a_j s + e_j + P g_j s'."""

    key_q: torch.Tensor  # (dnum, 2, L_max, N)
    key_p: torch.Tensor  # (dnum, 2, K, N)

    def to(self, device):
        return SwitchingKey(self.key_q.to(device), self.key_p.to(device))

    @property
    def nbytes(self) -> int:
        return self.key_q.numel() * 4 + self.key_p.numel() * 4


def gen_secret(ring: Ring, sampler: Sampler, hamming_weight: int | None = None) -> SecretKey:
    coeffs = sampler.ternary(ring.n) if hamming_weight is None else sampler.sparse_ternary(ring.n, hamming_weight)
    return SecretKey(ring.from_integers(coeffs, ring.basis()))


def small_poly(ring: Ring, sampler: Sampler, idx, kind: str = "error") -> torch.Tensor:
    c = sampler.error(ring.n) if kind == "error" else sampler.ternary(ring.n)
    return ring.from_integers(c, ring.basis(idx))


def gen_public(ring: Ring, sampler: Sampler, sk: SecretKey, q_count: int) -> PublicKey:
    idx = tuple(range(q_count))
    b = ring.basis(idx)
    a = sampler.uniform(b, 1, ring.n)[0]
    s = sk.s.narrow(0, 0, q_count)
    e = small_poly(ring, sampler, idx)
    return PublicKey(torch.stack([_ops.sub(e, _ops.mul(a, s, b.mod), b.mod), a]))


def gen_switching(ring: Ring, sampler: Sampler, sk: SecretKey, s_from: torch.Tensor, q_count: int,
                  alpha: int) -> SwitchingKey:
    """Key switching from s_from (all limbs, NTT) to sk.s."""
    all_idx = tuple(range(len(ring.primes)))
    b_all = ring.basis(all_idx)
    special = ring.primes[q_count:]
    P = 1
    for p in special:
        P *= p
    dnum = -(-q_count // alpha)
    keys = []
    for j in range(dnum):
        a = sampler.uniform(b_all, 1, ring.n)[0]
        e = small_poly(ring, sampler, all_idx)
        body = _ops.sub(e, _ops.mul(a, sk.s, b_all.mod), b_all.mod)
        # + P * s_from on the limbs of digit j (the gadget is 1 there, 0 elsewhere)
        lo, hi = j * alpha, min(q_count, (j + 1) * alpha)
        bj = ring.basis(tuple(range(lo, hi)))
        gs = _ops.mul_const(s_from[lo:hi].contiguous(), bj.scalar(P), bj.mod)
        body = body.clone()
        body[lo:hi] = _ops.add(body[lo:hi].contiguous(), gs, bj.mod)
        keys.append(torch.stack([body, a]))
    k = torch.stack(keys)  # (dnum, 2, L_all, N)
    return SwitchingKey(k[:, :, :q_count].contiguous(), k[:, :, q_count:].contiguous())
