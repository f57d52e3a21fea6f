"""The CUDA block programs (csrc/cuda/program.cuh) run on the host by tests/cuda_emu/emu.cu,
against the CPU ops, bit for bit, on fresh random inputs: the NTT's two phases (every size
2^10 .. 2^17, forward and inverse, unaligned rows), the base conversion of the bconv op
(tensor-core, register and memory paths, odd N; the tensor cores' mma through a model of its
fragments), and the fused key-switching pipelines (mod_up,
mod_up_keyswitch_inner with addends and the tensor-product mode, switch_modulus with its
addend forms), single and batched, on dense tables and on the ring's full tables read through
table row maps (csrc/table_rows.h); the samplers' thread bodies (one ChaCha20 block per
thread for several elements) against the CPU's one block per element. Needs nvcc (no GPU); marked slow. The element-wise CUDA
kernels share their arithmetic with the CPU (csrc/elementwise.h) and are not emulated.
"""
import ctypes
import os
import random
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import ntt_primes
from fhetorch._rlwe import ModulusTables, keyswitch as ks

from .inputs import (expect_equal, keyswitch_cases, make_ring, mod_up_args, rand_galois, rand_key, rand_res,
                     switch_args)
from .reference import mod_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def emu():
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not found")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(tempfile.mkdtemp(prefix="ftemu"), "libftemu.so")
    r = subprocess.run([nvcc, "-O2", "-std=c++17", "-Xcompiler", "-fPIC", "-shared", "-o", out,
                        os.path.join(root, "tests", "cuda_emu", "emu.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    lib = ctypes.CDLL(out)
    for f in ("emu_mod_up", "emu_keyswitch", "emu_switch_modulus", "emu_ntt", "emu_bconv", "emu_sample", "emu_fourier_split"):
        getattr(lib, f).restype = ctypes.c_longlong
    return lib


@pytest.fixture(params=[1, 0, -1], ids=["tc", "int", "default"])
def bconv_tc(request, emu):
    """The base conversions on tensor cores (bconv_tc_core.cuh, emulated), on the integer pipes, or
    as the build decides (FHETORCH_BCONV_TC unset: tensor cores for 9-16 inputs)."""
    emu.emu_set_bconv_tc(request.param)
    yield request.param
    emu.emu_set_bconv_tc(-1)


def _rows(v):
    """A table row map for emu.cu (None: row l)."""
    return None if v is None else _ints(v)


def _p(t):
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def _ints(v):
    return (ctypes.c_int * len(v))(*v)


def _ll(v):
    return ctypes.c_longlong(int(v))


def emulate_mod_up(emu, a, plan, K, key=None, start=0, addend=None, c_add=None, b=None, full_tables=False, acc=None,
                   galois=1):
    """The CUDA pipeline of mod_up (key None) or mod_up_keyswitch_inner, run on the host; with
    full_tables, on the ring's tables through the row of each ext limb (what fhetorch._rlwe passes)."""
    pre, mod, psi, psi_inv, mats, bounds = mod_up_args(plan)
    rows = None
    if full_tables:
        psi, psi_inv, rows = plan.ring.psi, plan.ring.psi_inv, plan.psi_rows
    L, n = a.shape[-2], a.shape[-1]
    tensor = b is not None
    B = int(np.prod(a.shape[:-3 if tensor else -2]))
    shape = (*a.shape[:-3 if tensor else -2], 2 if key else len(bounds) - 1, mod.shape[0], n)
    out = torch.empty(shape, dtype=torch.int32)
    b_stride = 0 if not tensor or b.dim() == 3 else 2 * L * n
    La = 0 if addend is None else addend.shape[-2]
    launches = emu.emu_mod_up(_p(a), _p(b), _ll(b_stride), _p(out), _ll(B), L, K, n.bit_length() - 1, _p(pre),
                              _p(mod), _p(psi), _p(psi_inv), _p(mats), mats.shape[2], _ints(bounds), len(bounds) - 1,
                              _p(key.key_q) if key else None, _p(key.key_p) if key else None,
                              key.key_q.shape[2] if key else 0, start, plan.digit_start, _p(addend), _p(c_add), La,
                              _rows(rows), 2 if addend is None else addend.shape[-3], _p(acc), ctypes.c_uint(galois),
                              _ll(addend.stride(-4) if addend is not None and addend.dim() >= 4 else 0))
    assert launches > 0
    return out


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop,batch", [
    (10, 8, 3, 3, 1, 8, ()), (11, 6, 2, 2, 0, 6, ()), (12, 9, 4, 4, 2, 9, ()), (13, 40, 2, 20, 3, 40, ()),
    (10, 4, 1, 1, 0, 4, ()), (14, 6, 2, 3, 0, 6, ()), (15, 6, 2, 3, 0, 6, ()), (16, 6, 2, 3, 1, 6, ()),
    (17, 4, 2, 2, 0, 4, ()), (11, 10, 2, 2, 0, 10, ()), (10, 7, 1, 1, 1, 7, ()),
    (10, 6, 2, 2, 1, 6, (3,)), (11, 8, 3, 3, 0, 8, (2, 2)),  # batches of ciphertexts
])
def test_emulated_mod_up(emu, bconv_tc, seed, log_n, n_q, K, alpha, start, stop, batch):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_tables(ring, lvl, sp, alpha)
    args = mod_up_args(plan)
    a = rand_res((*batch, L, ring.n), ring.basis(tuple(lvl)).primes)
    want = _ops.mod_up(a, *args)
    expect_equal(emulate_mod_up(emu, a, plan, K), want, "emulated mod_up", seed)
    expect_equal(emulate_mod_up(emu, a, plan, K, full_tables=True), want, "emulated mod_up, table rows", seed)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    e = plan.ext
    # the modes alternate between dense tables and the ring's through the row map
    for k, La in enumerate((0, L + K, random.randint(1, L + K))):
        addend = rand_res((*batch, 2, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        want = _ops.mod_up_keyswitch_inner(a, *args, key.key_q, key.key_p, start, plan.digit_start, addend, c_add)
        got = emulate_mod_up(emu, a, plan, K, key, start, addend, c_add, full_tables=k % 2 == 1)
        expect_equal(got, want, f"emulated mod_up_keyswitch_inner La={La}, table rows: {k % 2 == 1}", seed)
    # (d0, d1) of (d0, d1, d2) read in place: the addend's ciphertexts 3 L N words apart
    if batch:
        t = rand_res((*batch, 3, L, ring.n), ring.basis(tuple(lvl)).primes)
        c_add = ring.basis(e.limbs[:L]).const([random.randrange(q) for q in e.primes[:L]])
        d01 = t.narrow(-3, 0, 2)
        want = _ops.mod_up_keyswitch_inner(a, *args, key.key_q, key.key_p, start, plan.digit_start, d01.contiguous(),
                                           c_add)
        got = emulate_mod_up(emu, a, plan, K, key, start, d01, c_add)
        expect_equal(got, want, "emulated mod_up_keyswitch_inner, the addend read in place", seed)
    # a one-component addend (a rotation's sigma(c0)) and a running sum
    La = random.randint(1, L + K)
    addend = rand_res((*batch, 1, La, ring.n), e.primes[:La])
    c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]])
    acc = rand_res((*batch, 2, L + K, ring.n), e.primes)
    want = _ops.mod_up_keyswitch_inner(a, *args, key.key_q, key.key_p, start, plan.digit_start, addend, c_add, None,
                                       None, acc)
    got = emulate_mod_up(emu, a, plan, K, key, start, addend, c_add, acc=acc)
    expect_equal(got, want, f"emulated mod_up_keyswitch_inner, one-component addend La={La} and acc", seed)
    # a rotation fused in: a and the addend read through the automorphism (and mod_up's own rows)
    g = rand_galois(ring.n)
    want = _ops.mod_up_keyswitch_inner(a, *args, key.key_q, key.key_p, start, plan.digit_start, addend, c_add, None,
                                       None, acc, g)
    got = emulate_mod_up(emu, a, plan, K, key, start, addend, c_add, acc=acc, galois=g, full_tables=True)
    expect_equal(got, want, f"emulated mod_up_keyswitch_inner, galois {g}", seed)
    expect_equal(emulate_mod_up(emu, a, plan, K, galois=g), _ops.mod_up(_ops.automorphism(a, g), *args),
                 f"emulated mod_up, galois {g}", seed)
    bl = ring.basis(tuple(lvl))
    x = rand_res((*batch, 2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    for k, y in enumerate((rand_res((*batch, 2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes))):
        want = _ops.mod_up_keyswitch_inner(x, *args, key.key_q, key.key_p, start, plan.digit_start, None, c_add, y)
        got = emulate_mod_up(emu, x, plan, K, key, start, None, c_add, y, full_tables=k == 0)
        expect_equal(got, want, f"emulated tensor-product mode, b={tuple(y.shape)}, table rows: {k == 0}", seed)


@pytest.mark.parametrize("log_n,src,dst,batch,Ka", [
    (10, tuple(range(6)), tuple(range(5)), (2,), 0),
    (11, tuple(range(8)), (0, 1, 2, 3, 4, 8), (3,), 2),
    (12, tuple(range(6)), (8, 0, 1, 2, 3), (2, 3), 1),
    (10, tuple(range(6)), (3, 0, 2, 1), (), 0),
    (13, (0, 1, 2), (8, 9), (2,), 2),
    (10, tuple(range(26)), tuple(range(5)), (2,), 0),  # 21 dropped: the > 16-input BConv
    (17, tuple(range(4)), (0, 1, 2, 5), (1,), 1),
    (10, tuple(range(8)), tuple(range(5)), (3, 2), 2),  # a batch of ciphertexts, each with (d0, d1)
])
def test_emulated_switch_modulus(emu, bconv_tc, seed, log_n, src, dst, batch, Ka):
    ring = make_ring(log_n, max(max(src), max(dst)) + 1, 0)
    p = ks.switch_modulus_tables(ring, src, dst)
    x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
    B = int(np.prod(batch)) if batch else 1
    K = batch[-1] if batch else 1
    addend = rand_res((*batch[:-1], Ka, len(dst), ring.n), p.b_dst.primes) if Ka else None
    g = rand_galois(ring.n) if Ka else 1  # the addend through a rotation
    want = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), addend, galois=g)
    pre, mod_drop, _, mod_dst, _, mat, c_keep, c_sub = switch_args(p)
    # dense tables, then the ring's through the rows of the dropped and destination limbs
    for tables, rows in [(switch_args(p), (None, None)),
                         ((pre, mod_drop, ring.psi_inv, mod_dst, ring.psi, mat, c_keep, c_sub),
                          (p.psi_inv_drop_rows, p.psi_dst_rows))]:
        got = torch.empty_like(want)
        assert emu.emu_switch_modulus(_p(x), _p(got), _ll(B), len(src), log_n, _ints(p.drop_rows), len(p.drop_rows),
                                      _ints(p.keep_rows), len(dst), *[_p(t) for t in tables], _p(addend), K, Ka,
                                      *[_rows(r) for r in rows], ctypes.c_uint(g)) > 0
        expect_equal(got, want, f"emulated switch_modulus, table rows: {rows[0] is not None}", seed)


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop,batch", [
    (10, 6, 2, 2, 0, 6, ()), (11, 7, 3, 3, 2, 7, (2,)), (10, 4, 1, 1, 0, 4, ()), (12, 9, 4, 4, 3, 8, (2,)),
])
def test_emulated_keyswitch(emu, seed, log_n, n_q, K, alpha, start, stop, batch):
    """keyswitch's CUDA pipeline (csrc/cuda/keyswitch_core.cuh) on the host, in each of its modes, with the
    key product in one launch and in two around ModDown's first launches (the dropped rows first; the kept
    rows' on a grid of as many blocks as its work, or fewer, each striding over it), against the CPU op;
    the launches counted (one more when split)."""
    ring = make_ring(log_n, n_q, K)
    tables = ModulusTables(ring)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    up = tables.mod_up(lvl, sp, alpha)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    B = int(np.prod(batch)) if batch else 1
    for name, kw, _, dst, _ in keyswitch_cases(ring, lvl, sp, alpha, batch):
        tensor = "b" in kw
        a = rand_res((*batch, 2, L, ring.n) if tensor else (*batch, L, ring.n), ring.basis(tuple(lvl)).primes)
        want = ks.keyswitch(tables, a, key, lvl, sp, alpha, **kw)
        p = tables.switch(tuple(lvl) + tuple(sp), dst)
        inner, down, b = kw.get("inner_addend"), kw.get("addend"), kw.get("b")
        g = kw.get("galois", 1)
        launches = []
        for split, cap in ((0, 0), (1, 0), (1, random.choice((1, 3, 7)))):
            got = torch.empty_like(want)
            launches.append(emu.emu_keyswitch(
                _p(a), _p(b), _ll(0 if b is None else 2 * L * ring.n), _p(got), _ll(B), L, K, log_n, _p(up.pre),
                _p(up.ext.mod), _p(ring.psi), _p(ring.psi_inv), _p(up.mats), up.mats.shape[2], _ints(up.bounds),
                len(up.bounds) - 1, _p(key.key_q), _p(key.key_p), key.key_q.shape[2], start, up.digit_start,
                _p(inner), _p(kw.get("c_add")), 0 if inner is None else L, _rows(up.psi_rows), 2,
                ctypes.c_uint(g), _ints(p.drop_rows), len(p.drop_rows), _ints(p.keep_rows), len(dst), _p(p.pre),
                _p(p.b_drop.mod), _p(ring.psi_inv), _p(p.b_dst.mod), _p(ring.psi), _p(p.matrix), _p(p.c_keep),
                _p(p.c_sub), _p(down), 0 if down is None else (2 if down.dim() == a.dim() + 1 else 1),
                _rows(p.psi_inv_drop_rows), _rows(p.psi_dst_rows), split, _ll(cap)))
            expect_equal(got, want, f"emulated keyswitch, {name}, split {split}, cap {cap}", seed)
        assert launches[1] == launches[2] == launches[0] + 1 > 1, launches


def test_divisor(emu, seed):
    """The row maps' division by a launch-time divisor (multiply-high and shift) equals n // d for
    every numerator below 2^31: random ones, and those at the edges where a rounding would show
    (multiples of d and their neighbours, 2^31 - 1), for divisors small, near powers of two and
    large."""
    rnd = random.Random(seed)
    divisors = [1, 2, 3, 5, 7, 11, 12, 48, 60, 127, 128, 129, 1000, 65535, 65536, 65537, (1 << 30) - 1, 1 << 30,
                (1 << 30) + 1, (1 << 31) - 1] + [rnd.randrange(1, 1 << 31) for _ in range(40)]
    for d in divisors:
        n = [0, 1, d - 1, d, d + 1, (1 << 31) - 1, (1 << 31) - 2] + [rnd.randrange(0, 1 << 31) for _ in range(2000)]
        n += [k * d + e for k in (rnd.randrange(1, max(2, (1 << 31) // d)) for _ in range(200)) for e in (-1, 0, 1)]
        n = [v for v in n if 0 <= v < (1 << 31)]
        arr = (ctypes.c_longlong * len(n))(*n)
        q, r = (ctypes.c_longlong * len(n))(), (ctypes.c_longlong * len(n))()
        emu.emu_divide(ctypes.c_longlong(d), arr, ctypes.c_longlong(len(n)), q, r)
        bad = [(v, q[k], r[k]) for k, v in enumerate(n) if (q[k], r[k]) != divmod(v, d)]
        assert not bad, f"d = {d}: {bad[:3]} (numerator, quotient, remainder)"


# at least two rows each: rand_res sets one row to q - 1, a constant row that hides a misplaced
# column (a 1-row case passed with the tiles of a row read shifted by one)
@pytest.mark.parametrize("log_n,L,batch", [(10, 3, (2,)), (11, 2, ()), (12, 5, (2, 2)), (13, 2, ()), (14, 1, (2,)),
                                           (15, 2, ()), (16, 2, ()), (17, 1, (2,))])
def test_emulated_ntt(emu, seed, log_n, L, batch):
    ring = make_ring(log_n, L + 2, 0)
    limbs = random.sample(range(L + 2), L)  # through the row map: L of the ring's limbs, in no order
    b = ring.basis(tuple(range(L)))
    x = rand_res((*batch, L, ring.n), b.primes)
    rows = x.numel() // ring.n
    for inverse, tw, post in [(0, b.psi, None), (1, b.psi_inv, b.n_inv_mont), (1, b.psi_inv, b.n_inv)]:
        want = _ops.intt(x, b.mod, tw, post) if inverse else _ops.ntt(x, b.mod, tw)
        for src in (x, unaligned(x)):
            got = torch.empty_like(x)
            assert emu.emu_ntt(_p(src), _p(got), _ll(rows), L, log_n, _p(b.mod), _p(tw), _p(post), inverse, None) > 0
            expect_equal(got, want, f"emulated {'intt' if inverse else 'ntt'} (offset {src.storage_offset()})", seed)
        y = x.clone()  # in place
        assert emu.emu_ntt(_p(y), _p(y), _ll(rows), L, log_n, _p(b.mod), _p(tw), _p(post), inverse, None) > 0
        expect_equal(y, want, "emulated, in place", seed)
    bm = ring.basis(limbs)
    xm = rand_res((*batch, L, ring.n), bm.primes)
    for inverse, tw in [(0, ring.psi), (1, ring.psi_inv)]:
        post = bm.n_inv_mont if inverse else None
        want = _ops.intt(xm, bm.mod, tw, post, limbs) if inverse else _ops.ntt(xm, bm.mod, tw, limbs)
        got = torch.empty_like(xm)
        assert emu.emu_ntt(_p(xm), _p(got), _ll(rows), L, log_n, _p(bm.mod), _p(tw), _p(post), inverse,
                           _rows(limbs)) > 0
        expect_equal(got, want, f"emulated {'intt' if inverse else 'ntt'}, table rows {limbs}", seed)


def unaligned(x: torch.Tensor) -> torch.Tensor:
    """x's values in a contiguous tensor whose data starts 4 bytes past a 16-byte boundary."""
    buf = torch.empty(x.numel() + 1, dtype=x.dtype)
    y = buf[1:].view(x.shape)
    y.copy_(x)
    return y


@pytest.mark.parametrize("La,Lb,batch,n", [(1, 1, 1, 1024), (3, 17, 2, 4096), (12, 70, 2, 1024), (16, 5, 1, 512),
                                           (17, 9, 2, 1024), (40, 3, 1, 2048), (5, 7, 2, 100), (3, 2, 1, 6),
                                           (9, 130, 1, 520), (8, 4, 3, 1030)])
def test_emulated_bconv(emu, bconv_tc, seed, La, Lb, batch, n):
    pin = ntt_primes(10, 30.9, La)
    pout = ntt_primes(10, 29.5, Lb, exclude=pin)
    x = torch.stack([rand_res((La, n), pin) for _ in range(batch)])
    mat = torch.stack([torch.randint(-(p // 2), p // 2 + 1, (La,), dtype=torch.int32) for p in pout])
    want = _ops.bconv(x, mod_table(pin), mod_table(pout), mat)
    for src in (x, unaligned(x)):
        got = torch.empty_like(want)
        assert emu.emu_bconv(_p(src), _p(got), _ll(batch), La, Lb, _ll(n), _p(mod_table(pin)), _p(mod_table(pout)),
                             _p(mat)) > 0
        expect_equal(got, want, f"emulated bconv La={La} Lb={Lb} n={n} offset {src.storage_offset()}", seed)


@pytest.mark.parametrize("total", [1, 5, 1000, 4099])
def test_emulated_samplers(emu, seed, total):
    key = torch.randint(-(2**31), 2**31 - 1, (8,), dtype=torch.int32)
    stream = random.getrandbits(63)
    primes = ntt_primes(10, 30, 3) + [3, 5]  # small primes: many rejections
    mod = mod_table(primes)
    n = max(1, total // len(primes))
    rows = -(-total // (len(primes) * n))
    want = _ops.sample_uniform(key, stream, mod, rows, n).flatten()
    got = torch.empty_like(want)
    assert emu.emu_sample(0, _p(key), ctypes.c_ulonglong(stream), _p(got), _ll(want.numel()), len(primes), _ll(n),
                          _p(mod)) > 0
    expect_equal(got, want, "emulated sample_uniform", seed)
    for kind, op in [(1, _ops.sample_ternary), (2, _ops.sample_cbd)]:
        want = op(key, stream, total)
        got = torch.empty_like(want)
        assert emu.emu_sample(kind, _p(key), ctypes.c_ulonglong(stream), _p(got), _ll(total), 1, _ll(total), None) > 0
        expect_equal(got, want, f"emulated {op.__name__}", seed)


@pytest.mark.parametrize("log_n,k,base_log,level,batch,n,chunk,min_blocks", [
    (12, 1, 15, 2, 3, 5, 2, 1), (12, 1, 15, 2, 3, 3, 3, 1 << 30), (13, 1, 15, 2, 3, 4, 3, 1),
    (13, 1, 15, 2, 5, 2, 4, 1 << 30), (13, 2, 10, 2, 2, 3, 1, 1), (13, 2, 10, 2, 3, 2, 3, 1 << 30),
    (15, 1, 11, 3, 2, 3, 2, 1), (16, 1, 11, 3, 2, 2, 1, 1)])
def test_emulated_fourier_split_rotation(emu, seed, log_n, k, base_log, level, batch, n, chunk, min_blocks):
    """The Fourier blind rotation of large rings (csrc/cuda/fourier_split_core.cuh: three programs per
    key bit over chunks of the batch) against the CPU op, bit for bit: random torus keys, mixed LUTs,
    zero rotations, k = 2, the batch in chunks; min_blocks 1 takes the largest blocks (several chunks a
    product block, wider inverse tiles), 2^30 the smallest."""
    from fhetorch._tfhe.fft import fft_twiddles
    from fhetorch._tfhe.params import tfhe_primes
    moduli = tfhe_primes()
    q = moduli[0] * moduli[1]
    gen = torch.Generator().manual_seed(seed)
    k1, big_n = k + 1, 1 << log_n
    tw = fft_twiddles(log_n)
    bsk = _ops.tfhe_fft(torch.randint(-(1 << 63), (1 << 63) - 1, (n, k1, level, k1, big_n), generator=gen), tw)
    ct = torch.randint(0, 1 << 62, (batch, n + 1), generator=gen) % q
    ct[::2, 1] = 0  # a key bit whose rotation is zero
    luts = torch.randint(0, 1 << 62, (3, big_n), generator=gen) % q
    idx = torch.randint(0, 3, (batch,), generator=gen)
    want = _ops.tfhe_fourier_blind_rotate(ct, luts, idx, bsk, tw, moduli, base_log, level)
    got = torch.empty_like(want)
    f = emu.emu_fourier_split
    V, LL, I = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int
    f.argtypes = [V, V, V, V, V, V, LL, LL, I, I, I, I, I, LL, LL, LL]
    assert f(_p(ct), _p(luts), _p(idx), _p(bsk), _p(tw), _p(got), batch, 3, n, log_n, k1, base_log, level, q,
             chunk, min_blocks) == chunks_launches(batch, chunk, n)
    expect_equal(got, want, f"emulated Fourier rotation N = 2^{log_n}", seed)
    assert f(_p(ct), _p(luts), _p(idx), _p(bsk), _p(tw), _p(got), batch, 3, n, 11, k1, base_log, level, q, chunk,
             min_blocks) == -1


def chunks_launches(batch, chunk, n):
    """Launches of the large-ring rotation: per chunk the start, three per key bit, the return."""
    return -(-batch // chunk) * (3 * n + 2)
