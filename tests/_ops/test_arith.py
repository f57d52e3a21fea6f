"""Element-wise Montgomery arithmetic of the kernels, exact against Python big integers.

Conventions (csrc/arith.h, csrc/bind/schema.cpp): residues are int32 canonical in [0, q);
mod is (L, 2) [q, q^-1 mod 2^32]; a (..., L, N) tensor uses limb r % L on row r; b is
broadcast over the leading dimensions of a; mul / mul_const / axpby / tensor_product are
Montgomery products x * y * 2^-32 mod q; to_rns maps signed int64 x to x * 2^32 mod q.
Every test draws fresh random inputs (no fixed seed).
"""
import random

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import largest_ntt_primes, ntt_primes
from .reference import R, mod_table


def pick_primes(L: int) -> list:
    """L distinct primes: at least one just below 2^31, one ~25-bit, the rest mixed sizes."""
    log_n = random.randint(1, 14)
    big = largest_ntt_primes(log_n, 6)
    pool = {
        "31": big,
        "30": ntt_primes(log_n, 30, 4, exclude=big),
        "25": ntt_primes(log_n, 25, 4),
        "20": ntt_primes(min(log_n, 10), 20, 3),
        "m31": [2**31 - 1],  # the largest admissible odd modulus (smr's range bound is tight)
    }
    out = [random.choice(pool["31"]), random.choice(pool["25"])]
    rest = [q for v in pool.values() for q in v if q not in out]
    out += random.sample(rest, max(0, L - 2))
    out = out[:L]
    random.shuffle(out)
    return out


def rand_residues(shape, primes) -> torch.Tensor:
    """Uniform canonical residues of shape (..., L, N), plus edge values at random places."""
    L, N = shape[-2], shape[-1]
    assert L == len(primes)
    x = torch.empty(shape, dtype=torch.int32)
    for l, q in enumerate(primes):
        x[..., l, :] = torch.randint(0, q, (*shape[:-2], N), dtype=torch.int32)
        edges = [0, 1, 2, q - 1, q - 2, (q - 1) // 2, (q + 1) // 2]
        flat = x[..., l, :].reshape(-1).clone()  # write back below
        for v in edges:
            for _ in range(2):
                flat[random.randrange(flat.numel())] = v
        x[..., l, :] = flat.reshape(x[..., l, :].shape)
    return x


def pair_edges(a: torch.Tensor, b: torch.Tensor, primes):
    """At random places make a + b = q, a = b, a + b = q - 1 and a = b + 1: the wrap boundaries of
    add / sub, which independent uniform draws almost never hit."""
    bb = b.expand(a.shape)
    lead, N = a.shape[:-2], a.shape[-1]
    for l, q in enumerate(primes):
        for k in range(16):
            idx = tuple(random.randrange(s) for s in lead) + (l, random.randrange(N))
            v = int(bb[idx])
            a[idx] = [(q - v) % q, v, (q - 1 - v) % q, (v + 1) % q][k % 4]


def obj(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.int64).astype(object)


def limb_col(values, L) -> np.ndarray:
    """Per-limb Python integers shaped (L, 1) for broadcasting against (..., L, N)."""
    return np.array(list(values), dtype=object).reshape(L, 1)


def assert_exact(got: torch.Tensor, want: np.ndarray, primes, what: str):
    L = len(primes)
    g = obj(got)
    assert g.shape == want.shape, f"{what}: shape {g.shape} != {want.shape}"
    q = limb_col(primes, L) if g.ndim >= 2 else np.array(primes[0], dtype=object)
    assert ((g >= 0) & (g < q)).all(), f"{what}: output not canonical in [0, q)"
    bad = np.argwhere(g != want)
    if len(bad):
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} mismatches, first at {i}: got {g[i]}, want {want[i]}")


# (a shape, b shape) pairs: same shape, and b broadcast over a's leading dimensions.
SHAPES = [
    ((3, 4, 1024), (3, 4, 1024)),
    ((3, 4, 1024), (4, 1024)),
    ((2, 3, 3, 256), (3, 3, 256)),
    ((5, 2, 64), (2, 64)),
    ((1, 256), (1, 256)),
]


def _setup(a_shape, b_shape):
    L = a_shape[-2]
    primes = pick_primes(L)
    a = rand_residues(a_shape, primes)
    b = rand_residues(b_shape, primes)
    return primes, mod_table(primes), a, b


@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_mul(a_shape, b_shape):
    primes, mod, a, b = _setup(a_shape, b_shape)
    L = len(primes)
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    want = obj(a) * obj(b) * rinv % q
    assert_exact(_ops.mul(a, b, mod), want, primes, "mul")


@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_add_sub(a_shape, b_shape):
    primes, mod, a, b = _setup(a_shape, b_shape)
    pair_edges(a, b, primes)
    q = limb_col(primes, len(primes))
    assert_exact(_ops.add(a, b, mod), (obj(a) + obj(b)) % q, primes, "add")
    assert_exact(_ops.sub(a, b, mod), (obj(a) - obj(b)) % q, primes, "sub")
    assert_exact(_ops.sub(b.expand(a.shape).contiguous(), a, mod), (obj(b) - obj(a)) % q, primes, "sub (b - a)")


@pytest.mark.parametrize("shape", [(3, 4, 1024), (2, 3, 5, 128), (1, 64)])
def test_neg(shape):
    primes = pick_primes(shape[-2])
    a = rand_residues(shape, primes)
    q = limb_col(primes, len(primes))
    assert_exact(_ops.neg(a, mod_table(primes)), (-obj(a)) % q, primes, "neg")


@pytest.mark.parametrize("shape", [(3, 4, 1024), (2, 3, 5, 128), (1, 64)])
def test_mul_const(shape):
    L = shape[-2]
    primes = pick_primes(L)
    a = rand_residues(shape, primes)
    consts = [random.choice([0, 1, q - 1, random.randrange(q)]) for q in primes]
    c = torch.tensor(consts, dtype=torch.int32)
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    want = obj(a) * limb_col(consts, L) * rinv % q
    assert_exact(_ops.mul_const(a, c, mod_table(primes)), want, primes, "mul_const")


@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_axpby(a_shape, b_shape):
    primes, mod, a, b = _setup(a_shape, b_shape)
    L = len(primes)
    ca = [random.choice([0, 1, q - 1, random.randrange(q), random.randrange(q)]) for q in primes]
    cb = [random.choice([0, 1, q - 1, random.randrange(q), random.randrange(q)]) for q in primes]
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    want = (obj(a) * limb_col(ca, L) + obj(b) * limb_col(cb, L)) * rinv % q
    got = _ops.axpby(a, torch.tensor(ca, dtype=torch.int32), b, torch.tensor(cb, dtype=torch.int32), mod)
    assert_exact(got, want, primes, "axpby")


@pytest.mark.parametrize("batch,broadcast", [((3,), False), ((3,), True), ((2, 2), False), ((2, 2), True), ((), False)])
def test_tensor_product(batch, broadcast):
    L, N = random.randint(1, 5), 256
    primes = pick_primes(L)
    a = rand_residues((*batch, 2, L, N), primes)
    b = rand_residues((2, L, N) if broadcast else (*batch, 2, L, N), primes)
    out = _ops.tensor_product(a, b, mod_table(primes))
    assert out.shape == (*batch, 3, L, N)
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    A, B = obj(a), obj(b)
    if broadcast:
        B = np.broadcast_to(B, A.shape)
    a0, a1, b0, b1 = A[..., 0, :, :], A[..., 1, :, :], B[..., 0, :, :], B[..., 1, :, :]
    want = np.stack([a0 * b0 * rinv % q, (a0 * b1 + a1 * b0) * rinv % q, a1 * b1 * rinv % q], axis=-3)
    assert_exact(out, want, primes, "tensor_product")


@pytest.mark.parametrize("pairs", [2, 3, 8, 9, 17])
def test_tensor_product_of_pairs_is_their_sum(pairs):
    """A list of pairs gives sum_t a_t (x) b_t exactly, over passes of 8 pairs, with some b_t one
    ciphertext for the whole batch."""
    L, N, batch = random.randint(1, 4), 128, (2,)
    primes = pick_primes(L)
    mod = mod_table(primes)
    a = [rand_residues((*batch, 2, L, N), primes) for _ in range(pairs)]
    b = [rand_residues((2, L, N) if random.random() < 0.3 else (*batch, 2, L, N), primes) for _ in range(pairs)]
    out = _ops.tensor_product(a, b, mod)
    assert out.shape == (*batch, 3, L, N)
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    want = 0
    for x, y in zip(a, b):
        A, B = obj(x), np.broadcast_to(obj(y), (*batch, 2, L, N))
        a0, a1, b0, b1 = A[..., 0, :, :], A[..., 1, :, :], B[..., 0, :, :], B[..., 1, :, :]
        want = want + np.stack([a0 * b0 * rinv % q, (a0 * b1 + a1 * b0) * rinv % q, a1 * b1 * rinv % q], axis=-3)
    assert_exact(out, want % q, primes, "tensor_product")


def test_tensor_product_checks_its_pairs():
    primes = pick_primes(2)
    mod = mod_table(primes)
    ct = rand_residues((2, 2, 2, 64), primes)
    with pytest.raises(RuntimeError, match="same number"):
        _ops.tensor_product([ct, ct], [ct], mod)
    with pytest.raises(RuntimeError, match="one shape"):
        _ops.tensor_product([ct, ct[:1]], [ct, ct[:1]], mod)
    with pytest.raises(RuntimeError, match=r"b\[1\]|does not broadcast"):
        _ops.tensor_product([ct, ct], [ct, ct[:1]], mod)


def rand_int64(shape) -> torch.Tensor:
    """Signed int64 values: full range, near +-2^62, near the int64 limits, small, zero."""
    n = int(np.prod(shape))
    vals = []
    for _ in range(n):
        kind = random.randrange(6)
        if kind == 0:
            v = random.randint(-(2**63), 2**63 - 1)
        elif kind == 1:
            v = random.choice([1, -1]) * (2**62 + random.randint(-(2**20), 2**20))
        elif kind == 2:
            v = random.choice([2**63 - 1 - random.randrange(1000), -(2**63) + random.randrange(1000)])
        elif kind == 3:
            v = random.randint(-(2**31), 2**31)
        elif kind == 4:
            v = random.randint(-(2**62), 2**62)
        else:
            v = random.randint(-3, 3)
        vals.append(v)
    for v in (0, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**62 - 1, -(2**62) + 1, -1):
        vals[random.randrange(n)] = v
    return torch.tensor(vals, dtype=torch.int64).reshape(shape)


@pytest.mark.parametrize("shape", [(4, 512), (2, 3, 128), (2048,)])
def test_to_rns(shape):
    L = random.randint(1, 6)
    primes = pick_primes(L)
    x = rand_int64(shape)
    # multiples of a prime (residue 0) and their neighbours
    flat = x.view(-1)
    for q in primes:
        for d in (-1, 0, 1):
            k = random.randint(-(2**62) // q, 2**62 // q)
            flat[random.randrange(flat.numel())] = k * q + d
    r2 = torch.tensor([R * R % q for q in primes], dtype=torch.int32)
    out = _ops.to_rns(x, mod_table(primes), r2)
    assert out.shape == (*shape[:-1], L, shape[-1]) and out.dtype == torch.int32
    X = x.numpy().astype(object)[..., None, :]
    want = X * R % limb_col(primes, L)  # Python % is the floor (non-negative) remainder
    assert_exact(out, want, primes, "to_rns")


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
@pytest.mark.parametrize("n_digits,Lq_key,Lq,K,offsets", [
    (4, 6, 3, 2, True), (3, 5, 2, 3, True), (3, 5, 5, 1, False), (2, 4, 0, 2, False), (1, 3, 2, 1, False),
])
def test_keyswitch_inner(n_digits, Lq_key, Lq, K, offsets, batch):
    """out[..., s, l] = sum_j d[..., j, l] * key_(digit_start + j)[s, limb l] (Montgomery products),
    where limb l < Lq is key_q limb q_start + l and limb Lq + k is key_p limb k; the key is
    shared by the batch."""
    N = 128
    primes = pick_primes(Lq_key + K)
    q_primes, p_primes = primes[:Lq_key], primes[Lq_key:]
    lo = 1 if offsets else 0  # offsets: q_start > 0 and digit_start > 0
    q_start = random.randint(min(lo, Lq_key - Lq), Lq_key - Lq)
    digit_start = random.randint(min(lo, n_digits - 1), n_digits - 1)
    beta = random.randint(1, n_digits - digit_start)
    ext = q_primes[q_start : q_start + Lq] + p_primes
    L = len(ext)
    key_q = rand_residues((n_digits, 2, Lq_key, N), q_primes)
    key_p = rand_residues((n_digits, 2, K, N), p_primes)
    d = rand_residues((*batch, beta, L, N), ext)
    out = _ops.keyswitch_inner(d, key_q, key_p, q_start, digit_start, mod_table(ext))
    assert out.shape == (*batch, 2, L, N)
    key = np.concatenate([obj(key_q)[:, :, q_start : q_start + Lq], obj(key_p)], axis=2)  # (digits, 2, L, N)
    D = obj(d)
    q, rinv = limb_col(ext, L), limb_col([pow(R, -1, p) for p in ext], L)
    want = np.stack([sum(D[..., j, :, :] * key[digit_start + j, s] for j in range(beta)) * rinv % q
                     for s in range(2)], axis=-3)
    assert_exact(out, want, ext, f"keyswitch_inner (Lq={Lq}, K={K}, q_start={q_start}, digits {digit_start}+{beta}, "
                                 f"batch {batch})")


# --- lincomb: sum_t x_t * c_t (+ a scalar on polynomial 0 of each group) in one pass --------------
def _lincomb_inputs(shape, T, with_scalar):
    L = shape[-2]
    primes = pick_primes(L)
    xs = [rand_residues(shape, primes) for _ in range(T)]
    cs = [[random.choice([0, 1, q - 1, random.randrange(q)]) for q in primes] for _ in range(T)]
    scalar = torch.tensor([random.randrange(q) for q in primes], dtype=torch.int32) if with_scalar else None
    return primes, xs, torch.tensor(cs, dtype=torch.int32), scalar


def _lincomb_reference(primes, xs, consts, scalar):
    """Python integers: scalar on polynomial 0 of each group of K = size(-3) polynomials, plus
    sum_t x_t * c_t * 2^-32, mod q."""
    L = len(primes)
    q, rinv = limb_col(primes, L), limb_col([pow(R, -1, p) for p in primes], L)
    want = sum(obj(x) * limb_col(consts[t].tolist(), L) for t, x in enumerate(xs)) * rinv
    if scalar is not None:
        add = np.zeros(xs[0].shape, dtype=object)
        if xs[0].dim() >= 3:
            add[..., 0, :, :] = limb_col(scalar.tolist(), L)
        else:
            add[...] = limb_col(scalar.tolist(), L)
        want = want + add
    return want % q


# T = 1, T in one pass, T at the cap (16 terms a pass), just above it and over several passes
@pytest.mark.parametrize("T", [1, 7, 16, 17, 35])
@pytest.mark.parametrize("shape,with_scalar", [((3, 256), False), ((2, 3, 128), True), ((2, 2, 3, 64), True),
                                               ((3, 2, 1, 64), False), ((5, 7), True)])
def test_lincomb(shape, T, with_scalar):
    primes, xs, consts, scalar = _lincomb_inputs(shape, T, with_scalar)
    mod = mod_table(primes)
    got = _ops.lincomb(xs, consts, mod, scalar)
    assert_exact(got, _lincomb_reference(primes, xs, consts, scalar), primes, f"lincomb T={T}")
    # the composition it replaces: mul_const, one axpby per further term, then the scalar added
    one = torch.tensor([R % q for q in primes], dtype=torch.int32)
    acc = _ops.mul_const(xs[0], consts[0].contiguous(), mod)
    for t in range(1, T):
        acc = _ops.axpby(xs[t], consts[t].contiguous(), acc, one, mod)
    if scalar is not None:
        c0 = acc[..., 0, :, :] if acc.dim() >= 3 else acc
        c0.copy_(_ops.add(c0.contiguous(), scalar[:, None].expand(c0.shape).contiguous(), mod))
    assert torch.equal(got, acc), f"lincomb T={T}: differs from mul_const + axpby + add"


def test_lincomb_errors():
    primes, xs, consts, scalar = _lincomb_inputs((2, 3, 64), 3, True)
    mod = mod_table(primes)
    cases = [
        (([], consts[:0], mod), "at least one"),
        (([xs[0], xs[1][:, :, :32].contiguous(), xs[2]], consts, mod), "every term must have one shape"),
        (([xs[0], xs[1][0].contiguous(), xs[2]], consts, mod), "every term must have one shape"),
        ((xs, consts[:2].contiguous(), mod), "consts must be \\(T, L\\) = \\(3, 3\\)"),
        ((xs, consts[:, :2].contiguous(), mod), "consts must be \\(T, L\\)"),
        ((xs, consts.reshape(-1), mod), "consts must be \\(T, L\\)"),
        ((xs, consts, mod, scalar[:2].contiguous()), "scalar must be \\(L,\\)"),
        ((xs, consts, mod[:2].contiguous()), "mod must be \\(L, 2\\)"),
        (([xs[0].long()] + xs[1:], consts, mod), "int32"),
        (([xs[0].transpose(-1, -2)] + xs[1:], consts, mod), "contiguous"),
        ((xs, consts.long(), mod), "int32"),
    ]
    for args, want in cases:
        with pytest.raises(RuntimeError, match=want):
            _ops.lincomb(*args)
