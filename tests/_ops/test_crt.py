"""crt_digits and Ring.to_integers reconstruct centred big integers exactly.

crt_digits (schema.cpp): standard-form residues -> centred mixed-radix digits v_k with
|v_k| <= (q_k - 1)/2 and x = sum_k v_k * q_0 ... q_(k-1); with odd primes this balanced
representation covers exactly |x| <= (Q - 1)/2, uniquely.
"""
import random

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes
from .reference import R


def pick_primes(log_n: int, L: int) -> list:
    big = largest_ntt_primes(log_n, L + 2)
    mid = ntt_primes(log_n, random.choice([25, 28, 30]), L + 2, exclude=big)
    primes = random.sample(big + mid, L)
    return primes


def rand_centred(Q: int, n: int) -> list:
    h = (Q - 1) // 2
    v = [random.randint(-h, h) for _ in range(n)]
    # extremes, zero, small values, and values with a zero / extreme mixed-radix digit
    specials = [h, -h, 0, 1, -1, h - 1, -h + 1, random.randint(-1000, 1000)]
    for e in specials:
        v[random.randrange(n)] = e
    return v


def ntt_of(ring: Ring, values, batch_shape, idx=None) -> torch.Tensor:
    b = ring.basis(idx)
    v = np.array(values, dtype=object).reshape(*batch_shape, ring.n)
    res = np.empty((*batch_shape, len(b.primes), ring.n), dtype=np.int64)
    for l, q in enumerate(b.primes):
        res[..., l, :] = (v % q) * R % q
    return ring.ntt(torch.tensor(res, dtype=torch.int32), b)


@pytest.mark.parametrize("L", [1, 2, 3, 5, 8, 13, 24, 40])
def test_to_integers_exact(L):
    log_n = random.randint(2, 6)
    ring = Ring(log_n, pick_primes(log_n, L))
    b = ring.basis()
    batch = (2, 3)
    vals = rand_centred(b.product, 6 * ring.n)
    got = ring.to_integers(ntt_of(ring, vals, batch), b)
    assert got.shape == (*batch, ring.n)
    g = [int(v) for v in np.asarray(got).reshape(-1)]
    bad = [(i, g[i], vals[i]) for i in range(len(vals)) if g[i] != vals[i]]
    assert not bad, f"{len(bad)} wrong, first (index, got, want): {bad[0]}"


@pytest.mark.parametrize("L", [1, 2, 4, 7, 16, 40])
def test_crt_digits_centred(L):
    """The op on standard-form residues: digits centred and summing to x (both unique)."""
    log_n = random.randint(2, 8)
    N = 1 << log_n
    ring = Ring(log_n, pick_primes(log_n, L))
    b = ring.basis()
    primes = b.primes
    vals = rand_centred(b.product, 2 * N)
    res = np.array([[v % q for q in primes] for v in vals], dtype=np.int64)  # (2N, L)
    x = torch.tensor(res.T.reshape(L, 2, N).transpose(1, 0, 2).copy(), dtype=torch.int32)  # (2, L, N)
    d = _ops.crt_digits(x, b.mod, b.garner)
    assert d.shape == x.shape and d.dtype == torch.int32
    D = d.numpy().astype(np.int64).astype(object)
    for k, q in enumerate(primes):
        assert (np.abs(D[:, k, :]) <= (q - 1) // 2).all(), f"digit {k} not centred for q={q}"
    W = b.radix_weights
    assert W[0] == 1 and all(W[k + 1] == W[k] * primes[k] for k in range(L - 1))
    for r in range(2):
        for c in range(N):
            v = vals[r * N + c]
            s = sum(int(D[r, k, c]) * W[k] for k in range(L))
            assert s == v, f"x={v}: digits {list(D[r, :, c])} sum to {s}"
            # expected digits by the balanced mixed-radix recursion
            rest = v
            for k, q in enumerate(primes):
                vk = rest % q
                vk = vk - q if vk > q // 2 else vk
                assert int(D[r, k, c]) == vk
                rest = (rest - vk) // q
            assert rest == 0


def test_garner_table():
    """garner[k][i] = (q_0..q_(i-1)) * 2^32 mod q_k (i < k), garner[k][k] = (q_0..q_(k-1))^-1 * 2^32."""
    log_n = random.randint(2, 8)
    ring = Ring(log_n, pick_primes(log_n, 7))
    b = ring.basis(random.sample(range(7), 5))
    g = b.garner.tolist()
    for k, qk in enumerate(b.primes):
        w = 1
        for i in range(k):
            assert g[k][i] == w * R % qk
            w *= b.primes[i]
        assert g[k][k] == pow(w, -1, qk) * R % qk


def test_to_integers_on_sub_basis():
    """A limb subset (a level, an out-of-order digit) reconstructs modulo its own product."""
    log_n = random.randint(2, 6)
    ring = Ring(log_n, pick_primes(log_n, 9))
    idx = tuple(random.sample(range(9), random.randint(1, 9)))
    b = ring.basis(idx)
    vals = rand_centred(b.product, 3 * ring.n)
    got = ring.to_integers(ntt_of(ring, vals, (3,), idx), b)
    assert [int(v) for v in np.asarray(got).reshape(-1)] == vals


@pytest.mark.parametrize("L", [1, 3, 8, 20])
def test_from_integers_roundtrip(L):
    """Ring.from_integers (to_rns with the basis' r2, then NTT) is inverted by to_integers."""
    log_n = random.randint(2, 7)
    ring = Ring(log_n, pick_primes(log_n, L))
    b = ring.basis()
    bound = min(2**63 - 1, (b.product - 1) // 2)
    vals = [random.randint(-bound, bound) for _ in range(2 * ring.n)]
    vals[0], vals[1] = bound, -bound
    if bound == 2**63 - 1:
        vals[2] = -(2**63)
    x = torch.tensor(vals, dtype=torch.int64).reshape(2, ring.n)
    got = ring.to_integers(ring.from_integers(x, b), b)
    want = [v if abs(v) <= (b.product - 1) // 2 else (v + b.product // 2) % b.product - b.product // 2 for v in vals]
    assert [int(v) for v in np.asarray(got).reshape(-1)] == want


def _to_float_check(L, divisor, primes=None, log_n=None):
    log_n = log_n or random.randint(2, 5)
    ring = Ring(log_n, primes or pick_primes(log_n, L))
    b = ring.basis()
    vals = rand_centred(b.product, 2 * ring.n)
    got = ring.to_float(ntt_of(ring, vals, (2,)), b, divisor).reshape(-1).tolist()
    digits = ring.crt_digits(ntt_of(ring, vals, (2,)), b).numpy().astype(np.int64)
    W = b.radix_weights
    for i, v in enumerate(vals):
        r, c = divmod(i, ring.n)
        # one rounding per term (digit * (W_k / divisor)) and per addition
        mag = sum(abs(int(digits[r, k, c])) * W[k] for k in range(L)) / divisor
        exact = v / divisor if isinstance(divisor, int) else float(v) / divisor
        assert abs(got[i] - exact) <= (2 * L + 2) * 2.0**-52 * mag, (v, got[i], exact)


@pytest.mark.parametrize("L,divisor", [(1, 2.0**20), (5, 2.0**40), (12, 2**35), (30, 2.0**40)])
def test_to_float(L, divisor):
    _to_float_check(L, divisor)


def test_to_float_beyond_1024_bits():
    """n16 presets have 44-47 limbs (~1310-1330 bits) at their top level, beyond float range:
    decrypted messages are small, and to_float must still convert them."""
    log_n = 4
    ring = Ring(log_n, random.sample(largest_ntt_primes(log_n, 44), 40))  # ~1240 bits
    b = ring.basis()
    vals = [random.randrange(-2**100, 2**100) for _ in range(ring.n)]
    got = ring.to_float(ntt_of(ring, vals, ()), b, 2.0**40).tolist()
    for v, g in zip(vals, got):
        assert abs(g - v / 2**40) <= 1e-14 * abs(v / 2**40) + 1e-300, (v, g)
