"""RLWE keys: secret, public and key-switching keys; generation and encryption.

All polynomials are NTT-domain residues in Montgomery form (fhetorch/ring). Key-switching
keys live modulo P * Q_max and are valid at every level (Cheddar 3.2): a level's limbs are
a subset of Q_max, so the key is used by taking those limbs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _ops
from ..errors import SerializationError
from .._ring import Ring, Sampler


@dataclass
class SecretKey:
    s: torch.Tensor  # (L_max + K, N) over all limbs

    def to(self, device):
        return SecretKey(self.s.to(device))

    def __reduce__(self):
        # pickle and torch.save: the secret key leaves a process only by name, in a file
        raise SerializationError("pickle: a secret key is never pickled; send ctx.public() to a server, and keep "
                                 "the client's keys with fhetorch.save(ctx, path, secret_key=True)")

    def __deepcopy__(self, memo):  # an in-process copy is allowed (it stays in this process)
        return SecretKey(self.s.clone())

    def __copy__(self):
        return SecretKey(self.s)


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
                  alpha: int, q_stop: int | None = None) -> SwitchingKey:
    """Key switching from s_from (all limbs, NTT) to sk.s.

    q_stop: keep only Q limbs [0, q_stop) and the digits that touch them (a key used only at
    low levels, e.g. bootstrapping's SlotToCoeff; the levels share one prime list, so a key
    for the top level works at every lower one by dropping limbs, and a key for level l
    only needs level l's limbs)."""
    q_stop = q_count if q_stop is None else q_stop
    idx = tuple(range(q_stop)) + tuple(range(q_count, len(ring.primes)))
    b_all = ring.basis(idx)
    special = ring.primes[q_count:]
    P = 1
    for p in special:
        P *= p
    s = sk.s.index_select(0, torch.tensor(idx, device=sk.s.device)) if q_stop < q_count else sk.s
    dnum = -(-q_stop // alpha)
    keys = []
    for j in range(dnum):
        a = sampler.uniform(b_all, 1, ring.n)[0]
        e = small_poly(ring, sampler, idx)
        body = _ops.sub(e, _ops.mul(a, s, b_all.mod), b_all.mod)
        # + P * s_from on the limbs of digit j (the gadget is 1 there, 0 elsewhere)
        lo, hi = j * alpha, min(q_stop, (j + 1) * alpha)
        bj = ring.basis(tuple(range(lo, hi)))
        gs = _ops.mul_const(s_from[lo:hi].contiguous(), bj.scalar(P), bj.mod)
        body = body.clone()
        body[lo:hi] = _ops.add(body[lo:hi].contiguous(), gs, bj.mod)
        keys.append(torch.stack([body, a]))
    k = torch.stack(keys)  # (dnum, 2, q_stop + K, N)
    return SwitchingKey(k[:, :, :q_stop].contiguous(), k[:, :, q_stop:].contiguous())


def switching_key_bytes(n: int, q_stop: int, special: int, alpha: int) -> int:
    """Bytes of a gen_switching key over Q limbs [0, q_stop) and `special` P limbs: one
    (body, a) pair of int32 polynomials per digit of alpha limbs."""
    return -(-q_stop // alpha) * 2 * (q_stop + special) * n * 4


def gen_switching_level(ring: Ring, sampler: Sampler, sk: SecretKey, s_from: torch.Tensor, limbs: range,
                        special_limbs: range) -> SwitchingKey:
    """A one-digit key switching s_from -> sk.s for ciphertexts on the limbs `limbs` only,
    with the special primes `special_limbs` (a subset of P, enough to exceed the level's modulus).

    Used by keyswitch(..., limbs, special_limbs, alpha=limbs.stop): the digit is the
    whole level. Its modulus is only Q_level * P' (bootstrapping's switch to the sparse
    ephemeral secret at level 0: ~143 bits at n16-bts*, Bossuat et al. 2022; its security
    estimate is fhetorch/_ckks/sparse_security.py)."""
    idx = tuple(limbs) + tuple(special_limbs)
    b = ring.basis(idx)
    sel = torch.tensor(idx, device=sk.s.device)
    s_to, s_fr = sk.s.index_select(0, sel), s_from.index_select(0, sel)
    P = ring.basis(tuple(special_limbs)).product
    a = sampler.uniform(b, 1, ring.n)[0]
    e = small_poly(ring, sampler, idx)
    body = _ops.sub(e, _ops.mul(a, s_to, b.mod), b.mod)
    body = _ops.add(body, _ops.mul_const(s_fr, b.scalar(P), b.mod), b.mod)  # gadget P on every level limb
    L = len(limbs)
    key_q = torch.zeros((1, 2, limbs.stop, ring.n), dtype=torch.int32, device=body.device)
    key_q[0, 0, limbs.start:] = body[:L]
    key_q[0, 1, limbs.start:] = a[:L]
    key_p = torch.stack([body[L:], a[L:]]).unsqueeze(0).contiguous()
    return SwitchingKey(key_q, key_p)
