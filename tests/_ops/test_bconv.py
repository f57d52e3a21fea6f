"""Fast base conversion and the modulus switches built on it, exact against big integers.

* bconv op: y_i = sum_j centre(x_j) * mat[i][j] * 2^-32 mod p_i (csrc/bind/schema.cpp), with
  the lazy 64-bit accumulator of csrc/arith.h (fold_acc every 4 products) pushed to its
  worst case (primes just below 2^31, all products of one sign and maximal size).
* Ring.bconv(x_ntt, src, dst, factor): coefficient-domain Montgomery [x*factor]_src + u*Q_src
  over dst with a small integer u (|u| <= len(src)), the same u on every dst prime.
* rlwe.switch_modulus: round(x * A / D) up to a small additive error (|err| <= len(D) + 1; in
  fact |result - x*A/D| < len(D)/2, since result = (x*A - S)/D with |S| < len(D)*D/2).
* rlwe.mod_up: each digit lifted to level + P as [a]_digit + u * Q_digit.
"""
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes
from fhetorch._ring.ring import bconv_matrix
from fhetorch._rlwe import ModulusTables, digits, mod_up, switch_modulus
from .inputs import SWITCH_CASES
from .reference import R, mod_table


def centre(x: int, q: int) -> int:
    x %= q
    return x - q if x > q // 2 else x


def prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def to_ntt(ring: Ring, values, idx) -> torch.Tensor:
    """Integers values[..., N] (nested lists / object array) -> NTT-domain residues over idx."""
    v = np.asarray(values, dtype=object)
    b = ring.basis(idx)
    res = np.empty(v.shape[:-1] + (len(idx), v.shape[-1]), dtype=np.int64)
    for l, q in enumerate(b.primes):
        res[..., l, :] = (v % q) * R % q  # Montgomery form
    return ring.ntt(torch.tensor(res, dtype=torch.int32), b)


def coeffs_std(ring: Ring, y: torch.Tensor, idx) -> np.ndarray:
    """Coefficient-domain Montgomery residues -> standard-form Python ints."""
    primes = ring.basis(idx).primes
    Y = y.numpy().astype(np.int64).astype(object)
    rinv = np.array([pow(R, -1, q) for q in primes], dtype=object).reshape(len(primes), 1)
    return Y * rinv % np.array(primes, dtype=object).reshape(len(primes), 1)


def rand_centred(Q: int, shape) -> np.ndarray:
    """Random integers in [-(Q-1)/2, (Q-1)/2] with the two extremes and small values mixed in."""
    h = (Q - 1) // 2
    v = np.array([random.randint(-h, h) for _ in range(int(np.prod(shape)))], dtype=object)
    for e in (h, -h, 0, 1, -1, h - 1, -h + 1):
        v[random.randrange(v.size)] = e
    for _ in range(v.size // 8):
        v[random.randrange(v.size)] = random.randint(-(2**20), 2**20)
    return v.reshape(shape)


# --- the bconv op against its definition, accumulator worst cases -------------------
def bconv_reference(x: np.ndarray, in_primes, out_primes, mat: np.ndarray) -> np.ndarray:
    """x (B, La, N) standard residues; mat (Lb, La) -> (B, Lb, N)."""
    B, La, N = x.shape
    t = np.empty(x.shape, dtype=object)
    for j, q in enumerate(in_primes):
        xj = x[:, j, :]
        t[:, j, :] = np.where(xj > q // 2, xj - q, xj)
    out = np.empty((B, len(out_primes), N), dtype=object)
    for i, p in enumerate(out_primes):
        acc = np.zeros((B, N), dtype=object)
        for j in range(La):
            acc = acc + t[:, j, :] * int(mat[i, j])
        out[:, i, :] = acc * pow(R, -1, p) % p
    return out


@pytest.mark.parametrize("La", [1, 2, 3, 4, 5, 7, 8, 9, 13, 48])
def test_bconv_kernel_lazy_accumulation(La):
    log_n, N, Lb, B = 8, 256, 4, 3  # 768 (batch, coefficient) items: split over threads
    primes = largest_ntt_primes(log_n, La + Lb + 6)
    chosen = random.sample(primes, La + Lb)
    src, dst = chosen[:La], chosen[La:]
    mod_in, mod_out = mod_table(src), mod_table(dst)
    # x: random residues, columns of extremes: centre(x_j) = +-(q_j - 1)/2 of chosen signs.
    x = np.empty((B, La, N), dtype=object)
    for j, q in enumerate(src):
        x[:, j, :] = np.array([random.randrange(q) for _ in range(B * N)], dtype=object).reshape(B, N)
    mats = {
        "random": np.array([[random.randint(-(p - 1) // 2, (p - 1) // 2) for _ in src] for p in dst], dtype=object),
        "max+": np.array([[(p - 1) // 2] * La for p in dst], dtype=object),
        "max-": np.array([[-(p - 1) // 2] * La for p in dst], dtype=object),
        "ring": bconv_matrix(Ring(log_n, src + dst).basis(range(La)), Ring(log_n, src + dst).basis(range(La, La + Lb))
                             ).numpy().astype(np.int64).astype(object),
    }
    for name, mat in mats.items():
        xs = x.copy()
        # coefficient c < 2*Lb: every product of row c % Lb positive (c < Lb) or negative;
        # coefficients 2Lb, 2Lb+1: all t_j at +max / -max; 2Lb+2: alternating signs.
        for c in range(2 * Lb + 3):
            i = c % Lb
            for j, q in enumerate(src):
                if c < 2 * Lb:
                    sgn = (1 if mat[i, j] >= 0 else -1) * (1 if c < Lb else -1)
                elif c == 2 * Lb:
                    sgn = 1
                elif c == 2 * Lb + 1:
                    sgn = -1
                else:
                    sgn = 1 if j % 2 else -1
                xs[:, j, c] = (q - 1) // 2 if sgn > 0 else (q + 1) // 2  # centre: +-(q-1)/2
        xt = torch.tensor(xs.astype(np.int64), dtype=torch.int32)
        mt = torch.tensor(mat.astype(np.int64), dtype=torch.int32)
        got = _ops.bconv(xt, mod_in, mod_out, mt)
        assert got.shape == (B, Lb, N)
        want = bconv_reference(xs, src, dst, mat)
        g = got.numpy().astype(np.int64).astype(object)
        bad = np.argwhere(g != want)
        assert len(bad) == 0, (f"bconv La={La} mat={name}: {len(bad)} wrong, first {tuple(bad[0])}: "
                               f"got {g[tuple(bad[0])]} want {want[tuple(bad[0])]}")


# --- Ring.bconv: x + u*Q with a small u -------------------------------------------
def ring_primes(log_n: int, n_big: int, n_small: int) -> list:
    big = largest_ntt_primes(log_n, n_big + 4)
    small = ntt_primes(log_n, random.choice([25, 28, 30]), n_small, exclude=big)
    return random.sample(big, n_big) + small


@pytest.mark.parametrize("La,Lb", [(1, 1), (1, 3), (2, 2), (3, 5), (4, 4), (5, 2), (8, 3), (13, 2), (20, 3)])
def test_ring_bconv_small_u(La, Lb):
    log_n = random.randint(3, 6)
    N = 1 << log_n
    primes = ring_primes(log_n, (La + Lb + 1) // 2, La + Lb - (La + Lb + 1) // 2)
    random.shuffle(primes)
    ring = Ring(log_n, primes)
    src, dst = tuple(range(La)), tuple(range(La, La + Lb))
    bs, bd = ring.basis(src), ring.basis(dst)
    Q = bs.product
    x = rand_centred(Q, (2, N))
    for factor in (1, random.randrange(2, 2**64), prod(bd.primes)):
        y = ring.bconv(to_ntt(ring, x, src), bs, bd, factor=factor)
        assert y.shape == (2, Lb, N)
        ys = coeffs_std(ring, y, dst)
        for r in range(2):
            for c in range(N):
                target = centre(int(x[r, c]) * factor, Q)
                us = {centre((int(ys[r, i, c]) - target) * pow(Q, -1, p), p) for i, p in enumerate(bd.primes)}
                assert len(us) == 1, f"u differs across dst primes: {us} (x={x[r, c]}, factor={factor})"
                u = us.pop()
                assert abs(u) <= La, f"|u| = {abs(u)} > {La} (x={x[r, c]}, factor={factor})"


def test_ring_bconv_overlapping_dst():
    """dst may contain src primes: there the output is x mod q exactly (u*Q = 0 mod q)."""
    log_n, La = 4, 3
    primes = ring_primes(log_n, 3, 2)
    ring = Ring(log_n, primes)
    src, dst = (0, 1, 2), (3, 1, 4, 0)
    bs, bd = ring.basis(src), ring.basis(dst)
    x = rand_centred(bs.product, (1 << log_n,))
    ys = coeffs_std(ring, ring.bconv(to_ntt(ring, x, src), bs, bd), dst)
    for i, p in enumerate(bd.primes):
        if dst[i] in src:
            assert all(int(ys[i, c]) == int(x[c]) % p for c in range(len(x)))


# --- switch_modulus ---------------------------------------------------------------
def round_div(a: int, b: int) -> int:
    f = Fraction(a, b)
    return int(f.numerator * 2 + f.denominator) // (2 * f.denominator)  # floor(f + 1/2)


@pytest.mark.parametrize("name,src,dst", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_switch_modulus(name, src, dst):
    log_n = 10  # the smallest N the fused ops take
    N = 1 << log_n
    big = largest_ntt_primes(log_n, 8)
    qs = ntt_primes(log_n, random.choice([28, 29, 30]), 6, exclude=big)
    primes = qs + big[:2] + random.sample(big[2:], 2)  # P = two primes just below 2^31
    ring = Ring(log_n, primes)
    D = prod(primes[i] for i in src if i not in dst)
    A = prod(primes[i] for i in dst if i not in src)
    n_drop = sum(1 for i in src if i not in dst)
    Qs, Qd = ring.basis(src).product, ring.basis(dst).product
    assert Qs * A == Qd * D
    # |x| < Qs/4 keeps round(x*A/D) within Qd/4, far from wrapping mod Qd.
    x = rand_centred(Qs // 2, (2, N))
    flat = x.reshape(-1)
    small, kmax = min(2**40, Qs // 8), Qs // (8 * D)
    for _ in range(N // 4):  # small values, and values next to rounding boundaries (x/D ~ k + 1/2)
        flat[random.randrange(flat.size)] = random.randint(-small, small)
        if kmax:
            k = random.randint(-kmax, kmax)
            flat[random.randrange(flat.size)] = k * D + D // 2 + random.randint(-2, 2)
    y = switch_modulus(ModulusTables(ring), to_ntt(ring, x, src), src, dst)
    assert y.shape == (2, len(dst), N)
    got = ring.to_integers(y, ring.basis(dst))
    for r in range(2):
        for c in range(N):
            want = round_div(int(x[r, c]) * A, D)
            err = int(got[r, c]) - want
            assert abs(err) <= n_drop + 1, f"{name}: x={x[r, c]} got {got[r, c]}, round(xA/D)={want}, err={err}"
            # sharper: the result is (xA - S)/D with S = sum_j centre(.)*D/d_j, |S| < len(D)*D/2
            assert abs(Fraction(int(got[r, c])) - Fraction(int(x[r, c]) * A, D)) < Fraction(n_drop, 2)


# --- mod_up ------------------------------------------------------------------------
@pytest.mark.parametrize("L,alpha,level", [(6, 2, 6), (6, 2, 5), (6, 3, 4), (5, 1, 5), (6, 6, 6), (4, 4, 2)])
def test_mod_up(L, alpha, level):
    log_n = 10  # the smallest N the fused ops take
    N = 1 << log_n
    K = alpha
    big = largest_ntt_primes(log_n, K + 4)
    qs = ntt_primes(log_n, 30, L, exclude=big)
    ring = Ring(log_n, qs + random.sample(big, K))
    limbs, special_limbs = range(level), range(L, L + K)
    ext = tuple(limbs) + tuple(special_limbs)
    a = rand_centred(ring.basis(tuple(limbs)).product, (N,))
    a_ntt = to_ntt(ring, a, tuple(limbs))
    d = mod_up(ModulusTables(ring), a_ntt, limbs, special_limbs, alpha)
    parts = digits(limbs, alpha)
    assert d.shape == (len(parts), level + K, N)
    for j, (_, rng) in enumerate(parts):
        # the digit's own limbs are a's, untouched
        lo = rng.start - limbs.start
        assert torch.equal(d[j, lo : lo + len(rng)], a_ntt[lo : lo + len(rng)])
        Qd = ring.basis(tuple(rng)).product
        v = ring.to_integers(d[j].contiguous(), ring.basis(ext))
        for c in range(N):
            u, rem = divmod(int(v[c]) - centre(int(a[c]), Qd), Qd)
            assert rem == 0 and abs(u) <= len(rng), f"digit {j}: v={v[c]}, a={a[c]}, Q_digit={Qd}"
