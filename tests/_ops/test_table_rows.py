"""The fused key-switching ops read NTT tables through a row map (psi_rows, psi_inv_drop_rows,
psi_dst_rows): the ring's full tables then serve every level without per-level copies. With
the map they equal, bit for bit, the same op on tables gathered for the limbs; bad maps are
refused. (CUDA: the same programs, emulated in test_fused.py; parity on the GPU there too.)"""
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch._rlwe import keyswitch as ks
from .test_fused import make_ring, rand_key, rand_res, seed  # noqa: F401  (seed: a fixture)


def _gathered(ring, limbs):
    sel = torch.tensor(limbs)
    return ring.psi[sel].contiguous(), ring.psi_inv[sel].contiguous()


def _ntt_case(log_n, device="cpu"):
    ring = make_ring(log_n, 7, 3, device)
    limbs = [5, 6, 1, 8, 0]
    sel = torch.tensor(limbs, device=device)
    x = rand_res((2, len(limbs), ring.n), [ring.primes[i] for i in limbs]).to(device)
    post = ring.n_inv_mont[sel].contiguous()
    return ring, limbs, sel, x, post


@pytest.mark.parametrize("log_n", [8, 10])
def test_ntt_with_table_rows(seed, log_n):
    ring, limbs, sel, x, post = _ntt_case(log_n)
    mod = ring.mod[sel].contiguous()
    psi, psi_inv = _gathered(ring, limbs)
    assert torch.equal(_ops.ntt(x, mod, ring.psi, limbs), _ops.ntt(x, mod, psi))
    assert torch.equal(_ops.intt(x, mod, ring.psi_inv, post, limbs), _ops.intt(x, mod, psi_inv, post))
    torch.library.opcheck(torch.ops.fhetorch.ntt.default, (x, mod, ring.psi, limbs),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [(10, 8, 3, 3, 1, 8), (11, 9, 2, 4, 2, 7), (10, 5, 1, 1, 0, 5)])
def test_mod_up_with_table_rows(seed, log_n, n_q, K, alpha, start, stop):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    plan = ks.mod_up_plan(ring, lvl, sp, alpha)
    psi, psi_inv = _gathered(ring, plan.psi_rows)
    a = rand_res((len(lvl), ring.n), ring.basis(lvl).primes)
    args = (plan.pre, plan.ext.mod)
    want = _ops.mod_up(a, *args, psi, psi_inv, plan.mats, plan.bounds)
    got = _ops.mod_up(a, *args, ring.psi, ring.psi_inv, plan.mats, plan.bounds, plan.psi_rows)
    assert torch.equal(got, want)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    x, y = rand_res((2, len(lvl), ring.n), ring.basis(lvl).primes), rand_res((2, len(lvl), ring.n), ring.basis(lvl).primes)
    c_add = ring.basis(lvl).const([random.randrange(q) for q in ring.basis(lvl).primes])
    common = (plan.mats, plan.bounds, key.key_q, key.key_p, start, plan.digit_start)
    want = _ops.mod_up_keyswitch(x, *args, psi, psi_inv, *common, None, c_add, y)
    got = _ops.mod_up_keyswitch(x, *args, ring.psi, ring.psi_inv, *common, None, c_add, y, plan.psi_rows)
    assert torch.equal(got, want)


@pytest.mark.parametrize("src,dst", [(tuple(range(1, 8)), tuple(range(3, 6))), ((2, 3, 4, 9, 10), (0, 1, 2, 3)),
                                     (tuple(range(8)) + (9, 10), tuple(range(2, 6)))])
def test_switch_modulus_with_table_rows(seed, src, dst):
    ring = make_ring(10, 9, 2)
    p = ks.switch_plan(ring, src, dst)
    x = rand_res((3, len(src), ring.n), ring.basis(src).primes)
    addend = rand_res((2, len(dst), ring.n), p.b_dst.primes)
    head = (x, p.drop_rows, p.keep_rows, p.pre, p.b_drop.mod)
    tail = (p.matrix, p.c_keep, p.c_sub, addend)
    want = _ops.switch_modulus(*head, _gathered(ring, p.psi_inv_drop_rows)[1], p.b_dst.mod,
                               _gathered(ring, p.psi_dst_rows)[0], *tail)
    got = _ops.switch_modulus(*head, ring.psi_inv, p.b_dst.mod, ring.psi, *tail, p.psi_inv_drop_rows, p.psi_dst_rows)
    assert torch.equal(got, want)


def test_bad_table_rows_are_refused():
    ring = make_ring(10, 6, 2)
    plan = ks.mod_up_plan(ring, range(1, 6), range(6, 8), 3)
    a = rand_res((5, ring.n), ring.basis(range(1, 6)).primes)
    args = (a, plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats, plan.bounds)
    with pytest.raises(RuntimeError, match="psi_ext row 8 outside"):
        _ops.mod_up(*args, plan.psi_rows[:-1] + [8])
    with pytest.raises(RuntimeError, match="one table row per limb"):
        _ops.mod_up(*args, plan.psi_rows[:-1])
    with pytest.raises(RuntimeError, match="must be \\(7, N\\)"):
        _ops.mod_up(*args)  # the full tables without a map: the shape says which rows


@pytest.mark.parametrize("op", ["mod_up", "switch_modulus"])
def test_opcheck_with_table_rows(op):
    ring = make_ring(10, 5, 2)
    if op == "mod_up":
        plan = ks.mod_up_plan(ring, range(1, 5), range(5, 7), 2)
        a = rand_res((4, ring.n), ring.basis(range(1, 5)).primes)
        args = (a, plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats, plan.bounds, plan.psi_rows)
    else:
        p = ks.switch_plan(ring, tuple(range(7)), tuple(range(1, 4)))
        x = rand_res((2, 7, ring.n), ring.basis(range(7)).primes)
        args = (x, p.drop_rows, p.keep_rows, p.pre, p.b_drop.mod, ring.psi_inv, p.b_dst.mod, ring.psi, p.matrix,
                p.c_keep, p.c_sub, None, p.psi_inv_drop_rows, p.psi_dst_rows)
    torch.library.opcheck(getattr(torch.ops.fhetorch, op).default, args,
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.cuda
@pytest.mark.parametrize("log_n", [12, 16])
def test_table_rows_cuda_matches_cpu(seed, log_n):
    """The CUDA programs through the row map, bit for bit against the CPU."""
    ring = make_ring(log_n, 9, 3)
    gring = type(ring)(log_n, ring.primes, "cuda")
    plan = ks.mod_up_plan(ring, range(2, 8), range(9, 12), 3)
    a = rand_res((6, ring.n), ring.basis(range(2, 8)).primes)
    args = (plan.pre, plan.ext.mod)
    want = _ops.mod_up(a, *args, ring.psi, ring.psi_inv, plan.mats, plan.bounds, plan.psi_rows)
    got = _ops.mod_up(a.cuda(), *[t.cuda() for t in args], gring.psi, gring.psi_inv, plan.mats.cuda(), plan.bounds,
                      plan.psi_rows)
    assert torch.equal(got.cpu(), want)
    key = rand_key(ring, 9, 3, 3)
    common = (plan.bounds, 2, plan.digit_start)
    want = _ops.mod_up_keyswitch(a, *args, ring.psi, ring.psi_inv, plan.mats, common[0], key.key_q, key.key_p,
                                 *common[1:], psi_rows=plan.psi_rows)
    got = _ops.mod_up_keyswitch(a.cuda(), *[t.cuda() for t in args], gring.psi, gring.psi_inv, plan.mats.cuda(),
                                common[0], key.key_q.cuda(), key.key_p.cuda(), *common[1:], psi_rows=plan.psi_rows)
    assert torch.equal(got.cpu(), want)
    p = ks.switch_plan(ring, tuple(range(2, 8)) + (9, 10, 11), tuple(range(3, 6)))
    x = rand_res((2, 9, ring.n), ring.basis(tuple(range(2, 8)) + (9, 10, 11)).primes)
    tabs = (p.pre, p.b_drop.mod, p.b_dst.mod, p.matrix, p.c_keep, p.c_sub)
    want = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, tabs[0], tabs[1], ring.psi_inv, tabs[2], ring.psi,
                               *tabs[3:], None, p.psi_inv_drop_rows, p.psi_dst_rows)
    g = [t.cuda() for t in tabs]
    got = _ops.switch_modulus(x.cuda(), p.drop_rows, p.keep_rows, g[0], g[1], gring.psi_inv, g[2], gring.psi, *g[3:],
                              None, p.psi_inv_drop_rows, p.psi_dst_rows)
    assert torch.equal(got.cpu(), want)


@pytest.mark.cuda
@pytest.mark.parametrize("log_n", [8, 12, 16])  # 8: the stage-by-stage kernels
def test_ntt_table_rows_cuda_matches_cpu(seed, log_n):
    ring, limbs, sel, x, post = _ntt_case(log_n)
    gring = type(ring)(log_n, ring.primes, "cuda")
    mod = ring.mod[sel].contiguous()
    want = _ops.ntt(x, mod, ring.psi, limbs)
    assert torch.equal(_ops.ntt(x.cuda(), mod.cuda(), gring.psi, limbs).cpu(), want)
    want = _ops.intt(x, mod, ring.psi_inv, post, limbs)
    assert torch.equal(_ops.intt(x.cuda(), mod.cuda(), gring.psi_inv, post.cuda(), limbs).cpu(), want)
