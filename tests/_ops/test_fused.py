"""Fused key-switching ops (mod_up, mod_up_keyswitch, switch_modulus), exact against the
compositions of unfused ops they replace (fhetorch._rlwe.keyswitch's *_reference functions,
keyswitch_inner, axpby, add), on random inputs.

* CPU: the ops against the compositions (bit for bit), for rescaling, ModDown, both at once,
  rational rescaling (added primes, src and dst sharing no prime), permuted destinations,
  batched and 3-component inputs, addends; levels whose digits are cut by the level's
  start, one digit, one-limb digits; the evaluator (multiply, relinearize, rotate, hoisted
  rotations) fused against unfused, bit for bit; argument errors; a non-power-of-two N
  raising RuntimeError in-process.
* Tensor-product mode (HMult: tensor product, ModUp, inner product, + P (d0, d1)) against
  tensor_product followed by the composition.
* Host emulation (marked slow, needs nvcc): the CUDA programs of csrc/cuda/keyswitch_core.cuh
  run on the host, step by step, against the CPU ops, N = 2^10 .. 2^17.
* CUDA (marked cuda): GPU against CPU, bit for bit, up to the 48 x 12 benchmark shape, and
  under CUDA graph capture.
Every test draws fresh random inputs (no fixed seed; failures print the seed).
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
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes
from fhetorch._rlwe import ModulusPlans, keyswitch as ks

ops = torch.ops.fhetorch


@pytest.fixture
def seed():
    s = int.from_bytes(os.urandom(4), "little")
    random.seed(s)
    torch.manual_seed(s)
    return s


def rand_res(shape, primes) -> torch.Tensor:
    """Canonical residues of shape (..., L, N), limb l below primes[l]; one row of q - 1."""
    x = torch.empty(shape, dtype=torch.int32)
    for l, q in enumerate(primes):
        x[..., l, :] = torch.randint(0, q, (*shape[:-2], shape[-1]), dtype=torch.int32)
    if x.numel():
        l = random.randrange(len(primes))
        x.view(-1, len(primes), shape[-1])[0, l, :] = primes[l] - 1
    return x


def make_ring(log_n: int, n_q: int, K: int, device="cpu") -> Ring:
    """n_q chain primes (a shuffled mix of ~31-bit and ~29-bit ones), then K special primes."""
    big = largest_ntt_primes(log_n, n_q + K + 2)
    qs = random.sample(big[: n_q // 2 + 2], n_q // 2) + ntt_primes(log_n, 29, n_q - n_q // 2, exclude=big)
    random.shuffle(qs)
    special = [p for p in big if p not in qs][:K]
    return Ring(log_n, qs + special, device)


def mod_up_args(plan):
    e = plan.ext
    return plan.pre, e.mod, e.psi, e.psi_inv, plan.mats, plan.bounds


def rand_key(ring: Ring, n_q: int, K: int, dnum: int):
    class Key:
        key_q = rand_res((dnum, 2, n_q, ring.n), ring.primes[:n_q])
        key_p = rand_res((dnum, 2, K, ring.n), ring.primes[n_q:])

    return Key


def expect_equal(got: torch.Tensor, want: torch.Tensor, what: str, seed: int):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)} (seed {seed})"
    if not torch.equal(got.cpu(), want.cpu()):
        bad = (got.cpu() != want.cpu()).nonzero()
        raise AssertionError(f"{what}: {bad.shape[0]} of {got.numel()} differ, first at {bad[0].tolist()} "
                             f"(seed {seed})")


# (log_n, chain primes, K, alpha, level start, level stop)
MOD_UP_CASES = [
    (4, 6, 2, 2, 0, 6),     # 3 digits
    (5, 6, 2, 2, 1, 6),     # the level's start cuts digit 0
    (3, 7, 3, 3, 2, 7),     # last digit short, first cut
    (4, 5, 5, 5, 0, 5),     # one digit
    (4, 4, 1, 1, 0, 4),     # one-limb digits
    (6, 9, 4, 4, 3, 8),     # a level inside the chain
    (5, 20, 2, 20, 0, 17),  # 17-limb digit (> 16 inputs)
    (10, 12, 3, 4, 0, 12),
]


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_mod_up_matches_composition(seed, log_n, n_q, K, alpha, start, stop):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    a = rand_res((stop - start, ring.n), ring.basis(tuple(lvl)).primes)
    want = ks.mod_up_reference(ModulusPlans(ring), a, lvl, sp, alpha)
    got = _ops.mod_up(a, *mod_up_args(ks.mod_up_plan(ring, lvl, sp, alpha)))
    expect_equal(got, want, "mod_up", seed)
    expect_equal(ks.mod_up(ModulusPlans(ring), a, lvl, sp, alpha), want, "rlwe.mod_up", seed)


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_mod_up_keyswitch_matches_composition(seed, log_n, n_q, K, alpha, start, stop):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_plan(ring, lvl, sp, alpha)
    e = plan.ext
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    a = rand_res((L, ring.n), ring.basis(tuple(lvl)).primes)
    d = ks.mod_up_reference(ModulusPlans(ring), a, lvl, sp, alpha)
    inner = _ops.keyswitch_inner(d, key.key_q, key.key_p, start, start // alpha, e.mod)
    for La in sorted({0, L, L + K, random.randint(1, L + K)}):
        if La:
            addend = rand_res((2, La, ring.n), e.primes[:La])
            c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]])
            b = ring.basis(e.limbs[:La])
            head = _ops.axpby(addend, c_add, inner[:, :La].contiguous(), b.one, b.mod)
            want = torch.cat([head, inner[:, La:]], dim=1)
        else:
            addend = c_add = None
            want = inner
        got = _ops.mod_up_keyswitch(a, *mod_up_args(plan), key.key_q, key.key_p, start, plan.digit_start, addend,
                                    c_add)
        expect_equal(got, want, f"mod_up_keyswitch La={La}", seed)
        got = ks.mod_up_key_switch_inner(ModulusPlans(ring), a, key, lvl, sp, alpha, addend, c_add)
        expect_equal(got, want, f"rlwe.mod_up_key_switch_inner La={La}", seed)


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", MOD_UP_CASES)
def test_tensor_product_mode_matches_composition(seed, log_n, n_q, K, alpha, start, stop):
    """mod_up_keyswitch(x, ..., b=y) == tensor_product, then ModUp of d2 + inner product + d[:2] * c_add."""
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_plan(ring, lvl, sp, alpha)
    e, bl = plan.ext, ring.basis(tuple(lvl))
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    x, y = rand_res((2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    d = _ops.tensor_product(x, y, bl.mod)
    inner = _ops.keyswitch_inner(ks.mod_up_reference(ModulusPlans(ring), d[2], lvl, sp, alpha), key.key_q, key.key_p, start,
                                 start // alpha, e.mod)
    head = _ops.axpby(d[:2].contiguous(), c_add, inner[:, :L].contiguous(), bl.one, bl.mod)
    want = torch.cat([head, inner[:, L:]], dim=1)
    got = _ops.mod_up_keyswitch(x, *mod_up_args(plan), key.key_q, key.key_p, start, plan.digit_start, None, c_add, y)
    expect_equal(got, want, "mod_up_keyswitch(b=...)", seed)
    expect_equal(ks.tensor_key_switch_inner(ModulusPlans(ring), x, y, key, lvl, sp, alpha, c_add), want, "rlwe", seed)


# ring primes: 0..5 a chain, 6, 7 special, 8, 9 extra (as tests/_ops/test_bconv.py)
SWITCH_CASES = [
    ("rescale by one", tuple(range(6)), tuple(range(5))),
    ("rescale by two", tuple(range(6)), tuple(range(4))),
    ("mod down", tuple(range(8)), tuple(range(6))),
    ("mod down + rescale", tuple(range(8)), tuple(range(5))),
    ("mod down at a level", (0, 1, 2, 6, 7), (0, 1, 2)),
    ("permuted dst", tuple(range(6)), (3, 0, 2, 1)),
    ("rational: drop 2 add 1", tuple(range(6)), (0, 1, 2, 3, 8)),
    ("rational: drop 1 add 2", tuple(range(6)), (0, 1, 2, 3, 4, 8, 9)),
    ("rational: added limb first", tuple(range(6)), (8, 0, 1, 2, 3)),
    ("rational: level moves up", tuple(range(6)), (2, 3, 4, 5, 8, 9)),
    ("rational + mod down", tuple(range(8)), (0, 1, 2, 3, 4, 8)),
    ("disjoint, fewer", (0, 1, 2), (8, 9)),
    ("disjoint, more", (0, 1), (3, 4, 5)),
    ("disjoint, one to one", (6,), (9,)),
]


def switch_args(p):
    return (p.pre, p.b_drop.mod, p.b_drop.psi_inv, p.b_dst.mod, p.b_dst.psi, p.matrix, p.c_keep, p.c_sub)


@pytest.mark.parametrize("batch", [(), (2,), (3,), (2, 3)], ids=["single", "ct", "3-component", "batched"])
@pytest.mark.parametrize("name,src,dst", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_switch_modulus_matches_composition(seed, name, src, dst, batch):
    ring = make_ring(random.randint(3, 6), 8, 2)
    p = ks.switch_plan(ring, src, dst)
    x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
    want = ks.switch_modulus_reference(ModulusPlans(ring), x, src, dst)
    got = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p))
    expect_equal(got, want, name, seed)
    expect_equal(ks.switch_modulus(ModulusPlans(ring), x, src, dst), want, "rlwe." + name, seed)
    # addends: (Ld, N) onto the first polynomial, (k, Ld, N) onto the first k
    B = int(np.prod(batch)) if batch else 1
    for k in sorted({1, B}):
        addend = rand_res((k, len(dst), ring.n), p.b_dst.primes)
        flat = want.reshape(B, len(dst), ring.n)
        head = _ops.add(flat[:k].contiguous(), addend, p.b_dst.mod)
        want_add = torch.cat([head, flat[k:]]).reshape(want.shape)
        got = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), addend)
        expect_equal(got, want_add, f"{name} + addend ({k} polys)", seed)
        if k == 1:
            got = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), addend[0])
            expect_equal(got, want_add, f"{name} + addend (Ld, N)", seed)
        if len(batch) <= 1:
            got = ks.switch_modulus(ModulusPlans(ring), x, src, dst, addend=addend)
            expect_equal(got, want_add, f"rlwe.{name} + addend", seed)


def test_switch_modulus_unaligned_and_strided_inputs(seed):
    ring = make_ring(10, 8, 2)
    src, dst = tuple(range(8)), (0, 1, 2, 3, 4, 9)
    p = ks.switch_plan(ring, src, dst)
    x3 = rand_res((3, 8, ring.n), ring.basis(src).primes)
    want = ks.switch_modulus_reference(ModulusPlans(ring), x3[:2], src, dst)
    expect_equal(_ops.switch_modulus(x3[:2], p.drop_rows, p.keep_rows, *switch_args(p)), want, "slice", seed)
    expect_equal(ks.switch_modulus(ModulusPlans(ring), x3[1:], src, dst), ks.switch_modulus_reference(ModulusPlans(ring), x3[1:], src, dst),
                 "offset view", seed)


# --- the evaluator: fused paths against the unfused ones, bit for bit ----------------------
@pytest.fixture
def unfused(monkeypatch):
    """A context manager-free switch: call unfused(True) to route rlwe through the compositions."""
    def set_(on: bool):
        if on:
            monkeypatch.setattr(ks, "fused_ok", lambda ring: False)
        else:
            monkeypatch.undo()
    return set_


def test_evaluator_fused_equals_unfused(ctx_n12, unfused):
    from fhetorch._ckks import evaluator as ev

    ckks = ctx_n12  # a fhetorch.ckks.Context (a CKKSContext) with keys for rotations 5, -3, 7
    n = ckks.params.slots
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    va = torch.complex(torch.rand(n, generator=gen, dtype=torch.float64), torch.rand(n, generator=gen,
                                                                                     dtype=torch.float64))
    a, b = ckks.encrypt_vector(va), ckks.encrypt_vector(va * 0.5)
    ops_ = {
        "multiply": lambda: ev.multiply(ckks, a, b),
        "multiply, no rescale": lambda: ev.multiply(ckks, a, b, rescale_result=False),
        "rotate": lambda: ev.rotate(ckks, a, 5),
        "conjugate": lambda: ev.conjugate(ckks, a),
        "rescale": lambda: ev.rescale(ckks, ev.multiply(ckks, a, b, rescale_result=False)),
        "hoisted": lambda: ev.rotate_hoisted(ckks, a, [5, -3])[-3],
    }
    for name, f in ops_.items():
        fused = f()
        unfused(True)
        plain = f()
        unfused(False)
        assert fused.level == plain.level and fused.scale == plain.scale, name
        assert torch.equal(fused.data.cpu(), plain.data.cpu()), f"{name}: fused and unfused ciphertexts differ"


# --- argument checks ------------------------------------------------------------------------
# --- hoisted_mac: baby-step rotations times diagonals over P*Q (linear transforms) ---------
def hoisted_mac_reference(ring, d, c, keys, gals, start, alpha, c_p, pts, pb, pg, giants, K):
    """The op's definition from unfused ops: u_b per baby step, then sums of pts * u_b."""
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


@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop,babies,giants", [
    (4, 6, 2, 2, 0, 6, 3, 2), (5, 6, 2, 2, 1, 6, 5, 3), (6, 9, 4, 4, 3, 8, 16, 8), (10, 12, 3, 4, 0, 12, 4, 1),
    (5, 12, 2, 2, 1, 12, 13, 5),  # 6 digits and 13 baby steps: the lazy sums fold more than once
])
def test_hoisted_mac_matches_composition(seed, log_n, n_q, K, alpha, start, stop, babies, giants):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L, n = stop - start, ring.n
    e = ks.mod_up_plan(ring, lvl, sp, alpha).ext
    c = rand_res((2, L, n), ring.basis(tuple(lvl)).primes)
    d = ks.mod_up(ModulusPlans(ring), c[1], lvl, sp, alpha)
    dnum = -(-n_q // alpha)
    gals = [1] + [random.randrange(3, 2 * n, 2) for _ in range(babies - 1)]
    random.shuffle(gals)
    keys = [rand_key(ring, n_q, K, dnum) for _ in gals]
    c_p = ring.basis(tuple(lvl)).const([random.randrange(q) for q in ring.basis(tuple(lvl)).primes])
    pairs = [(b, g) for b in range(babies) for g in range(giants) if random.random() < 0.6] or [(0, 0)]
    pts = [rand_res((L + K, n), e.primes) for _ in pairs]
    pb, pg = [b for b, _ in pairs], [g for _, g in pairs]
    want = hoisted_mac_reference(ring, d, c, keys, gals, start, alpha, c_p, pts, pb, pg, giants, K)
    got = _ops.hoisted_mac(d, c, [k.key_q for k in keys], [k.key_p for k in keys], gals, start, start // alpha, c_p,
                           pts, pb, pg, giants, e.mod)
    expect_equal(got, want, f"hoisted_mac ({babies} babies, {giants} giants, {len(pairs)} diagonals)", seed)


def test_hoisted_mac_argument_errors():
    ring = make_ring(4, 4, 2)
    lvl, sp = range(0, 4), range(4, 6)
    e = ks.mod_up_plan(ring, lvl, sp, 2).ext
    c = rand_res((2, 4, 16), ring.primes[:4])
    d = ks.mod_up(ModulusPlans(ring), c[1], lvl, sp, 2)
    key = rand_key(ring, 4, 2, 2)
    pt = rand_res((6, 16), e.primes)
    c_p = ring.basis(tuple(lvl)).one
    args = lambda gals, pb, pg, giants: (d, c, [key.key_q] * len(gals), [key.key_p] * len(gals), gals, 0, 0, c_p,
                                         [pt] * len(pb), pb, pg, giants, e.mod)
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


def test_argument_errors():
    ring = make_ring(4, 6, 2)
    lvl, sp = range(0, 6), range(6, 8)
    plan = ks.mod_up_plan(ring, lvl, sp, 2)
    pre, mod, psi, psi_inv, mats, bounds = mod_up_args(plan)
    a = rand_res((6, ring.n), ring.basis(tuple(lvl)).primes)
    for bad, msg in [([0, 2, 2, 6], "increase"), ([0, 2, 4], "from 0 to L"), ([1, 4, 6], "from 0 to L"),
                     ([0, 6], "alpha_max"), ([0], "2 to")]:
        with pytest.raises(RuntimeError, match=msg):
            ops.mod_up(a, pre, mod, psi, psi_inv, mats, bad)
    with pytest.raises(RuntimeError, match="pre must"):
        ops.mod_up(a, pre[:5].contiguous(), mod, psi, psi_inv, mats, bounds)
    key = rand_key(ring, 6, 2, 3)
    with pytest.raises(RuntimeError, match="digit_start"):
        ops.mod_up_keyswitch(a, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, 0, 1)
    with pytest.raises(RuntimeError, match="go together"):
        ops.mod_up_keyswitch(a, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, 0, 0, a[None, :2])
    ct = torch.stack([a, a])
    with pytest.raises(RuntimeError, match="pass c_add and no addend"):
        ops.mod_up_keyswitch(ct, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, 0, 0, ct, pre, ct)
    with pytest.raises(RuntimeError, match="ciphertexts"):
        ops.mod_up_keyswitch(a, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, 0, 0, None, pre, a)
    p = ks.switch_plan(ring, tuple(range(6)), tuple(range(5)))
    x = rand_res((2, 6, ring.n), ring.basis(tuple(range(6))).primes)
    for drop, keep, msg in [([6], list(range(5)), "drop row"), ([5], [0, 1, 2, 3, -2], "keep row"),
                            ([], list(range(5)), "1 to"), ([5, 4], list(range(5)), "pre must")]:
        with pytest.raises(RuntimeError, match=msg):
            ops.switch_modulus(x, drop, keep, *switch_args(p))
    with pytest.raises(RuntimeError, match="addend"):
        ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), x[:, :5].contiguous().repeat(2, 1, 1))


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


# --- host emulation of the CUDA programs ------------------------------------------------------
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
    for f in ("emu_mod_up", "emu_mod_up_keyswitch", "emu_switch_modulus"):
        getattr(lib, f).restype = ctypes.c_longlong
    return lib


def _p(t):
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def _ints(v):
    return (ctypes.c_int * len(v))(*v)


@pytest.fixture(params=["tiles", "split"])
def ks_kernel(request, monkeypatch):
    """Both CUDA inner-product variants (FHETORCH_KS_KERNEL, read at each call)."""
    monkeypatch.setenv("FHETORCH_KS_KERNEL", request.param)
    return request.param


@pytest.mark.slow
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [
    (10, 8, 3, 3, 1, 8), (11, 6, 2, 2, 0, 6), (12, 9, 4, 4, 2, 9), (13, 40, 2, 20, 3, 40), (10, 4, 1, 1, 0, 4),
    (14, 6, 2, 3, 0, 6), (15, 6, 2, 3, 0, 6), (16, 6, 2, 3, 1, 6), (17, 4, 2, 2, 0, 4),
    (11, 10, 2, 2, 0, 10), (10, 7, 1, 1, 1, 7),  # beta = 5, 6: always the split variant
])
def test_emulated_mod_up(emu, ks_kernel, seed, log_n, n_q, K, alpha, start, stop):
    ring = make_ring(log_n, n_q, K)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan = ks.mod_up_plan(ring, lvl, sp, alpha)
    pre, mod, psi, psi_inv, mats, bounds = mod_up_args(plan)
    beta = len(bounds) - 1
    a = rand_res((L, ring.n), ring.basis(tuple(lvl)).primes)
    want = _ops.mod_up(a, pre, mod, psi, psi_inv, mats, bounds)
    got = torch.empty_like(want)
    assert emu.emu_mod_up(_p(a), _p(got), L, K, log_n, _p(pre), _p(mod), _p(psi), _p(psi_inv), _p(mats),
                          mats.shape[2], _ints(bounds), beta, None) > 0
    expect_equal(got, want, "emulated mod_up", seed)
    # the ring's full tables through the row of each ext limb (what rlwe passes)
    got = torch.empty_like(want)
    assert emu.emu_mod_up(_p(a), _p(got), L, K, log_n, _p(pre), _p(mod), _p(ring.psi), _p(ring.psi_inv), _p(mats),
                          mats.shape[2], _ints(bounds), beta, _ints(plan.psi_rows)) > 0
    expect_equal(got, want, "emulated mod_up, table rows", seed)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    e = plan.ext
    for La in (0, L + K, random.randint(1, L + K)):
        addend = rand_res((2, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        want = _ops.mod_up_keyswitch(a, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, start,
                                     plan.digit_start, addend, c_add)
        got = torch.empty_like(want)
        assert emu.emu_mod_up_keyswitch(_p(a), _p(got), L, K, log_n, _p(pre), _p(mod), _p(psi), _p(psi_inv),
                                        _p(mats), mats.shape[2], _ints(bounds), beta, _p(key.key_q), _p(key.key_p),
                                        n_q, start, plan.digit_start, _p(addend), _p(c_add), La, None, None) > 0
        expect_equal(got, want, f"emulated mod_up_keyswitch La={La}", seed)
        got = torch.empty_like(want)
        assert emu.emu_mod_up_keyswitch(_p(a), _p(got), L, K, log_n, _p(pre), _p(mod), _p(ring.psi),
                                        _p(ring.psi_inv), _p(mats), mats.shape[2], _ints(bounds), beta,
                                        _p(key.key_q), _p(key.key_p), n_q, start, plan.digit_start, _p(addend),
                                        _p(c_add), La, None, _ints(plan.psi_rows)) > 0
        expect_equal(got, want, f"emulated mod_up_keyswitch La={La}, table rows", seed)
    # tensor-product mode
    bl = ring.basis(tuple(lvl))
    x, y = rand_res((2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    want = _ops.mod_up_keyswitch(x, pre, mod, psi, psi_inv, mats, bounds, key.key_q, key.key_p, start,
                                 plan.digit_start, None, c_add, y)
    got = torch.empty_like(want)
    assert emu.emu_mod_up_keyswitch(_p(x), _p(got), L, K, log_n, _p(pre), _p(mod), _p(ring.psi), _p(ring.psi_inv),
                                    _p(mats),
                                    mats.shape[2], _ints(bounds), beta, _p(key.key_q), _p(key.key_p), n_q, start,
                                    plan.digit_start, None, _p(c_add), 0, _p(y), _ints(plan.psi_rows)) > 0
    expect_equal(got, want, "emulated mod_up_keyswitch, tensor-product mode", seed)


@pytest.mark.slow
@pytest.mark.parametrize("log_n,src,dst,batch,Ba", [
    (10, tuple(range(6)), tuple(range(5)), (2,), 0),
    (11, tuple(range(8)), (0, 1, 2, 3, 4, 8), (3,), 2),
    (12, tuple(range(6)), (8, 0, 1, 2, 3), (2, 3), 1),
    (10, tuple(range(6)), (3, 0, 2, 1), (), 0),
    (13, (0, 1, 2), (8, 9), (2,), 2),
    (10, tuple(range(26)), tuple(range(5)), (2,), 0),  # 21 dropped: the > 16-input BConv
    (17, tuple(range(4)), (0, 1, 2, 5), (1,), 1),
])
def test_emulated_switch_modulus(emu, seed, log_n, src, dst, batch, Ba):
    ring = make_ring(log_n, max(max(src), max(dst)) + 1, 0)
    p = ks.switch_plan(ring, src, dst)
    x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
    B = int(np.prod(batch)) if batch else 1
    addend = rand_res((Ba, len(dst), ring.n), p.b_dst.primes) if Ba else None
    want = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, *switch_args(p), addend)
    got = torch.empty_like(want)
    assert emu.emu_switch_modulus(_p(x), _p(got), ctypes.c_longlong(B), len(src), log_n, _ints(p.drop_rows), len(p.drop_rows),
                                  _ints(p.keep_rows), len(dst), *[_p(t) for t in switch_args(p)], _p(addend),
                                  ctypes.c_longlong(Ba), None, None) > 0
    expect_equal(got, want, "emulated switch_modulus", seed)
    # the ring's full tables through the rows of the dropped and destination limbs
    pre, mod_drop, _, mod_dst, _, mat, c_keep, c_sub = switch_args(p)
    got = torch.empty_like(want)
    assert emu.emu_switch_modulus(_p(x), _p(got), ctypes.c_longlong(B), len(src), log_n, _ints(p.drop_rows), len(p.drop_rows),
                                  _ints(p.keep_rows), len(dst), _p(pre), _p(mod_drop), _p(ring.psi_inv), _p(mod_dst),
                                  _p(ring.psi), _p(mat), _p(c_keep), _p(c_sub), _p(addend), ctypes.c_longlong(Ba),
                                  _ints(p.psi_inv_drop_rows), _ints(p.psi_dst_rows)) > 0
    expect_equal(got, want, "emulated switch_modulus, table rows", seed)


# --- CUDA: GPU against CPU ------------------------------------------------------------------------
GPU = "cuda"


def _gpu_ok():
    return torch.cuda.is_available() and _ops.has_cuda()


@pytest.mark.cuda
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [
    (10, 8, 3, 3, 1, 8), (12, 9, 4, 4, 2, 9), (13, 40, 2, 20, 3, 40), (11, 4, 1, 1, 0, 4),
    (16, 48, 12, 12, 0, 48), (16, 24, 12, 12, 0, 24), (16, 47, 12, 12, 4, 47), (17, 6, 2, 3, 0, 6),
    (12, 10, 2, 2, 0, 10),  # beta = 5: always the split variant
])
def test_cuda_mod_up(ks_kernel, seed, log_n, n_q, K, alpha, start, stop):
    if not _gpu_ok():
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(log_n, n_q, K)
    gring = Ring(log_n, ring.primes, GPU)
    lvl, sp = range(start, stop), range(n_q, n_q + K)
    L = stop - start
    plan, gplan = ks.mod_up_plan(ring, lvl, sp, alpha), ks.mod_up_plan(gring, lvl, sp, alpha)
    a = rand_res((L, ring.n), ring.basis(tuple(lvl)).primes)
    want = _ops.mod_up(a, *mod_up_args(plan))
    expect_equal(_ops.mod_up(a.to(GPU), *mod_up_args(gplan)), want, "cuda mod_up", seed)
    key = rand_key(ring, n_q, K, -(-n_q // alpha))
    gkey = type("K", (), {"key_q": key.key_q.to(GPU), "key_p": key.key_p.to(GPU)})
    e = plan.ext
    for La in (0, L, L + K):
        addend = rand_res((2, La, ring.n), e.primes[:La]) if La else None
        c_add = ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]) if La else None
        want = ks.mod_up_key_switch_inner(ModulusPlans(ring), a, key, lvl, sp, alpha, addend, c_add)
        got = ks.mod_up_key_switch_inner(ModulusPlans(gring), a.to(GPU), gkey, lvl, sp, alpha,
                                         None if addend is None else addend.to(GPU),
                                         None if c_add is None else c_add.to(GPU))
        expect_equal(got, want, f"cuda mod_up_keyswitch La={La}", seed)
    bl = ring.basis(tuple(lvl))
    x, y = rand_res((2, L, ring.n), bl.primes), rand_res((2, L, ring.n), bl.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    want = ks.tensor_key_switch_inner(ModulusPlans(ring), x, y, key, lvl, sp, alpha, c_add)
    got = ks.tensor_key_switch_inner(ModulusPlans(gring), x.to(GPU), y.to(GPU), gkey, lvl, sp, alpha, c_add.to(GPU))
    expect_equal(got, want, "cuda tensor-product mode", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("log_n", [10, 12, 16])
@pytest.mark.parametrize("name,src,dst", SWITCH_CASES, ids=[c[0] for c in SWITCH_CASES])
def test_cuda_switch_modulus(seed, log_n, name, src, dst):
    if not _gpu_ok():
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(log_n, 8, 2)
    gring = Ring(log_n, ring.primes, GPU)
    for batch in [(2,), (3,), (2, 3)]:
        x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
        addend = rand_res((2, len(dst), ring.n), ring.basis(dst).primes)
        want = ks.switch_modulus(ModulusPlans(ring), x, src, dst, addend=addend)
        got = ks.switch_modulus(ModulusPlans(gring), x.to(GPU), src, dst, addend=addend.to(GPU))
        expect_equal(got, want, f"cuda {name} batch={batch}", seed)


@pytest.mark.cuda
def test_cuda_benchmark_shape_switch(seed):
    """HMult's switch at 48 x 12: (2, 60, N) from Q_48 P to Q_46."""
    if not _gpu_ok():
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(16, 48, 12)
    gring = Ring(16, ring.primes, GPU)
    src, dst = tuple(range(60)), tuple(range(46))
    x = rand_res((2, 60, ring.n), ring.primes)
    addend = rand_res((2, 46, ring.n), ring.basis(dst).primes)
    want = ks.switch_modulus(ModulusPlans(ring), x, src, dst, addend=addend)
    expect_equal(ks.switch_modulus(ModulusPlans(gring), x.to(GPU), src, dst, addend=addend.to(GPU)), want, "48x12", seed)
    expect_equal(ks.switch_modulus_reference(ModulusPlans(gring), x.to(GPU), src, dst),
                 ks.switch_modulus_reference(ModulusPlans(ring), x, src, dst), "48x12 reference", seed)


@pytest.mark.cuda
def test_cuda_small_n_falls_back_and_op_refuses(seed):
    if not _gpu_ok():
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(8, 6, 2)
    gring = Ring(8, ring.primes, GPU)
    assert not ks.fused_ok(gring)
    lvl, sp = range(0, 6), range(6, 8)
    a = rand_res((6, ring.n), ring.basis(tuple(lvl)).primes)
    expect_equal(ks.mod_up(ModulusPlans(gring), a.to(GPU), lvl, sp, 2), ks.mod_up(ModulusPlans(ring), a, lvl, sp, 2), "fallback", seed)
    with pytest.raises(RuntimeError, match="2\\^10 <= N"):
        _ops.mod_up(a.to(GPU), *mod_up_args(ks.mod_up_plan(gring, lvl, sp, 2)))


@pytest.mark.cuda
def test_cuda_graph_capture(ks_kernel, seed):
    """The fused ops are capturable: a replayed graph gives the eager result."""
    if not _gpu_ok():
        pytest.skip("fhetorch built without CUDA kernels")
    ring = make_ring(12, 9, 3)
    gring = Ring(12, ring.primes, GPU)
    lvl, sp = range(0, 9), range(9, 12)
    key = rand_key(ring, 9, 3, 3)
    gkey = type("K", (), {"key_q": key.key_q.to(GPU), "key_p": key.key_p.to(GPU)})
    a = rand_res((9, ring.n), ring.basis(tuple(lvl)).primes).to(GPU)
    ext = tuple(lvl) + tuple(sp)

    def f():
        u = ks.mod_up_key_switch_inner(ModulusPlans(gring), a, gkey, lvl, sp, 3)
        return ks.switch_modulus(ModulusPlans(gring), u, ext, tuple(range(8)))

    want = f()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = f()
    a.copy_(rand_res((9, ring.n), ring.basis(tuple(lvl)).primes).to(GPU))
    g.replay()
    torch.cuda.synchronize()
    expect_equal(out, f(), "graph replay on new input", seed)
    assert not torch.equal(out, want)
