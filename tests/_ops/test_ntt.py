"""Negacyclic NTT kernels, exact against the big-integer definition.

Forward (csrc/cpu/ntt.cpp, schema.cpp): natural order in, bit-reversed order out; output
position k holds a(psi^(2*brev(k)+1)) mod q, psi = primitive_root_2n(q, log_n). Data are in
Montgomery form (x * 2^32 mod q); since evaluation is linear, the Montgomery factor passes
through: ntt(x)[k] = x(psi^(2*brev(k)+1)) mod q for the stored integers x.
Inverse: bit-reversed in, natural out, every output times post[l] (Montgomery product).
"""
import random

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes, primitive_root_2n
from .reference import R, brev


def pick_primes(log_n: int, L: int) -> list:
    """L distinct NTT primes for 2N: one just below 2^31 and one ~25-bit, then a mix."""
    big = largest_ntt_primes(log_n, 4)
    small = ntt_primes(log_n, 25, 3)
    mid = ntt_primes(log_n, 30, 3, exclude=big)
    out = [random.choice(big), random.choice(small)]
    rest = [q for q in big + mid + small if q not in out]
    out = (out + random.sample(rest, max(0, L - 2)))[:L]
    random.shuffle(out)
    return out


def rand_rows(batch, primes, N, edges=True) -> torch.Tensor:
    """(*batch, L, N) canonical residues; one random row is all q-1 (the largest input)."""
    L = len(primes)
    x = torch.empty((*batch, L, N), dtype=torch.int32)
    for l, q in enumerate(primes):
        x[..., l, :] = torch.randint(0, q, (*batch, N), dtype=torch.int32)
    if edges:
        flat = x.view(-1, L, N)
        r = random.randrange(flat.shape[0])
        l = random.randrange(L)
        flat[r, l, :] = primes[l] - 1
        flat[random.randrange(flat.shape[0]), random.randrange(L), random.randrange(N)] = 0
    return x


def eval_points(q: int, log_n: int) -> np.ndarray:
    """omega_k = psi^(2*brev(k)+1) mod q, k = 0..N-1 (Python ints)."""
    psi = primitive_root_2n(q, log_n)
    N = 1 << log_n
    assert pow(psi, N, q) == q - 1
    return np.array([pow(psi, 2 * brev(k, log_n) + 1, q) for k in range(N)], dtype=object)


def ntt_reference(x: torch.Tensor, primes, log_n: int) -> np.ndarray:
    """Big-int evaluation at every point by Horner, all rows at once: O(N^2) per row."""
    L, N = len(primes), 1 << log_n
    X = x.numpy().astype(np.int64).astype(object).reshape(-1, L, N)
    w = np.stack([eval_points(q, log_n) for q in primes])[None]  # (1, L, N)
    q = np.array(primes, dtype=object).reshape(1, L, 1)
    acc = np.zeros(X.shape, dtype=object)
    for j in range(N - 1, -1, -1):
        acc = (acc * w + X[:, :, j : j + 1]) % q
    return acc.reshape(x.shape)


def assert_equal(got: torch.Tensor, want, what: str):
    g = got.numpy().astype(np.int64).astype(object)
    want = np.asarray(want, dtype=object)
    assert g.shape == want.shape, f"{what}: shape {g.shape} != {want.shape}"
    bad = np.argwhere(g != want)
    if len(bad):
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} of {g.size} differ, first at {i}: got {g[i]}, want {want[i]}")


def test_ring_tables_match_definition():
    """psi / psi_inv tables: psi^(+-brev(k)) * 2^32 mod q; n_inv(_mont), r2, mod as documented."""
    log_n = random.randint(1, 10)
    N = 1 << log_n
    primes = pick_primes(log_n, 3)
    b = Ring(log_n, primes).basis()
    for l, q in enumerate(primes):
        psi = primitive_root_2n(q, log_n)
        assert pow(psi, N, q) == q - 1
        want = [pow(psi, brev(k, log_n), q) * R % q for k in range(N)]
        want_inv = [pow(psi, -brev(k, log_n), q) * R % q for k in range(N)]
        assert b.psi[l].tolist() == want
        assert b.psi_inv[l].tolist() == want_inv
        assert int(b.mod[l, 0]) == q and (int(b.mod[l, 1]) * q) % R == 1
        assert int(b.n_inv_mont[l]) == pow(N, -1, q) * R % q
        assert int(b.n_inv[l]) == pow(N, -1, q)
        assert int(b.r2[l]) == R * R % q


@pytest.mark.parametrize("log_n", list(range(1, 11)))
def test_ntt_definition(log_n):
    N = 1 << log_n
    L = random.randint(2, 4) if log_n <= 8 else 2
    batch = (2,) if log_n >= 9 else (2, 2)
    primes = pick_primes(log_n, L)
    b = Ring(log_n, primes).basis()
    x = rand_rows(batch, primes, N)
    y = _ops.ntt(x, b.mod, b.psi)
    assert y.shape == x.shape
    assert_equal(y, ntt_reference(x, primes, log_n), f"ntt N={N} primes={primes}")


def test_ntt_definition_single_row():
    """A lone (N,) row and a (1, N) limb are accepted and transformed like any row."""
    log_n = random.randint(2, 8)
    N = 1 << log_n
    primes = pick_primes(log_n, 1)
    b = Ring(log_n, primes).basis()
    x = rand_rows((), primes, N)
    assert_equal(_ops.ntt(x, b.mod, b.psi), ntt_reference(x, primes, log_n), "ntt (1, N)")
    assert_equal(_ops.ntt(x[0].contiguous(), b.mod, b.psi), ntt_reference(x, primes, log_n)[0], "ntt (N,)")


@pytest.mark.parametrize("log_n", [1, 2, 4, 7, 10, 12, 13])
def test_intt_roundtrip(log_n):
    N = 1 << log_n
    L = 3
    primes = pick_primes(log_n, L)
    b = Ring(log_n, primes).basis()
    x = rand_rows((2,), primes, N)
    y = _ops.ntt(x, b.mod, b.psi)
    assert_equal(_ops.intt(y, b.mod, b.psi_inv, b.n_inv_mont), x.numpy(), "intt(ntt(x)), Montgomery post")
    # post = N^-1 gives the standard form x * 2^-32; a general post c gives N * x * c * 2^-32.
    X = x.numpy().astype(np.int64).astype(object)
    q = np.array(primes, dtype=object).reshape(L, 1)
    rinv = np.array([pow(R, -1, p) for p in primes], dtype=object).reshape(L, 1)
    assert_equal(_ops.intt(y, b.mod, b.psi_inv, b.n_inv), X * rinv % q, "intt post=N^-1")
    c = [random.randrange(p) for p in primes]
    got = _ops.intt(y, b.mod, b.psi_inv, torch.tensor(c, dtype=torch.int32))
    assert_equal(got, N * X * np.array(c, dtype=object).reshape(L, 1) * rinv % q, "intt general post")
    # and the input is left untouched
    assert_equal(_ops.ntt(x, b.mod, b.psi), y.numpy(), "ntt is deterministic / input unmodified")


def negacyclic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b mod (X^N + 1) over the integers (object arrays of length N)."""
    N = len(a)
    full = np.convolve(a, b)  # length 2N - 1, exact Python ints
    out = full[:N].copy()
    out[: N - 1] -= full[N:]
    return out


@pytest.mark.parametrize("log_n", list(range(1, 11)))
def test_negacyclic_convolution(log_n):
    """intt(ntt(a) * ntt(b)) = a * b mod (X^N + 1), all in Montgomery form.

    With stored values xa = a * 2^32, xb = b * 2^32, the Montgomery product keeps the
    form, so the output stores (a*b) * 2^32 = negacyclic(xa, xb) * 2^-32 mod q.
    """
    N = 1 << log_n
    L = 2
    primes = pick_primes(log_n, L)
    b = Ring(log_n, primes).basis()
    xa = rand_rows((2,), primes, N)
    xb = rand_rows((2,), primes, N)
    fa, fb = _ops.ntt(xa, b.mod, b.psi), _ops.ntt(xb, b.mod, b.psi)
    got = _ops.intt(_ops.mul(fa, fb, b.mod), b.mod, b.psi_inv, b.n_inv_mont)
    A = xa.numpy().astype(np.int64).astype(object)
    B = xb.numpy().astype(np.int64).astype(object)
    want = np.empty(A.shape, dtype=object)
    for r in range(A.shape[0]):
        for l, q in enumerate(primes):
            want[r, l] = negacyclic(A[r, l], B[r, l]) * pow(R, -1, q) % q
    assert_equal(got, want, f"negacyclic product N={N}")
