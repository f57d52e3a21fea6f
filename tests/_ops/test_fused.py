"""Fused key-switching ops (mod_up, mod_up_keyswitch_inner, switch_modulus, keyswitch), exact against the
compositions of unfused ops they replace (tests/_rlwe/reference.py), on random inputs.

* CPU: the ops (and fhetorch._rlwe's functions on them, which read the ring's full NTT
  tables through table row maps) against the compositions, bit for bit, for rescaling,
  ModDown, both at once, rational rescaling (added primes, src and dst sharing no prime),
  permuted destinations, levels whose digits are cut by the level's start, one digit,
  one-limb digits, digits of more than 16 limbs, addends, the tensor-product mode (b of the
  batch's shape or one ciphertext for all), a rotation fused in (galois: the ops on the
  automorphisms of their inputs); with leading batch dimensions (), (3,), (2, 2): a batched
  call equals the stacked per-item calls.
* Sizes: N outside [2^10, 2^17] refused with the same message on every device; argument
  errors; a non-power-of-two N raising RuntimeError in-process.
* Host emulation of the CUDA programs: tests/_ops/test_emulated.py; the row maps op by op:
  tests/_ops/test_table_rows.py.
* keyswitch: switch_modulus(mod_up_keyswitch_inner(...)) bit for bit, in each mode (a rotation, a
  relinearisation, HMult's tensor product with and without its rescale, (d0, d1) over Q_l P).
* CUDA (marked cuda): GPU against CPU, bit for bit, up to the 48 x 12 benchmark shape,
  batched, keyswitch with and without its second stream, and under CUDA graph capture.
Every test draws fresh random inputs (no fixed seed; failures print the seed).
"""
import os
import random

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring
from fhetorch._rlwe import ModulusTables, keyswitch as ks
from _rlwe.reference import mod_up_keyswitch_inner_reference, mod_up_reference, switch_modulus_reference

from .inputs import (SWITCH_CASES, expect_equal, keyswitch_cases, make_ring, mod_up_args, rand_galois, rand_key,
                     rand_res, stacked, switch_args)

ops = torch.ops.fhetorch


BATCHES = [(), (3,), (2, 2)]
BATCH_IDS = ["single", "batch3", "batch2x2"]

# (log_n, chain primes, K, alpha, level start, level stop)
MOD_UP_CASES = [
    (10, 6, 2, 2, 0, 6),     # 3 digits
    (11, 6, 2, 2, 1, 6),     # the level's start cuts digit 0
    (10, 7, 3, 3, 2, 7),     # last digit short, first cut
    (10, 5, 5, 5, 0, 5),     # one digit
    (10, 4, 1, 1, 0, 4),     # one-limb digits
    (10, 9, 4, 4, 3, 8),     # a level inside the chain
    (10, 20, 2, 20, 0, 17),  # 17-limb digit (> 16 inputs)
    (12, 12, 3, 4, 0, 12),
]


@pytest.mark.parametrize("batch", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_mod_up_matches_composition(seed, log_n, n_q, K, alpha, start, stop, batch):
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    a = rand_res((*batch, stop - start, ring.n), ring.basis(tuple(lvl)).primes)
    want = mod_up_reference(ring, a, lvl, sp, alpha)
    args = mod_up_args(ks.mod_up_tables(ring, lvl, sp, alpha))
    got = _ops.mod_up(a, *args)
    expect_equal(got, want, "mod_up", seed)
    expect_equal(got, stacked(lambda x: _ops.mod_up(x, *args), batch, a), "mod_up batched vs stacked", seed)
    expect_equal(ks.mod_up(tables, a, lvl, sp, alpha), want, "rlwe.mod_up", seed)


@pytest.mark.parametrize("batch", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_mod_up_keyswitch_inner_matches_composition(seed, log_n, n_q, K, alpha, start, stop, batch):
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_tables(ring, lvl, sp, alpha)
    e = plan.ext
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    a = rand_res((*batch, L, ring.n), ring.basis(tuple(lvl)).primes)

    def op(x, addend, c_add):
        return _ops.mod_up_keyswitch_inner(x, *mod_up_args(plan), key.key_q, key.key_p, start, plan.digit_start,
                                           addend, c_add)

    for La in sorted({0, L, L + K, random.randint(1, L + K)}):
        addend = rand_res((*batch, 2, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        want = mod_up_keyswitch_inner_reference(ring, a, key, lvl, sp, alpha, addend, c_add)
        got = op(a, addend, c_add)
        expect_equal(got, want, f"mod_up_keyswitch_inner La={La}", seed)
        expect_equal(got, stacked(lambda x, y: op(x, y, c_add), batch, a, addend), f"batched vs stacked La={La}",
                     seed)
        got = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add)
        expect_equal(got, want, f"rlwe.mod_up_keyswitch_inner La={La}", seed)
    # a one-component addend adds to component 0 only; acc is added to the whole result
    La = random.randint(1, L + K)
    addend = rand_res((*batch, 1, La, ring.n), e.primes[:La])
    c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]])
    acc = rand_res((*batch, 2, L + K, ring.n), e.primes)
    padded = torch.cat([addend, torch.zeros_like(addend)], dim=-3)
    want = _ops.add(mod_up_keyswitch_inner_reference(ring, a, key, lvl, sp, alpha, padded, c_add), acc, e.mod)
    got = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add, acc=acc)
    expect_equal(got, want, f"one-component addend La={La} and acc", seed)
    expect_equal(ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, acc=acc),
                 _ops.add(mod_up_keyswitch_inner_reference(ring, a, key, lvl, sp, alpha, None, None), acc, e.mod),
                 "acc without an addend", seed)


@pytest.mark.parametrize("batch", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_tensor_product_mode_matches_composition(seed, log_n, n_q, K, alpha, start, stop, batch):
    """b=...: tensor_product, then ModUp of d2 + inner product + d[:2] * c_add; b of a's shape
    or one ciphertext for the whole batch."""
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_tables(ring, lvl, sp, alpha)
    bl = ring.basis(tuple(lvl))
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    x = rand_res((*batch, 2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])

    def op(u, v):
        return _ops.mod_up_keyswitch_inner(u, *mod_up_args(plan), key.key_q, key.key_p, start, plan.digit_start, None,
                                           c_add, v)

    for y in (rand_res((*batch, 2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes)):
        want = mod_up_keyswitch_inner_reference(ring, x, key, lvl, sp, alpha, c_add=c_add, b=y)
        got = op(x, y)
        expect_equal(got, want, f"b={tuple(y.shape)}", seed)
        yb = y if y.shape == x.shape else y.expand(x.shape)
        expect_equal(got, stacked(op, batch, x, yb), f"b={tuple(y.shape)} batched vs stacked", seed)
        expect_equal(ks.mod_up_keyswitch_inner(tables, x, key, lvl, sp, alpha, c_add=c_add, b=y), want, "rlwe", seed)


@pytest.mark.parametrize("batch", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES[:4] + MOD_UP_CASES[6:])
def test_fused_rotation_matches_composition(seed, log_n, n_q, K, alpha, start, stop, batch):
    """galois=g: mod_up_keyswitch_inner of automorphism(a, g) with automorphism(addend, g), switch_modulus
    with automorphism(addend, g), keyswitch of a rotation: each the op on the rotated inputs, bit for bit."""
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    a = rand_res((*batch, L, ring.n), ring.basis(tuple(lvl)).primes)
    g = rand_galois(ring.n)
    rot = lambda t: None if t is None else _ops.automorphism(t.contiguous(), g)  # noqa: E731
    for Ka, La in ((0, 0), (2, L + K), (1, random.randint(1, L + K))):
        addend = rand_res((*batch, Ka, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        acc = rand_res((*batch, 2, L + K, ring.n), e.primes) if Ka == 1 else None
        want = ks.mod_up_keyswitch_inner(tables, rot(a), key, lvl, sp, alpha, rot(addend), c_add, acc=acc)
        got = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add, acc=acc, galois=g)
        expect_equal(got, want, f"mod_up_keyswitch_inner, galois {g}, addend ({Ka}, {La})", seed)
    src, dst = tuple(lvl) + tuple(sp), tuple(lvl)
    x = rand_res((*batch, 2, len(src), ring.n), e.primes)
    for addend in addends((*batch, 2), len(dst), ring, ring.basis(dst).primes):
        want = ks.switch_modulus(tables, x, src, dst, addend=rot(addend))
        expect_equal(ks.switch_modulus(tables, x, src, dst, addend=addend, galois=g), want,
                     f"switch_modulus, galois {g}, addend {tuple(addend.shape)}", seed)
    c = rand_res((*batch, 2, L, ring.n), ring.basis(tuple(lvl)).primes)
    want = ks.keyswitch(tables, rot(c.select(-3, 1)), key, lvl, sp, alpha, addend=rot(c.select(-3, 0)))
    expect_equal(ks.keyswitch(tables, c.select(-3, 1), key, lvl, sp, alpha, addend=c.select(-3, 0), galois=g), want,
                 f"keyswitch of a rotation, galois {g}", seed)


@pytest.mark.parametrize("batch", BATCHES, ids=BATCH_IDS)
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_keyswitch_matches_composition(seed, log_n, n_q, K, alpha, start, stop, batch):
    """The keyswitch op = switch_modulus(mod_up_keyswitch_inner(...)), bit for bit, in each of its modes."""
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    ext = tuple(lvl) + tuple(sp)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    for name, kw, up, dst, down in keyswitch_cases(ring, lvl, sp, alpha, batch):
        a = rand_res((*batch, 2, len(lvl), ring.n) if "b" in up else (*batch, len(lvl), ring.n),
                     ring.basis(tuple(lvl)).primes)
        want = ks.switch_modulus(tables, ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, **up), ext, dst,
                                 **down)
        expect_equal(ks.keyswitch(tables, a, key, lvl, sp, alpha, **kw), want, f"keyswitch, {name}", seed)


def addends(batch, Ld, ring, primes):
    """The addend forms switch_modulus takes for x (*batch, Ls, N): (Ld, N) for one
    polynomial; else (*batch[:-1], k, Ld, N) for k <= batch[-1] and (*batch[:-1], Ld, N)."""
    if not batch:
        return [rand_res((Ld, ring.n), primes)]
    lead, K = batch[:-1], batch[-1]
    return [rand_res((*lead, k, Ld, ring.n), primes) for k in sorted({1, K})] + [rand_res((*lead, Ld, ring.n), primes)]


@pytest.mark.parametrize("batch", [(), (2,), (3,), (2, 3)], ids=["single", "ct", "3-component", "batched"])
@pytest.mark.parametrize("name,src,dst", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_switch_modulus_matches_composition(seed, name, src, dst, batch):
    ring = make_ring(random.choice([10, 11]), 8, 2)
    tables = ModulusTables(ring)
    p = ks.switch_modulus_tables(ring, src, dst)
    x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
    want = switch_modulus_reference(ring, x, src, dst)
    got = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p))
    expect_equal(got, want, name, seed)
    per_item = stacked(lambda y: _ops.switch_modulus(y, p.drop_rows, p.keep_rows, *switch_args(p)), batch, x)
    expect_equal(got, per_item, f"{name}: batched vs stacked", seed)
    expect_equal(ks.switch_modulus(tables, x, src, dst), want, "rlwe." + name, seed)
    for addend in addends(batch, len(dst), ring, p.b_dst.primes):
        want_add = switch_modulus_reference(ring, x, src, dst, addend)
        got = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), addend)
        expect_equal(got, want_add, f"{name} + addend {tuple(addend.shape)}", seed)
        expect_equal(ks.switch_modulus(tables, x, src, dst, addend=addend), want_add, f"rlwe.{name} + addend", seed)
    # factor k folded into the constants = the switch of k * x (drop_level's k has hundreds of bits)
    k = random.getrandbits(random.choice([20, 300]))
    xb = ring.basis(src)
    want_k = switch_modulus_reference(ring, _ops.mul_const(x, xb.scalar(k), xb.mod), src, dst)
    expect_equal(ks.switch_modulus(tables, x, src, dst, factor=k), want_k, f"rlwe.{name}, factor 2^{k.bit_length()}", seed)


def test_switch_modulus_unaligned_and_strided_inputs(seed):
    ring = make_ring(10, 8, 2)
    tables = ModulusTables(ring)
    src, dst = tuple(range(8)), (0, 1, 2, 3, 4, 9)
    p = ks.switch_modulus_tables(ring, src, dst)
    x3 = rand_res((3, 8, ring.n), ring.basis(src).primes)
    want = switch_modulus_reference(ring, x3[:2], src, dst)
    expect_equal(_ops.switch_modulus(x3[:2], p.drop_rows, p.keep_rows, *switch_args(p)), want, "slice", seed)
    expect_equal(ks.switch_modulus(tables, x3[1:], src, dst), switch_modulus_reference(ring, x3[1:], src, dst),
                 "offset view", seed)


@pytest.mark.parametrize("batch", [(3,), (2, 2)], ids=["batch3", "batch2x2"])
def test_components_read_in_place(seed, batch):
    """One component of a batch of ciphertexts (a view, its planes 2 L N words apart) goes into mod_up,
    mod_up_keyswitch_inner (plain and rotated) and keyswitch_inner_sum's addend without a copy, and two of
    three into mod_up_keyswitch_inner's addend, with the results of their contiguous copies, bit for bit."""
    ring = make_ring(10, 7, 3)
    tables = ModulusTables(ring)
    lvl, sp, alpha = range(1, 7), range(7, 10), 3
    L, n = 6, ring.n
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    key = rand_key(ring, 7, 3, 3)
    c = rand_res((*batch, 2, L, n), ring.basis(tuple(lvl)).primes)
    view = c.select(-3, 1)
    assert not view.is_contiguous() and ks._planes(view) is view, "read in place, not copied"
    expect_equal(ks.mod_up(tables, view, lvl, sp, alpha), ks.mod_up(tables, view.contiguous(), lvl, sp, alpha),
                 "mod_up of a component", seed)
    g = rand_galois(n)
    c_add = ring.basis(e.limbs[:L]).const([random.randrange(q) for q in e.primes[:L]])
    for gal in (1, g):
        want = ks.mod_up_keyswitch_inner(tables, view.contiguous(), key, lvl, sp, alpha, c[..., :1, :, :].contiguous(),
                                         c_add, galois=gal)
        got = ks.mod_up_keyswitch_inner(tables, view, key, lvl, sp, alpha, c[..., :1, :, :], c_add, galois=gal)
        expect_equal(got, want, f"mod_up_keyswitch_inner of a component, galois {gal}", seed)
    t = rand_res((*batch, 3, L, n), ring.basis(tuple(lvl)).primes)  # (d0, d1) of (d0, d1, d2): mul_sum's addend
    d01 = t.narrow(-3, 0, 2)
    assert not d01.is_contiguous() and ks._planes(d01, 3) is d01, "read in place, not copied"
    want = ks.mod_up_keyswitch_inner(tables, t.select(-3, 2), key, lvl, sp, alpha, d01.contiguous(), c_add)
    expect_equal(ks.mod_up_keyswitch_inner(tables, t.select(-3, 2), key, lvl, sp, alpha, d01, c_add), want,
                 "mod_up_keyswitch_inner with (d0, d1) read in place", seed)
    G = 3
    d = rand_res((*batch, G, len(ks.digits(lvl, alpha)), L + 3, n), e.primes)
    y = rand_res((*batch, G, 2, L, n), e.primes[:L])
    gals = [rand_galois(n) for _ in range(G)]
    want = ks.keyswitch_inner_sum(tables, d, [key] * G, gals, lvl, sp, alpha, y.select(-3, 0).contiguous(), c_add)
    expect_equal(ks.keyswitch_inner_sum(tables, d, [key] * G, gals, lvl, sp, alpha, y.select(-3, 0), c_add), want,
                 "keyswitch_inner_sum with the giants' y0 read in place", seed)
    odd = c.expand(2, *c.shape).contiguous()[:, :1].select(-3, 1) if len(batch) == 1 else view[:, :1]
    expect_equal(ks.mod_up(tables, odd, lvl, sp, alpha), ks.mod_up(tables, odd.contiguous(), lvl, sp, alpha),
                 "mod_up of another view", seed)


# --- sizes and argument checks --------------------------------------------------------------
@pytest.mark.parametrize("log_n", [9, 18])
def test_sizes_outside_the_fused_range_refused(log_n):
    """The fused ops cover N = 2^10 .. 2^17 on every device; outside it they refuse, naming the range."""
    n = 1 << log_n
    mod = torch.tensor([[12289, -12287]], dtype=torch.int32)  # values never read: the size check comes first
    one, row = mod[:, 0].contiguous(), torch.zeros(1, n, dtype=torch.int32)
    mats = torch.zeros(1, 1, 1, dtype=torch.int32)
    calls = {
        "mod_up": lambda: ops.mod_up(row, one, mod, row, row, mats, [0, 1]),
        "mod_up_keyswitch_inner": lambda: ops.mod_up_keyswitch_inner(
            row, one, mod, row, row, mats, [0, 1], row.view(1, 1, 1, n).expand(1, 2, 1, n).contiguous(),
            torch.zeros(1, 2, 0, n, dtype=torch.int32), 0, 0),
        "switch_modulus": lambda: ops.switch_modulus(row, [0], [-1], one, mod, row, mod, row,
                                                     torch.zeros(1, 1, dtype=torch.int32), one, one),
        "keyswitch": lambda: ops.keyswitch(
            row, one, mod, row, row, mats, [0, 1], row.view(1, 1, 1, n).expand(1, 2, 1, n).contiguous(),
            torch.zeros(1, 2, 0, n, dtype=torch.int32), 0, 0, None, None, None, None, 1, [0], [-1], one, mod, row,
            mod, row, torch.zeros(1, 1, dtype=torch.int32), one, one),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=rf"fhetorch.{name}: N must be in \[2\^10, 2\^17\].*got N = 2\^{log_n}"):
            call()


def test_argument_errors():
    ring = make_ring(10, 6, 2)
    lvl, sp = range(0, 6), range(6, 8)
    plan = ks.mod_up_tables(ring, lvl, sp, 2)
    pre, mod, psi, psi_inv, mats, bounds = mod_up_args(plan)
    a = rand_res((6, ring.n), ring.basis(tuple(lvl)).primes)
    for bad, msg in [([0, 2, 2, 6], "increase"), ([0, 2, 4], "from 0 to L"), ([1, 4, 6], "from 0 to L"),
                     ([0, 6], "alpha_max"), ([0], "2 to")]:
        with pytest.raises(RuntimeError, match=msg):
            ops.mod_up(a, pre, mod, psi, psi_inv, mats, bad)
    with pytest.raises(RuntimeError, match="pre must"):
        ops.mod_up(a, pre[:5].contiguous(), mod, psi, psi_inv, mats, bounds)
    with pytest.raises(RuntimeError, match="a must have dense"):
        ops.mod_up(torch.stack([a, a], -1)[..., 1], pre, mod, psi, psi_inv, mats, bounds)
    with pytest.raises(RuntimeError, match="collapse to one stride"):  # two batch dimensions, not one stride
        ops.mod_up(a.expand(2, 3, 2, 6, ring.n).contiguous()[:, :2].select(-3, 1), pre, mod, psi, psi_inv, mats, bounds)
    with pytest.raises(RuntimeError, match="must not overlap"):
        ops.mod_up(a.expand(3, 6, ring.n), pre, mod, psi, psi_inv, mats, bounds)
    key = rand_key(ring, 6, 2, 3)
    kargs = (a, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, 0)
    with pytest.raises(RuntimeError, match="digit_start"):
        ops.mod_up_keyswitch_inner(*kargs, 1)
    with pytest.raises(RuntimeError, match="go together"):
        ops.mod_up_keyswitch_inner(*kargs, 0, a[None, :2].expand(2, 2, ring.n).contiguous())
    with pytest.raises(RuntimeError, match="addend must be"):  # an addend without a's batch
        ops.mod_up_keyswitch_inner(torch.stack([a, a]), *kargs[1:], 0, torch.stack([a, a]), pre)
    ct = torch.stack([a, a])
    with pytest.raises(RuntimeError, match="pass c_add and no addend"):
        ops.mod_up_keyswitch_inner(ct, *kargs[1:], 0, ct, pre, ct)
    with pytest.raises(RuntimeError, match="ciphertexts"):
        ops.mod_up_keyswitch_inner(a, *kargs[1:], 0, None, pre, a)
    with pytest.raises(RuntimeError, match="ciphertexts"):  # b neither a's shape nor one ciphertext
        ops.mod_up_keyswitch_inner(torch.stack([ct, ct, ct]), *kargs[1:], 0, None, pre, torch.stack([ct, ct]))
    for g in (2, 0, -3, 2 * ring.n + 1):  # even, or outside (0, 2N)
        with pytest.raises(RuntimeError, match="galois must be an odd galois element"):
            ops.mod_up_keyswitch_inner(*kargs, 0, galois=g)
    with pytest.raises(RuntimeError, match="does not take b"):
        ops.mod_up_keyswitch_inner(ct, *kargs[1:], 0, None, pre, ct, galois=5)
    p = ks.switch_modulus_tables(ring, tuple(range(6)), tuple(range(5)))
    x = rand_res((2, 6, ring.n), ring.basis(tuple(range(6))).primes)
    with pytest.raises(RuntimeError, match="galois must be an odd galois element"):
        ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), galois=4)
    for drop, keep, msg in [([6], list(range(5)), "drop row"), ([5], [0, 1, 2, 3, -2], "keep row"),
                            ([], list(range(5)), "1 to"), ([5, 4], list(range(5)), "pre must")]:
        with pytest.raises(RuntimeError, match=msg):
            ops.switch_modulus(x, drop, keep, *switch_args(p))
    y = rand_res((3, 5, ring.n), ring.basis(tuple(range(5))).primes)
    for bad in (y, y.repeat(2, 1, 1).view(2, 3, 5, ring.n), y[:, :4].contiguous()):  # Ka > 2, rank, Ld
        with pytest.raises(RuntimeError, match="addend must be"):
            ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), bad)
    # keyswitch checks both halves and names itself: its switch's rows are those of the key product (L + K = 8)
    q = ks.switch_modulus_tables(ring, tuple(range(8)), tuple(range(6)))
    down = (q.drop_rows, q.keep_rows, *switch_args(q))
    with pytest.raises(RuntimeError, match="fhetorch.keyswitch: addend and c_add go together"):
        ops.keyswitch(*kargs, 0, a[None, :2].expand(2, 2, ring.n).contiguous(), None, None, None, 1, *down)
    with pytest.raises(RuntimeError, match="fhetorch.keyswitch: drop row 8"):
        ops.keyswitch(*kargs, 0, None, None, None, None, 1, [8, 7], *down[1:])
    with pytest.raises(RuntimeError, match="fhetorch.keyswitch: galois must be"):
        ops.keyswitch(*kargs, 0, None, None, None, None, 4, *down)
    with pytest.raises(RuntimeError, match="fhetorch.keyswitch: addend must be"):
        ops.keyswitch(*kargs, 0, None, None, None, None, 1, *down, y)


def test_non_power_of_two_n_raises_in_process():
    """The "N must be a power of two" check raises RuntimeError (it once killed the process
    with SIGSEGV on the GPU machine, tests/_ops/test_cuda_parity.py)."""
    mod = torch.tensor([[12289, -12287]], dtype=torch.int32)
    x = torch.zeros(1, 1000, dtype=torch.int32)
    tw = torch.zeros(1, 1000, dtype=torch.int32)
    for call in (lambda: ops.ntt(x, mod, tw), lambda: ops.intt(x, mod, tw, mod[:, 0].contiguous()),
                 lambda: ops.automorphism(x, 3),
                 lambda: ops.mod_up(x, mod[:, 0].contiguous(), mod, tw, tw, torch.zeros(1, 1, 1, dtype=torch.int32),
                                    [0, 1]),
                 lambda: ops.switch_modulus(x, [0], [-1], mod[:, 0].contiguous(), mod, tw, mod, tw,
                                            torch.zeros(1, 1, dtype=torch.int32), mod[:, 0].contiguous(),
                                            mod[:, 0].contiguous())):
        with pytest.raises(RuntimeError, match="N must be a power of two, got 1000"):
            call()


# --- CUDA: GPU against CPU ------------------------------------------------------------------------
GPU = "cuda"


def rings(log_n: int, n_q: int, K: int):
    """A random ring on the CPU and the same on the GPU; skips where fhetorch has no CUDA kernels."""
    if not (torch.cuda.is_available() and _ops.has_cuda()):
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(log_n, n_q, K)
    return ring, Ring(log_n, ring.primes, GPU)


def _gpu_key(key):
    return type("K", (), {"key_q": key.key_q.to(GPU), "key_p": key.key_p.to(GPU)})


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [
    (10, 8, 3, 3, 1, 8), (12, 9, 4, 4, 2, 9), (13, 40, 2, 20, 3, 40), (11, 4, 1, 1, 0, 4),
    (16, 48, 12, 12, 0, 48), (16, 24, 12, 12, 0, 24), (16, 47, 12, 12, 4, 47), (17, 6, 2, 3, 0, 6),
    (12, 10, 2, 2, 0, 10),  # beta = 5
])
def test_cuda_mod_up(seed, log_n, n_q, K, alpha, start, stop, batch):
    ring, gring = rings(log_n, n_q, K)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan, gplan = ks.mod_up_tables(ring, lvl, sp, alpha), ks.mod_up_tables(gring, lvl, sp, alpha)
    a = rand_res((*batch, L, ring.n), ring.basis(tuple(lvl)).primes)
    want = _ops.mod_up(a, *mod_up_args(plan))
    expect_equal(_ops.mod_up(a.to(GPU), *mod_up_args(gplan)), want, "cuda mod_up", seed)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    gkey = _gpu_key(key)
    e = plan.ext
    for La in (0, L, L + K):
        addend = rand_res((*batch, 2, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        want = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add)
        got = ks.mod_up_keyswitch_inner(gplans, a.to(GPU), gkey, lvl, sp, alpha,
                                        None if addend is None else addend.to(GPU),
                                        None if c_add is None else c_add.to(GPU))
        expect_equal(got, want, f"cuda mod_up_keyswitch_inner La={La}", seed)
    addend = rand_res((*batch, 1, L, ring.n), e.primes[:L])  # one component, and a running sum
    c_add = ring.basis(e.limbs[:L]).const([random.randrange(q) for q in e.primes[:L]])
    acc = rand_res((*batch, 2, L + K, ring.n), e.primes)
    want = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add, acc=acc)
    got = ks.mod_up_keyswitch_inner(gplans, a.to(GPU), gkey, lvl, sp, alpha, addend.to(GPU), c_add.to(GPU),
                                    acc=acc.to(GPU))
    expect_equal(got, want, "cuda mod_up_keyswitch_inner, one-component addend and acc", seed)
    bl = ring.basis(tuple(lvl))
    x = rand_res((*batch, 2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    for y in (rand_res((*batch, 2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes)):
        want = ks.mod_up_keyswitch_inner(tables, x, key, lvl, sp, alpha, c_add=c_add, b=y)
        got = ks.mod_up_keyswitch_inner(gplans, x.to(GPU), gkey, lvl, sp, alpha, c_add=c_add.to(GPU), b=y.to(GPU))
        expect_equal(got, want, f"cuda tensor-product mode, b={tuple(y.shape)}", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [
    (10, 8, 3, 3, 1, 8), (12, 9, 4, 4, 2, 9), (16, 48, 12, 12, 0, 48), (16, 47, 12, 12, 4, 47), (17, 6, 2, 3, 0, 6),
])
def test_cuda_fused_rotation(seed, log_n, n_q, K, alpha, start, stop, batch):
    """galois=g read through the automorphism on the GPU (the INTT's first phase, the inner
    product's own digits and addend, ModDown's epilogue) = the CPU, bit for bit."""
    ring, gring = rings(log_n, n_q, K)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    gkey = _gpu_key(key)
    dev = lambda t: None if t is None else t.to(GPU)  # noqa: E731
    for Ka, La in ((0, 0), (2, L + K), (1, L)):
        g = rand_galois(ring.n)
        a = rand_res((*batch, L, ring.n), ring.basis(tuple(lvl)).primes)
        addend = rand_res((*batch, Ka, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        acc = rand_res((*batch, 2, L + K, ring.n), e.primes) if Ka == 1 else None
        want = ks.mod_up_keyswitch_inner(tables, a, key, lvl, sp, alpha, addend, c_add, acc=acc, galois=g)
        got = ks.mod_up_keyswitch_inner(gplans, dev(a), gkey, lvl, sp, alpha, dev(addend), dev(c_add), acc=dev(acc),
                                        galois=g)
        expect_equal(got, want, f"cuda mod_up_keyswitch_inner, galois {g}, addend ({Ka}, {La})", seed)
    g = rand_galois(ring.n)
    c = rand_res((*batch, 2, L, ring.n), ring.basis(tuple(lvl)).primes)
    want = ks.keyswitch(tables, c.select(-3, 1), key, lvl, sp, alpha, addend=c.select(-3, 0), galois=g)
    got = ks.keyswitch(gplans, dev(c).select(-3, 1), gkey, lvl, sp, alpha, addend=dev(c).select(-3, 0), galois=g)
    expect_equal(got, want, f"cuda keyswitch of a rotation, galois {g}", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [
    (10, 8, 3, 3, 1, 8), (12, 9, 4, 4, 2, 9), (16, 48, 12, 12, 0, 48), (16, 47, 12, 12, 4, 47), (11, 4, 1, 1, 0, 4),
])
def test_cuda_keyswitch(seed, monkeypatch, log_n, n_q, K, alpha, start, stop, batch):
    """The keyswitch op on the GPU = the CPU, bit for bit, in each of its modes: the key product in two
    parts beside ModDown on a second stream (the default), and in one launch on one stream
    (FHETORCH_KS_FORK=0)."""
    ring, gring = rings(log_n, n_q, K)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    gkey = _gpu_key(key)
    dev = lambda v: v.to(GPU) if isinstance(v, torch.Tensor) else v  # noqa: E731
    for name, kw, up, _, _ in keyswitch_cases(ring, lvl, sp, alpha, batch):
        a = rand_res((*batch, 2, len(lvl), ring.n) if "b" in up else (*batch, len(lvl), ring.n),
                     ring.basis(tuple(lvl)).primes)
        want = ks.keyswitch(tables, a, key, lvl, sp, alpha, **kw)
        for mode in ("1", "0"):
            monkeypatch.setenv("FHETORCH_KS_FORK", mode)
            got = ks.keyswitch(gplans, a.to(GPU), gkey, lvl, sp, alpha, **{k: dev(v) for k, v in kw.items()})
            expect_equal(got, want, f"cuda keyswitch, {name}, FHETORCH_KS_FORK={mode}", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [(10, 7, 3, 3, 1, 7), (16, 48, 12, 12, 0, 48)])
def test_cuda_components_read_in_place(seed, log_n, n_q, K, alpha, start, stop):
    """One component of a batch read in place on the GPU (mod_up's first INTT phase, the key product's own
    digits, plain and rotated; keyswitch_inner_sum's addend) = the CPU on the contiguous copy, bit for bit."""
    ring, gring = rings(log_n, n_q, K)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L, n = stop - start, ring.n
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    gkey = _gpu_key(key)
    c = rand_res((3, 2, L, n), ring.basis(tuple(lvl)).primes)
    gview = c.to(GPU).select(-3, 1)
    want = ks.mod_up(tables, c.select(-3, 1).contiguous(), lvl, sp, alpha)
    expect_equal(ks.mod_up(gplans, gview, lvl, sp, alpha), want, "cuda mod_up of a component", seed)
    c_add = ring.basis(e.limbs[:L]).const([random.randrange(q) for q in e.primes[:L]])
    for gal in (1, rand_galois(n)):
        want = ks.mod_up_keyswitch_inner(tables, c.select(-3, 1).contiguous(), key, lvl, sp, alpha,
                                         c[:, :1].contiguous(), c_add, galois=gal)
        got = ks.mod_up_keyswitch_inner(gplans, gview, gkey, lvl, sp, alpha, c[:, :1].to(GPU), c_add.to(GPU),
                                        galois=gal)
        expect_equal(got, want, f"cuda mod_up_keyswitch_inner of a component, galois {gal}", seed)
    t = rand_res((3, 3, L, n), ring.basis(tuple(lvl)).primes)
    want = ks.mod_up_keyswitch_inner(tables, t.select(-3, 2), key, lvl, sp, alpha, t[:, :2].contiguous(), c_add)
    got = ks.mod_up_keyswitch_inner(gplans, t.to(GPU).select(-3, 2), gkey, lvl, sp, alpha, t.to(GPU).narrow(-3, 0, 2),
                                    c_add.to(GPU))
    expect_equal(got, want, "cuda mod_up_keyswitch_inner with (d0, d1) read in place", seed)
    G = 2
    d = rand_res((2, G, len(ks.digits(lvl, alpha)), L + K, n), e.primes)
    y = rand_res((2, G, 2, L, n), e.primes[:L])
    gals = [rand_galois(n) for _ in range(G)]
    want = ks.keyswitch_inner_sum(tables, d, [key] * G, gals, lvl, sp, alpha, y.select(-3, 0).contiguous(), c_add)
    got = ks.keyswitch_inner_sum(gplans, d.to(GPU), [gkey] * G, gals, lvl, sp, alpha, y.to(GPU).select(-3, 0),
                                 c_add.to(GPU))
    expect_equal(got, want, "cuda keyswitch_inner_sum with the giants' y0 read in place", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("log_n", [10, 12, 16])
@pytest.mark.parametrize("name,src,dst", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_cuda_switch_modulus(seed, log_n, name, src, dst):
    ring, gring = rings(log_n, 8, 2)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    for batch in [(2,), (3,), (2, 3)]:
        x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
        for addend in [None] + addends(batch, len(dst), ring, ring.basis(dst).primes):
            g = 1 if addend is None else rand_galois(ring.n)  # a rotation's addend, read through the automorphism
            for gal in sorted({1, g}):
                want = ks.switch_modulus(tables, x, src, dst, addend=addend, galois=gal)
                got = ks.switch_modulus(gplans, x.to(GPU), src, dst, addend=None if addend is None else addend.to(GPU),
                                        galois=gal)
                expect_equal(got, want, f"cuda {name} batch={batch} galois {gal}", seed)


@pytest.mark.cuda
def test_cuda_benchmark_shape_switch(seed):
    """HMult's switch at 48 x 12: (2, 60, N) from Q_48 P to Q_46, and 8 ciphertexts at once."""
    ring, gring = rings(16, 48, 12)
    tables, gplans = ModulusTables(ring), ModulusTables(gring)
    src, dst = tuple(range(60)), tuple(range(46))
    for batch in [(), (8,)]:
        x = rand_res((*batch, 2, 60, ring.n), ring.primes)
        addend = rand_res((*batch, 2, 46, ring.n), ring.basis(dst).primes)
        want = ks.switch_modulus(tables, x, src, dst, addend=addend)
        expect_equal(ks.switch_modulus(gplans, x.to(GPU), src, dst, addend=addend.to(GPU)), want, f"48x12 {batch}",
                     seed)


@pytest.mark.cuda
@pytest.mark.parametrize("log_n", [9, 10, 18])
def test_cuda_refuses_what_the_cpu_refuses(seed, log_n):
    """Sizes outside the fused range and (N = 2^10) an input whose planes are not dense are refused on both
    devices with one message."""
    ring, _ = rings(log_n, 6, 2)
    lvl, sp = range(0, 6), range(6, 8)
    a = rand_res((6, ring.n), ring.basis(tuple(lvl)).primes)
    args = mod_up_args(ks.mod_up_tables(ring, lvl, sp, 2))
    messages = []
    for dev in ("cpu", GPU):
        x = a.to(dev)
        if log_n == 10:
            x = torch.stack([x, x], -1)[..., 1]  # not contiguous, 4 bytes past its storage's start
        with pytest.raises(RuntimeError, match="a must have dense" if log_n == 10 else
                           r"N must be in \[2\^10, 2\^17\]") as err:
            _ops.mod_up(x, *[t.to(dev) if isinstance(t, torch.Tensor) else t for t in args])
        messages.append(str(err.value).splitlines()[0])
    assert messages[0] == messages[1]


@pytest.mark.cuda
def test_cuda_graph_capture(seed):
    """The fused ops are capturable: a replayed graph gives the eager result."""
    ring, gring = rings(12, 9, 3)
    gplans = ModulusTables(gring)  # built once: the captured graph holds its tensors
    lvl, sp = range(0, 9), range(9, 12)
    gkey = _gpu_key(rand_key(ring, 9, 3, 3))
    a = rand_res((4, 9, ring.n), ring.basis(tuple(lvl)).primes).to(GPU)
    ext = tuple(lvl) + tuple(sp)

    def f():  # the two ops, and the keyswitch op with its second stream (forked and joined in the capture)
        u = ks.mod_up_keyswitch_inner(gplans, a, gkey, lvl, sp, 3)
        y = ks.keyswitch(gplans, a, gkey, lvl, sp, 3, tuple(range(8)))
        return torch.stack([ks.switch_modulus(gplans, u, ext, tuple(range(8))), y])

    want = f()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = f()
    a.copy_(rand_res((4, 9, ring.n), ring.basis(tuple(lvl)).primes).to(GPU))
    g.replay()
    torch.cuda.synchronize()
    expect_equal(out, f(), "graph replay on new input", seed)
    expect_equal(out[0], out[1], "keyswitch in the graph = its composition", seed)
    assert not torch.equal(out, want)
