"""The custom-op contract: every op of csrc/bind/schema.cpp passes torch.library.opcheck
(schema, fake kernel against the real one, autograd registration, AOT dispatch with dynamic
shapes) on the CPU, single and batched, and (marked cuda) on the GPU; the ops that take table
row maps (csrc/table_rows.h) once more with the ring's full tables read through them. A new op
without a case here (the TFHE ops: in tests/_tfhe/test_kernels.py) fails
test_every_op_has_a_case."""
import pathlib
import random

import pytest
import torch

from fhetorch import _ops
from fhetorch._rlwe import keyswitch as ks

from .inputs import make_ring, mod_up_args, rand_key, rand_res, switch_args

OPS = torch.ops.fhetorch


def cases(batch: tuple) -> list:
    """(op name, args) for every op, on fresh random inputs with leading dimensions `batch`."""
    ring = make_ring(10, 6, 2)
    lvl, sp = range(0, 6), range(6, 8)
    bl = ring.basis(tuple(lvl))
    plan = ks.mod_up_tables(ring, lvl, sp, 2)
    ext = plan.ext
    full = (plan.pre, ext.mod, ring.psi, ring.psi_inv, plan.mats, plan.bounds)  # mod_up's, the ring's tables
    key = rand_key(ring, 6, 2, 3)
    n = ring.n
    x = rand_res((*batch, 6, n), bl.primes)
    ct = rand_res((*batch, 2, 6, n), bl.primes)
    d = rand_res((*batch, 3, 8, n), ext.primes)
    c_add = bl.const([random.randrange(q) for q in bl.primes])
    sw = ks.switch_modulus_tables(ring, tuple(range(8)), tuple(range(5)))
    u = rand_res((*batch, 2, 8, n), ring.primes[:8])
    garner = torch.zeros(6, 6, dtype=torch.int32)
    key_words = torch.randint(-(2**31), 2**31 - 1, (8,), dtype=torch.int32)
    return [
        ("ntt", (x, bl.mod, bl.psi)),
        ("ntt", (x, bl.mod, ring.psi, list(lvl))),
        ("intt", (x, bl.mod, bl.psi_inv, bl.n_inv_mont)),
        ("intt", (x, bl.mod, ring.psi_inv, bl.n_inv_mont, list(lvl))),
        ("bconv", (x, bl.mod, ext.mod, torch.zeros(8, 6, dtype=torch.int32))),
        ("add", (x, x[tuple(0 for _ in batch)].contiguous(), bl.mod)),
        ("sub", (x, x, bl.mod)),
        ("mul", (x, x, bl.mod)),
        ("neg", (x, bl.mod)),
        ("axpby", (x, bl.one, x, bl.one, bl.mod)),
        ("mul_const", (x, bl.one, bl.mod)),
        ("lincomb", ([x, x, x], torch.stack([bl.one, c_add, bl.one]), bl.mod)),
        ("lincomb", ([ct] * 17, torch.stack([c_add] * 17), bl.mod, bl.one)),
        ("tensor_product", ([ct], [ct], bl.mod)),
        ("tensor_product", ([ct] * 9, [ct] * 8 + [rand_res((2, 6, n), bl.primes)], bl.mod)),  # two passes
        ("automorphism", (x, 5)),
        ("keyswitch_inner", (d, key.key_q, key.key_p, 0, 0, ext.mod)),
        ("hoisted_mac", (d, ct, [key.key_q, key.key_q], [key.key_p, key.key_p], [1, 5], 0, 0, c_add,
                         [rand_res((8, n), ext.primes)] * 2, [0, 1], [0, 1], 2, ext.mod)),
        ("keyswitch_inner_sum", (rand_res((*batch, 2, 3, 8, n), ext.primes), [key.key_q] * 2, [key.key_p] * 2, [5, 7],
                                 0, 0, rand_res((*batch, 2, 6, n), bl.primes), c_add,
                                 rand_res((*batch, 2, 8, n), ext.primes), ext.mod)),
        ("keyswitch_inner_sum", (rand_res((*batch, 1, 3, 8, n), ext.primes), [key.key_q], [key.key_p], [3], 0, 0,
                                 rand_res((*batch, 1, 6, n), bl.primes), c_add, None, ext.mod)),
        ("mod_up", (x, *mod_up_args(plan))),
        ("mod_up", (x, *full, plan.psi_rows)),
        ("mod_up_keyswitch_inner", (x, *mod_up_args(plan), key.key_q, key.key_p, 0, 0,
                                    rand_res((*batch, 2, 6, n), bl.primes), c_add)),
        ("mod_up_keyswitch_inner", (ct, *mod_up_args(plan), key.key_q, key.key_p, 0, 0, None, c_add, ct)),
        ("mod_up_keyswitch_inner", (ct, *full, key.key_q, key.key_p, 0, 0, None, c_add, ct, plan.psi_rows)),
        ("mod_up_keyswitch_inner", (x, *mod_up_args(plan), key.key_q, key.key_p, 0, 0,
                                    rand_res((*batch, 1, 6, n), bl.primes), c_add, None, None,
                                    rand_res((*batch, 2, 8, n), ext.primes))),
        ("switch_modulus", (u, sw.drop_rows, sw.keep_rows, *switch_args(sw), rand_res((*batch, 5, n), sw.b_dst.primes))),
        ("switch_modulus", (u, sw.drop_rows, sw.keep_rows, sw.pre, sw.b_drop.mod, ring.psi_inv, sw.b_dst.mod, ring.psi,
                            sw.matrix, sw.c_keep, sw.c_sub, None, sw.psi_inv_drop_rows, sw.psi_dst_rows)),
        ("keyswitch", (x, *mod_up_args(plan), key.key_q, key.key_p, 0, 0, None, None, None, None, 5, sw.drop_rows,
                       sw.keep_rows, *switch_args(sw), rand_res((*batch, 5, n), sw.b_dst.primes))),
        ("keyswitch", (ct, *full, key.key_q, key.key_p, 0, 0, None, c_add, ct, plan.psi_rows, 1, sw.drop_rows,
                       sw.keep_rows, sw.pre, sw.b_drop.mod, ring.psi_inv, sw.b_dst.mod, ring.psi, sw.matrix, sw.c_keep,
                       sw.c_sub, None, sw.psi_inv_drop_rows, sw.psi_dst_rows)),
        ("to_rns", (torch.randint(-(2**40), 2**40, (*batch, n)), bl.mod, bl.r2)),
        ("crt_digits", (x, bl.mod, garner)),
        ("sample_uniform", (key_words, 7, bl.mod, 2, n)),
        ("sample_ternary", (key_words, 8, n)),
        ("sample_cbd", (key_words, 9, n)),
    ]


def on(device, args):
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else
                 [t.to(device) for t in a] if isinstance(a, list) and a and isinstance(a[0], torch.Tensor) else a
                 for a in args)


def test_every_op_has_a_case():
    schema_ops = {n.split("::")[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("fhetorch::")}
    # the TFHE ops are opchecked beside their kernel tests (tests/_tfhe/test_kernels.py::test_opcheck)
    tfhe_ops = {n for n in schema_ops if n.startswith("tfhe_")}
    tfhe_cases = (pathlib.Path(__file__).parents[1] / "_tfhe" / "test_kernels.py").read_text()
    assert {n for n in tfhe_ops if f"torch.ops.fhetorch.{n}," not in tfhe_cases} == set(), \
        "a TFHE op lacks an opcheck case in tests/_tfhe/test_kernels.py"
    assert schema_ops - tfhe_ops == {name for name, _ in cases(())}, "an op of csrc/bind/schema.cpp lacks an opcheck case"
    assert schema_ops <= set(_ops.__all__), "an op lacks a wrapper in fhetorch._ops"


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)], ids=["single", "batch2", "batch2x3"])
def test_opcheck_cpu(batch):
    for name, args in cases(batch):
        torch.library.opcheck(getattr(OPS, name).default, args)


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
def test_opcheck_cuda(batch):
    if not _ops.has_cuda():
        pytest.skip("fhetorch built without CUDA kernels")
    for name, args in cases(batch):
        torch.library.opcheck(getattr(OPS, name).default, on("cuda", args))
