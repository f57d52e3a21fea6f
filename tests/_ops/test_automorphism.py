"""automorphism(x, g) on NTT-domain rows equals the NTT of a(X) -> a(X^g) mod (X^N + 1).

The coefficient-domain map is computed with big integers; the NTT of it either with the
big-integer definition (small N: position k holds a(psi^(2*brev(k)+1))) or with the ntt op
(itself checked against the definition in test_ntt.py).
"""
import random

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes, primitive_root_2n
from .reference import brev


def pick_primes(log_n: int, L: int) -> list:
    big = largest_ntt_primes(log_n, 3)
    small = ntt_primes(log_n, 25, 3)
    pool = big + small
    out = [random.choice(big), random.choice(small)]
    out += random.sample([q for q in pool if q not in out], max(0, L - 2))
    return out[:L]


def galois_elements(log_n: int) -> list:
    """Random odd g, 2N - 1 (conjugation), powers of 5 (rotations) and their conjugates, 1."""
    two_n = 2 << log_n
    gs = {1, two_n - 1}
    for _ in range(3):
        gs.add(random.randrange(1, two_n, 2))
        k = random.randrange(1, max(2, two_n // 4))
        gs.add(pow(5, k, two_n))
        gs.add(pow(5, k, two_n) * (two_n - 1) % two_n)
    gs.add(5 % two_n if two_n > 5 else 3)
    return sorted(gs)


def apply_galois(a: np.ndarray, g: int, q: int) -> np.ndarray:
    """Coefficients of a(X^g) mod (X^N + 1, q): X^j -> X^(j*g mod 2N), X^N = -1."""
    N = len(a)
    out = np.zeros(N, dtype=object)
    for j in range(N):
        e = j * g % (2 * N)
        if e < N:
            out[e] = (out[e] + a[j]) % q
        else:
            out[e - N] = (out[e - N] - a[j]) % q
    return out


def ntt_definition(a: np.ndarray, q: int, log_n: int) -> np.ndarray:
    N = 1 << log_n
    psi = primitive_root_2n(q, log_n)
    w = np.array([pow(psi, 2 * brev(k, log_n) + 1, q) for k in range(N)], dtype=object)
    acc = np.zeros(N, dtype=object)
    for j in range(N - 1, -1, -1):
        acc = (acc * w + a[j]) % q
    return acc


def rand_poly(batch, primes, N) -> torch.Tensor:
    x = torch.empty((*batch, len(primes), N), dtype=torch.int32)
    for l, q in enumerate(primes):
        x[..., l, :] = torch.randint(0, q, (*batch, N), dtype=torch.int32)
    return x


def check(log_n: int, batch, L: int, use_definition: bool):
    N = 1 << log_n
    primes = pick_primes(log_n, L)
    b = Ring(log_n, primes).basis()
    x = rand_poly(batch, primes, N)  # coefficient domain (any form: the map is linear)
    X = x.numpy().astype(np.int64).astype(object).reshape(-1, L, N)
    fx = _ops.ntt(x, b.mod, b.psi)
    for g in galois_elements(log_n):
        got = _ops.automorphism(fx, g)
        assert got.shape == fx.shape
        mapped = np.empty(X.shape, dtype=object)
        for r in range(X.shape[0]):
            for l, q in enumerate(primes):
                mapped[r, l] = apply_galois(X[r, l], g, q)
        if use_definition:
            want = np.empty(X.shape, dtype=object)
            for r in range(X.shape[0]):
                for l, q in enumerate(primes):
                    want[r, l] = ntt_definition(mapped[r, l], q, log_n)
            want = want.reshape(got.shape)
        else:
            m = torch.tensor(mapped.astype(np.int64), dtype=torch.int32).reshape(x.shape)
            want = _ops.ntt(m, b.mod, b.psi).numpy().astype(np.int64).astype(object)
        g_np = got.numpy().astype(np.int64).astype(object)
        bad = np.argwhere(g_np != want)
        assert len(bad) == 0, (f"automorphism N={N} g={g} primes={primes}: {len(bad)} wrong, first at "
                               f"{tuple(bad[0])}: got {g_np[tuple(bad[0])]}, want {want[tuple(bad[0])]}")


@pytest.mark.parametrize("log_n", [1, 2, 3, 4, 5, 6, 7])
def test_automorphism_definition(log_n):
    check(log_n, (2,), 2, use_definition=True)


@pytest.mark.parametrize("log_n", [8, 10, 12])
def test_automorphism_vs_ntt(log_n):
    check(log_n, (2,) if log_n < 12 else (), 2, use_definition=False)


def test_automorphism_composition_and_inverse():
    """X -> X^g then X -> X^h is X -> X^(g*h mod 2N); g and g^-1 mod 2N cancel."""
    log_n = random.randint(3, 12)
    two_n = 2 << log_n
    primes = pick_primes(log_n, 2)
    x = rand_poly((3,), primes, 1 << log_n)
    for _ in range(5):
        g, h = random.randrange(1, two_n, 2), random.randrange(1, two_n, 2)
        gh = _ops.automorphism(_ops.automorphism(x, g), h)
        assert torch.equal(gh, _ops.automorphism(x, g * h % two_n))
        assert torch.equal(_ops.automorphism(_ops.automorphism(x, g), pow(g, -1, two_n)), x)
    assert torch.equal(_ops.automorphism(x, 1), x)


def test_automorphism_rejects_bad_galois():
    x = torch.zeros(2, 16, dtype=torch.int32)
    for g in (0, 2, 32, 33, -1, 64):
        with pytest.raises(RuntimeError):
            _ops.automorphism(x, g)
