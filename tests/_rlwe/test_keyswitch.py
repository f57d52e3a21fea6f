"""fhetorch._rlwe.keyswitch's functions (each one fused op over any batch) against the
compositions of unfused ops in tests/_rlwe/reference.py, bit for bit, on fresh random inputs:
the whole key switch with its addends (relinearisation's (d0, d1), a rotation's sigma(c0)),
ModDown fused with a rescale (dst_idx), hoisted inner products; batches of ciphertexts
against the stacked single calls."""
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch._rlwe import ModulusTables, digits, keyswitch_inner, mod_up
from fhetorch._rlwe.keyswitch import keyswitch

from _ops.inputs import expect_equal, make_ring, rand_key, rand_res, stacked
from .reference import keyswitch_reference, mod_up_keyswitch_inner_reference, mod_up_reference


# (log_n, chain primes, K, alpha, level stop)
CASES = [(10, 6, 2, 2, 6), (10, 8, 3, 3, 7), (11, 5, 5, 5, 5), (10, 9, 2, 1, 4)]


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)], ids=["single", "batch4", "batch2x3"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,stop", CASES)
def test_keyswitch(seed, log_n, n_q, K, alpha, stop, batch):
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(0, stop), range(n_q, n_q + K)
    primes = ring.basis(tuple(lvl)).primes
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    a = rand_res((*batch, stop, ring.n), primes)
    rescaled = tuple(range(stop - 1))
    for dst, addend in [(None, None), (None, rand_res((*batch, 2, stop, ring.n), primes)),
                        (None, rand_res((*batch, stop, ring.n), primes)),
                        (rescaled, rand_res((*batch, 2, stop - 1, ring.n), primes[:-1]))]:
        want = keyswitch_reference(ring, a, key, lvl, sp, alpha, dst, addend)
        got = keyswitch(tables, a, key, lvl, sp, alpha, dst, addend)
        what = f"keyswitch dst={dst} addend={None if addend is None else tuple(addend.shape)}"
        expect_equal(got, want, what, seed)
        one = lambda x, y: keyswitch(tables, x, key, lvl, sp, alpha, dst, y)  # noqa: E731
        expect_equal(got, stacked(one, batch, a, addend), what + ": batched vs stacked", seed)


@pytest.mark.parametrize("log_n,n_q,K,alpha,stop", CASES)
def test_hoisted_inner_products(seed, log_n, n_q, K, alpha, stop):
    """One ModUp shared by several rotations (evaluator.rotate_hoisted): keyswitch_inner of the
    rotated lifted digits equals the fused op on the rotated polynomial."""
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(0, stop), range(n_q, n_q + K)
    a = rand_res((3, stop, ring.n), ring.basis(tuple(lvl)).primes)
    d = mod_up(tables, a, lvl, sp, alpha)
    expect_equal(d, mod_up_reference(ring, a, lvl, sp, alpha), "mod_up", seed)
    assert d.shape == (3, len(digits(lvl, alpha)), stop + K, ring.n)
    for _ in range(2):
        key = rand_key(ring, n_q, K, -(-n_q // alpha))
        g = random.randrange(3, 2 * ring.n, 2)
        got = keyswitch_inner(tables, _ops.automorphism(d, g), key, lvl, sp, alpha)
        want = mod_up_keyswitch_inner_reference(ring, _ops.automorphism(a, g), key, lvl, sp, alpha)
        expect_equal(got, want, f"hoisted inner product, galois {g}", seed)
