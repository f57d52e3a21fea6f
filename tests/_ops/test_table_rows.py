"""Table row maps (csrc/table_rows.h): ntt, intt, mod_up and mod_up_keyswitch_inner take
psi_rows, switch_modulus psi_inv_drop_rows and psi_dst_rows; limb l then reads row rows[l] of
any (R, N) table, so the ring's full tables serve every level without per-level copies.

* With a map every op equals, bit for bit, the same op on the tables gathered for its limbs,
  single and batched (leading dimensions in one call).
* Bad maps (wrong length, a row outside the table, too many limbs or rows) and full tables
  without a map are refused with one message on every device.
* CUDA (marked cuda): the GPU through the maps against the CPU, bit for bit, on the two-phase
  and the stage-by-stage NTT sizes.
opcheck with maps: tests/_ops/test_opcheck.py; the CUDA programs through maps on the host:
tests/_ops/test_emulated.py. Every test draws fresh random inputs (failures print the seed).
"""
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring
from fhetorch._rlwe import keyswitch as ks

from .inputs import expect_equal, make_ring, rand_key, rand_res

GPU = "cuda"
DEVICES = ["cpu", pytest.param(GPU, marks=pytest.mark.cuda)]


def _gathered(ring, limbs):
    """The ring's psi and psi_inv rows of `limbs`, as dense (len(limbs), N) tables."""
    sel = torch.tensor(list(limbs), device=ring.psi.device)
    return ring.psi[sel].contiguous(), ring.psi_inv[sel].contiguous()


def _on(device, *ts):
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in ts]


def _skip_without_cuda():
    if not (torch.cuda.is_available() and _ops.has_cuda()):
        pytest.skip("fhetorch built without CUDA kernels")


def _ntt_case(log_n, batch):
    """A ring of 10 primes and x over 5 of its limbs in no order: (ring, limbs, mod, post, x)."""
    ring = make_ring(log_n, 7, 3)
    limbs = [5, 6, 1, 8, 0]
    sel = torch.tensor(limbs)
    x = rand_res((*batch, len(limbs), ring.n), [ring.primes[i] for i in limbs])
    return ring, limbs, ring.mod[sel].contiguous(), ring.n_inv_mont[sel].contiguous(), x


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
@pytest.mark.parametrize("log_n", [8, 10])  # 8: outside the two-phase sizes
def test_ntt_with_table_rows(seed, log_n, batch):
    ring, limbs, mod, post, x = _ntt_case(log_n, batch)
    psi, psi_inv = _gathered(ring, limbs)
    expect_equal(_ops.ntt(x, mod, ring.psi, limbs), _ops.ntt(x, mod, psi), "ntt", seed)
    expect_equal(_ops.intt(x, mod, ring.psi_inv, post, limbs), _ops.intt(x, mod, psi_inv, post), "intt", seed)
    # the identity map on the limbs' own (L, N) tables is the op without a map
    expect_equal(_ops.ntt(x, mod, psi, range(len(limbs))), _ops.ntt(x, mod, psi), "identity map", seed)


def _mod_up_inputs(ring, plan, key, batch) -> dict:
    """Random inputs of mod_up and of every mode of mod_up_keyswitch_inner, with the plan's
    tensors and the key (CPU tensors)."""
    bl, e = ring.basis(plan.limbs), plan.ext
    L, n = len(bl), ring.n
    La = random.randint(1, len(e))
    return {
        "a": rand_res((*batch, L, n), bl.primes), "x": rand_res((*batch, 2, L, n), bl.primes),
        "y": rand_res((2, L, n), bl.primes), "addend": rand_res((*batch, 2, La, n), e.primes[:La]),
        "c_add": ring.basis(e.limbs[:La]).const([random.randrange(q) for q in e.primes[:La]]),
        "c_lvl": bl.const([random.randrange(q) for q in bl.primes]),
        "pre": plan.pre, "mod": e.mod, "mats": plan.mats, "key_q": key.key_q, "key_p": key.key_p,
    }


def _mod_up_outputs(plan, t: dict, psi, psi_inv, rows) -> dict:
    """{name: output} of mod_up and every mode of mod_up_keyswitch_inner on inputs t, with the
    tables (psi, psi_inv) read through `rows`."""
    head = (t["pre"], t["mod"], psi, psi_inv, t["mats"], plan.bounds)

    def inner(u, addend=None, c_add=None, b=None):
        return _ops.mod_up_keyswitch_inner(u, *head, t["key_q"], t["key_p"], plan.limbs.start,
                                           plan.digit_start, addend, c_add, b, rows)

    return {"mod_up": _ops.mod_up(t["a"], *head, rows), "mod_up_keyswitch_inner": inner(t["a"]),
            "mod_up_keyswitch_inner + addend": inner(t["a"], t["addend"], t["c_add"]),
            "mod_up_keyswitch_inner, tensor product": inner(t["x"], None, t["c_lvl"], t["y"])}


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("log_n,n_q,K,alpha,start,stop", [(10, 8, 3, 3, 1, 8), (11, 9, 2, 4, 2, 7), (10, 5, 1, 1, 0, 5)])
def test_mod_up_with_table_rows(seed, log_n, n_q, K, alpha, start, stop, batch):
    ring = make_ring(log_n, n_q, K)
    plan = ks.mod_up_tables(ring, range(start, stop), range(n_q, n_q + K), alpha)
    t = _mod_up_inputs(ring, plan, rand_key(ring, n_q, K, -(-n_q // alpha)), batch)
    got = _mod_up_outputs(plan, t, ring.psi, ring.psi_inv, plan.psi_rows)
    want = _mod_up_outputs(plan, t, *_gathered(ring, plan.psi_rows), None)
    for name in want:
        expect_equal(got[name], want[name], name, seed)


@pytest.mark.parametrize("src,dst,batch", [(tuple(range(1, 8)), tuple(range(3, 6)), (3,)),
                                           ((2, 3, 4, 9, 10), (0, 1, 2, 3), (2, 2)),
                                           (tuple(range(8)) + (9, 10), tuple(range(2, 6)), ())])
def test_switch_modulus_with_table_rows(seed, src, dst, batch):
    ring = make_ring(10, 9, 2)
    p = ks.switch_modulus_tables(ring, src, dst)
    x = rand_res((*batch, len(src), ring.n), ring.basis(src).primes)
    addend = rand_res((*batch[:-1], min(2, batch[-1]) if batch else 1, len(dst), ring.n), p.b_dst.primes)
    if not batch:
        addend = addend[0]
    head = (x, p.drop_rows, p.keep_rows, p.pre, p.b_drop.mod)
    tail = (p.matrix, p.c_keep, p.c_sub, addend)
    want = _ops.switch_modulus(*head, _gathered(ring, p.psi_inv_drop_rows)[1], p.b_dst.mod,
                               _gathered(ring, p.psi_dst_rows)[0], *tail)
    got = _ops.switch_modulus(*head, ring.psi_inv, p.b_dst.mod, ring.psi, *tail, p.psi_inv_drop_rows, p.psi_dst_rows)
    expect_equal(got, want, "switch_modulus", seed)
    # one map alone: the other table dense
    got = _ops.switch_modulus(*head, ring.psi_inv, p.b_dst.mod, _gathered(ring, p.psi_dst_rows)[0], *tail,
                              p.psi_inv_drop_rows, None)
    expect_equal(got, want, "switch_modulus, psi_inv_drop_rows only", seed)


@pytest.mark.parametrize("dev", DEVICES)
def test_bad_table_rows_are_refused(dev):
    if dev == GPU:
        _skip_without_cuda()
    ring = make_ring(10, 6, 2)
    plan = ks.mod_up_tables(ring, range(1, 6), range(6, 8), 3)
    a = rand_res((5, ring.n), ring.basis(range(1, 6)).primes)
    args = _on(dev, a, plan.pre, plan.ext.mod, ring.psi, ring.psi_inv, plan.mats, plan.bounds)
    rows = plan.psi_rows
    with pytest.raises(RuntimeError, match="fhetorch.mod_up: psi_ext row 8 outside \\[0, 8\\)"):
        _ops.mod_up(*args, rows[:-1] + [8])
    with pytest.raises(RuntimeError, match="psi_ext row -1 outside"):
        _ops.mod_up(*args, [-1] + rows[1:])
    with pytest.raises(RuntimeError, match="psi_ext's rows must list one table row per limb \\(7\\)"):
        _ops.mod_up(*args, rows[:-1])
    with pytest.raises(RuntimeError, match="psi_ext must be \\(7, N\\)"):
        _ops.mod_up(*args)  # the full tables without a map: the shape says which rows
    with pytest.raises(RuntimeError, match="psi_inv_ext must have psi_ext's shape"):
        _ops.mod_up(*args[:4], args[4][:7].contiguous(), *args[5:], rows)
    key = rand_key(ring, 6, 2, 2)
    with pytest.raises(RuntimeError, match="fhetorch.mod_up_keyswitch_inner: psi_ext row 9 outside"):
        _ops.mod_up_keyswitch_inner(*args, *_on(dev, key.key_q, key.key_p), 1, plan.digit_start,
                                    psi_rows=rows[:-1] + [9])
    p = ks.switch_modulus_tables(ring, tuple(range(6)), tuple(range(4)))
    x = rand_res((2, 6, ring.n), ring.basis(range(6)).primes)
    sw = _on(dev, x, p.drop_rows, p.keep_rows, p.pre, p.b_drop.mod, ring.psi_inv, p.b_dst.mod, ring.psi, p.matrix,
             p.c_keep, p.c_sub)
    with pytest.raises(RuntimeError, match="psi_inv_drop's rows must list one table row per limb \\(2\\)"):
        _ops.switch_modulus(*sw, None, [4], p.psi_dst_rows)
    with pytest.raises(RuntimeError, match="psi_dst row 8 outside"):
        _ops.switch_modulus(*sw, None, p.psi_inv_drop_rows, [0, 1, 2, 8])
    with pytest.raises(RuntimeError, match="psi_dst must be \\(4, N\\)"):
        _ops.switch_modulus(*sw, None, p.psi_inv_drop_rows, None)
    # ntt: at most 256 limbs and 32768 table rows under a map (N = 2 keeps the tables small)
    mod = _on(dev, torch.tensor([[12289, -12287]], dtype=torch.int32).expand(257, 2).contiguous())[0]
    y, tw = _on(dev, torch.zeros(257, 2, dtype=torch.int32), torch.zeros(32769, 2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="fhetorch.ntt: psi's rows must list one table row per limb \\(257\\), at most 256"):
        _ops.ntt(y, mod, tw[:300], range(257))
    with pytest.raises(RuntimeError, match="fhetorch.intt: psi_inv must be \\(R, N\\) with R <= 32768"):
        _ops.intt(y[:1], mod[:1], tw, mod[:1, 0].contiguous(), [0])
    with pytest.raises(RuntimeError, match="fhetorch.ntt: psi row 300 outside \\[0, 300\\)"):
        _ops.ntt(y[:2], mod[:2], tw[:300], [0, 300])


# --- CUDA: GPU against CPU ------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("log_n", [12, 16])
def test_table_rows_cuda_matches_cpu(seed, log_n, batch):
    """The fused CUDA programs through the maps, bit for bit against the CPU."""
    _skip_without_cuda()
    ring = make_ring(log_n, 9, 3)
    gring = Ring(log_n, ring.primes, GPU)
    plan = ks.mod_up_tables(ring, range(2, 8), range(9, 12), 3)
    t = _mod_up_inputs(ring, plan, rand_key(ring, 9, 3, 3), batch)
    want = _mod_up_outputs(plan, t, ring.psi, ring.psi_inv, plan.psi_rows)
    got = _mod_up_outputs(plan, {k: v.to(GPU) for k, v in t.items()}, gring.psi, gring.psi_inv, plan.psi_rows)
    for name in want:
        expect_equal(got[name], want[name], f"cuda {name}", seed)
    src, dst = tuple(range(2, 8)) + (9, 10, 11), tuple(range(3, 6))
    p = ks.switch_modulus_tables(ring, src, dst)
    x = rand_res((*batch, 2, 9, ring.n), ring.basis(src).primes)
    tabs = (p.pre, p.b_drop.mod, p.b_dst.mod, p.matrix, p.c_keep, p.c_sub)
    want = _ops.switch_modulus(x, p.drop_rows, p.keep_rows, tabs[0], tabs[1], ring.psi_inv, tabs[2], ring.psi,
                               *tabs[3:], None, p.psi_inv_drop_rows, p.psi_dst_rows)
    g = _on(GPU, *tabs)
    got = _ops.switch_modulus(x.to(GPU), p.drop_rows, p.keep_rows, g[0], g[1], gring.psi_inv, g[2], gring.psi, *g[3:],
                              None, p.psi_inv_drop_rows, p.psi_dst_rows)
    expect_equal(got, want, "cuda switch_modulus", seed)


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (2, 3)])
@pytest.mark.parametrize("log_n", [8, 12, 16])  # 8: the stage-by-stage kernels
def test_ntt_table_rows_cuda_matches_cpu(seed, log_n, batch):
    _skip_without_cuda()
    ring, limbs, mod, post, x = _ntt_case(log_n, batch)
    gring = Ring(log_n, ring.primes, GPU)
    want = _ops.ntt(x, mod, ring.psi, limbs)
    expect_equal(_ops.ntt(x.to(GPU), mod.to(GPU), gring.psi, limbs), want, "cuda ntt", seed)
    want = _ops.intt(x, mod, ring.psi_inv, post, limbs)
    expect_equal(_ops.intt(x.to(GPU), mod.to(GPU), gring.psi_inv, post.to(GPU), limbs), want, "cuda intt", seed)
