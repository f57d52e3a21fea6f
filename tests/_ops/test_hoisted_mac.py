"""hoisted_mac (baby-step rotations times plaintext diagonals over P*Q, csrc/hoisted_mac.h)
against its definition composed from unfused ops (keyswitch_inner, automorphism, mul, add),
bit for bit, on fresh random inputs; batches of ciphertexts against the stacked single calls;
argument errors."""
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch._rlwe import keyswitch as ks

from .inputs import expect_equal, make_ring, rand_key, rand_res, stacked


def hoisted_mac_reference(ring, d, c, keys, gals, start, alpha, c_p, pts, pb, pg, giants, K):
    """The op's definition for one ciphertext: u_b per baby step, then sums of pts * u_b."""
    L, n = c.shape[1], ring.n
    e_mod = ring.basis(tuple(range(start, start + L)) + tuple(range(len(ring.primes) - K, len(ring.primes)))).mod
    bq = ring.basis(tuple(range(start, start + L)))
    us = []
    for key, g in zip(keys, gals):
        if g == 1:
            u = torch.zeros((2, L + K, n), dtype=torch.int32)
            u[:, :L] = _ops.mul_const(c, c_p, bq.mod)
        else:
            u = _ops.keyswitch_inner(_ops.automorphism(d, g), key.key_q, key.key_p, start, start // alpha, e_mod)
            head = _ops.add(u[0, :L].contiguous(), _ops.mul_const(_ops.automorphism(c[0], g), c_p, bq.mod), bq.mod)
            u = u.clone()
            u[0, :L] = head
        us.append(u)
    out = torch.zeros((giants, 2, L + K, n), dtype=torch.int32)
    for pt, b, g in zip(pts, pb, pg):
        out[g] = _ops.add(out[g].contiguous(), _ops.mul(us[b], pt, e_mod), e_mod)
    return out


@pytest.mark.parametrize("batch", [(), (3,), (2, 2)], ids=["single", "batch3", "batch2x2"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop,babies,giants", [
    (4, 6, 2, 2, 0, 6, 3, 2), (5, 6, 2, 2, 1, 6, 5, 3), (6, 9, 4, 4, 3, 8, 16, 8), (10, 12, 3, 4, 0, 12, 4, 1),
    (5, 12, 2, 2, 1, 12, 13, 5),  # 6 digits and 13 baby steps: the lazy sums fold more than once
])
def test_hoisted_mac_matches_composition(seed, log_n, n_q, K, alpha, start, stop, babies, giants, batch):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L, n = stop - start, ring.n
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    beta = len(ks.digits(lvl, alpha))
    c = rand_res((*batch, 2, L, n), ring.basis(tuple(lvl)).primes)
    d = rand_res((*batch, beta, L + K, n), e.primes)  # any lifted digits: the op does not care how they came
    dnum = -(-n_q // alpha)
    gals = [1] + [random.randrange(3, 2 * n, 2) for _ in range(babies - 1)]
    random.shuffle(gals)
    keys = [rand_key(ring, n_q, K, dnum) for _ in gals]
    c_p = ring.basis(tuple(lvl)).const([random.randrange(q) for q in ring.basis(tuple(lvl)).primes])
    pairs = [(b, g) for b in range(babies) for g in range(giants) if random.random() < 0.6] or [(0, 0)]
    pts = [rand_res((L + K, n), e.primes) for _ in pairs]
    pb, pg = [b for b, _ in pairs], [g for _, g in pairs]

    def op(dd, cc):
        return _ops.hoisted_mac(dd, cc, [k.key_q for k in keys], [k.key_p for k in keys], gals, start,
                                start // alpha, c_p, pts, pb, pg, giants, e.mod)

    got = op(d, c)
    what = f"hoisted_mac ({babies} babies, {giants} giants, {len(pairs)} diagonals, batch {batch})"
    want = stacked(lambda dd, cc: hoisted_mac_reference(ring, dd, cc, keys, gals, start, alpha, c_p, pts, pb, pg,
                                                        giants, K), batch, d, c)
    expect_equal(got, want, what, seed)
    expect_equal(got, stacked(op, batch, d, c), what + ": batched vs stacked", seed)


def test_hoisted_mac_argument_errors():
    ring = make_ring(4, 4, 2)
    lvl, sp = range(0, 4), range(4, 6)
    e = ks.mod_up_tables(ring, lvl, sp, 2).ext
    c = rand_res((2, 4, 16), ring.primes[:4])
    d = rand_res((2, 6, 16), e.primes)
    key = rand_key(ring, 4, 2, 2)
    pt = rand_res((6, 16), e.primes)
    c_p = ring.basis(tuple(lvl)).one

    def args(gals, pb, pg, giants, dd=d, cc=c):
        return (dd, cc, [key.key_q] * len(gals), [key.key_p] * len(gals), gals, 0, 0, c_p, [pt] * len(pb), pb, pg,
                giants, e.mod)

    with pytest.raises(RuntimeError, match="baby steps"):
        _ops.hoisted_mac(*args([3] * 17, [0], [0], 1))
    with pytest.raises(RuntimeError, match="giants"):
        _ops.hoisted_mac(*args([3], [0], [0], 9))
    with pytest.raises(RuntimeError, match="two diagonals"):
        _ops.hoisted_mac(*args([3], [0, 0], [0, 0], 1))
    with pytest.raises(RuntimeError, match="out of range"):
        _ops.hoisted_mac(*args([3], [1], [0], 1))
    with pytest.raises(RuntimeError, match="odd"):
        _ops.hoisted_mac(*args([4], [0], [0], 1))
    with pytest.raises(RuntimeError, match="same batch"):
        _ops.hoisted_mac(*args([3], [0], [0], 1, dd=torch.stack([d, d]), cc=torch.stack([c, c, c])))
