"""keyswitch_inner_sum (a fused linear transform's giant steps summed over P*Q, csrc/hoisted_mac.h)
against its definition composed from unfused ops (keyswitch_inner, automorphism, mul_const, add),
bit for bit, on fresh random inputs; batches against the stacked single calls; argument errors."""
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch.errors import FHEError
from fhetorch._rlwe import keyswitch as ks

from .inputs import expect_equal, make_ring, rand_key, rand_res, stacked


def inner_sum_reference(ring, d, y0, keys, gals, start, alpha, c_add, acc, K):
    """The op's definition for one ciphertext: acc + sum_k keyswitch_inner(aut_k(d_k)) + aut_k(y_k0) c_add."""
    G, beta, Lext, n = d.shape
    L, La = Lext - K, y0.shape[-2]
    e_mod = ring.basis(tuple(range(start, start + L)) + tuple(range(len(ring.primes) - K, len(ring.primes)))).mod
    out = torch.zeros((2, Lext, n), dtype=torch.int32) if acc is None else acc.clone()
    for k, (key, g) in enumerate(zip(keys, gals)):
        u = _ops.keyswitch_inner(_ops.automorphism(d[k], g), key.key_q, key.key_p, start, start // alpha, e_mod)
        if La:
            head = _ops.mul_const(_ops.automorphism(y0[k], g), c_add, e_mod[:La].contiguous())
            u = u.clone()
            u[0, :La] = _ops.add(u[0, :La].contiguous(), head, e_mod[:La].contiguous())
        out = _ops.add(out, u, e_mod)
    return out


@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop,terms,full_addend,with_acc", [
    (4, 6, 2, 2, 0, 6, 3, True, True), (5, 6, 2, 2, 1, 6, 1, True, False), (6, 9, 4, 4, 3, 8, 8, False, True),
    (10, 12, 3, 4, 0, 12, 4, True, True), (5, 12, 2, 2, 1, 12, 7, True, False),
])
def test_keyswitch_inner_sum_matches_composition(seed, log_n, n_q, K, alpha, start, stop, terms, full_addend,
                                                 with_acc, batch):
    ring = make_ring(log_n, n_q, K)
    lvl = range(start, stop)
    L, n = stop - start, ring.n
    e = ks.mod_up_tables(ring, lvl, range(n_q, n_q + K), alpha).ext
    beta = len(ks.digits(lvl, alpha))
    La = L if full_addend else random.randint(0, L)
    d = rand_res((*batch, terms, beta, L + K, n), e.primes)  # any lifted digits: the op does not care how they came
    y0 = rand_res((*batch, terms, La, n), e.primes[:La]) if La else torch.zeros((*batch, terms, 0, n), dtype=torch.int32)
    acc = rand_res((*batch, 2, L + K, n), e.primes) if with_acc else None
    gals = [random.randrange(3, 2 * n, 2) for _ in range(terms)]
    keys = [rand_key(ring, n_q, K, -(-n_q // alpha)) for _ in gals]
    c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else \
        torch.zeros(0, dtype=torch.int32)

    def op(dd, yy, aa):
        return _ops.keyswitch_inner_sum(dd, [k.key_q for k in keys], [k.key_p for k in keys], gals, start,
                                        start // alpha, yy, c_add, aa, e.mod)

    got = op(d, y0, acc)
    what = f"keyswitch_inner_sum ({terms} terms, La={La}, acc={with_acc}, batch {batch})"
    want = stacked(lambda dd, yy, aa: inner_sum_reference(ring, dd, yy, keys, gals, start, alpha, c_add, aa, K),
                   batch, d, y0, acc)
    expect_equal(got, want, what, seed)
    expect_equal(got, stacked(op, batch, d, y0, acc), what + ": batched vs stacked", seed)


def test_keyswitch_inner_sum_is_hoisted_macs_rotation(seed):
    """One term equals hoisted_mac's rotation of one baby step (u = keyswitch_inner(aut(d)) + P aut(c0)
    over P*Q) with a diagonal of ones, bit for bit: the two ops form the same hoisted rotation."""
    ring = make_ring(10, 8, 3)
    lvl = range(1, 8)
    e = ks.mod_up_tables(ring, lvl, range(8, 11), 3).ext
    L, n, beta = 7, ring.n, len(ks.digits(lvl, 3))
    c = rand_res((2, L, n), ring.basis(tuple(lvl)).primes)
    d = rand_res((beta, L + 3, n), e.primes)
    key = rand_key(ring, 8, 3, 3)
    g = random.randrange(3, 2 * n, 2)
    c_p = ring.basis(tuple(lvl)).const([random.randrange(q) for q in ring.basis(tuple(lvl)).primes])
    ones = ring.basis(e.limbs).one[:, None].expand(-1, n).contiguous()  # Montgomery ones: mul by it is the identity
    mac = _ops.hoisted_mac(d, c, [key.key_q], [key.key_p], [g], 1, 0, c_p, [ones], [0], [0], 1, e.mod)
    got = _ops.keyswitch_inner_sum(d[None], [key.key_q], [key.key_p], [g], 1, 0, c[0][None].contiguous(), c_p, None,
                                   e.mod)
    expect_equal(got, mac[0], "keyswitch_inner_sum vs hoisted_mac's baby step with a diagonal of ones", seed)


def test_keyswitch_inner_sum_argument_errors():
    ring = make_ring(4, 4, 2)
    e = ks.mod_up_tables(ring, range(0, 4), range(4, 6), 2).ext
    d = rand_res((2, 2, 6, 16), e.primes)
    y0 = rand_res((2, 4, 16), e.primes[:4])
    key = rand_key(ring, 4, 2, 2)
    c_add = ring.basis(e.limbs[:4]).one
    good = dict(d=d, keys_q=[key.key_q] * 2, keys_p=[key.key_p] * 2, galois=[3, 5], q_start=0, digit_start=0,
                addend=y0, c_add=c_add, acc=None, mod=e.mod)
    _ops.keyswitch_inner_sum(**good)
    for bad, match in ((dict(galois=[3]), "one galois element"), (dict(galois=[3, 4]), "odd"),
                       (dict(addend=y0[:1]), "addend"), (dict(c_add=c_add[:3]), "c_add"),
                       (dict(acc=rand_res((2, 5, 16), e.primes[:5])), "acc"),
                       (dict(d=rand_res((9, 2, 6, 16), e.primes), addend=rand_res((9, 4, 16), e.primes[:4]),
                             galois=[3] * 9, keys_q=[key.key_q] * 9, keys_p=[key.key_p] * 9), "1 to 8 terms")):
        with pytest.raises((FHEError, RuntimeError), match=match):
            _ops.keyswitch_inner_sum(**{**good, **bad})
