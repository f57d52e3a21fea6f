"""The LWE key switch on int8 tensor cores (keyswitch_lwe_ciphertext's "tensor" method: the ops
tfhe_keyswitch_digits and tfhe_keyswitch_combine around torch._int_mm by the key's byte planes) on
the CPU, bit for bit against the GEMM kernel (op tfhe_keyswitch, the "gemm" method) and the
pure-Python reference, on fresh random keys and ciphertexts: preset shapes, batch shapes, chunked
batches, key residues and digits at their extremes, int32 sums at their bound, the fallback to the
GEMM where the bound or the digits' size forbid the tensor path. CPU = CUDA: test_cuda_parity.py."""
import copy
import pickle
import warnings
from dataclasses import replace

import pytest
import torch

import fhetorch as fhe
import fhetorch._ops as ops
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import serialization as tfhe_serialization
from fhetorch._tfhe.entities import LweKeyswitchKey
from fhetorch._tfhe.modular import Modulus
from fhetorch.errors import ParameterError

from . import reference as ref
from .inputs import MODULI, Q, ksk_kernel_form, rand_mod_q

MQ = Modulus(MODULI)


def _key(gen, n_in, n_out, base_log, level):
    ksk = rand_mod_q(gen, n_in, level, n_out + 1)
    return ksk, LweKeyswitchKey(ksk_kernel_form(ksk), base_log, level)


def _both_methods(key, ct):
    """The tensor method's output, checked equal to the GEMM kernel's bit for bit."""
    assert alg.keyswitch_method(key) == "tensor"
    got = alg.keyswitch_lwe_ciphertext(key, ct, MQ, method="tensor")
    want = ops.tfhe_keyswitch(ct.contiguous(), key.data, MODULI, key.base_log, key.level)
    assert got.shape == (*ct.shape[:-1], key.output_dimension + 1)
    assert torch.equal(got, want)
    return got



def _masks_with_digits(digit: int, base_log: int, level: int, count: int) -> torch.Tensor:
    """count masks a mod q whose every gadget digit is `digit` (in [-B/2, B/2)): round(a B^level / q)
    = sum_j digit B^j mod B^level."""
    bits = base_log * level
    v = sum(digit << (base_log * j) for j in range(level)) % (1 << bits)
    a = (v * Q + (1 << (bits - 1))) >> bits  # round(v q / 2^bits): switches back to v exactly
    return torch.full((count,), a, dtype=torch.int64)


# (n_in, n_out, base_log, level): tfhe-4bit-p128, tfhe-4bit, tfhe-2bit, the toy presets' key switch,
# base_log 8 (digits down to -128), an n_in level not a multiple of 8 (padded K)
SHAPES = [(2048, 918, 4, 4), (2048, 833, 3, 5), (2048, 747, 4, 3), (1024, 32, 4, 6), (300, 20, 8, 2),
          (37, 50, 3, 5)]


@pytest.mark.parametrize("n_in,n_out,base_log,level", SHAPES)
def test_tensor_keyswitch_equals_gemm_and_reference(gen, n_in, n_out, base_log, level):
    """Batch shapes (1,), (3,), (17,), (2, 3) and a single ciphertext, each its own tensor key switch,
    against one GEMM call over them all (the GEMM's batches are checked in test_keyswitch.py)."""
    ksk, key = _key(gen, n_in, n_out, base_log, level)
    shapes = [(1,), (3,), (17,), (2, 3), ()]
    cts = [rand_mod_q(gen, *shape, n_in + 1) for shape in shapes]
    want = ops.tfhe_keyswitch(torch.cat([c.reshape(-1, n_in + 1) for c in cts]), key.data, MODULI, base_log, level)
    got = [alg.keyswitch_lwe_ciphertext(key, c, MQ) for c in cts]  # the default method: tensor
    assert alg.keyswitch_method(key) == "tensor"
    assert [tuple(g.shape) for g in got] == [(*shape, n_out + 1) for shape in shapes]
    assert torch.equal(torch.cat([g.reshape(-1, n_out + 1) for g in got]), want)
    cols = sorted({0, 1, n_out // 2, n_out - 1, n_out})  # the body last
    assert got[-1][cols].tolist() == ref.keyswitch_columns(cts[-1].tolist(), ksk, Q, base_log, level, cols)


def test_tensor_keyswitch_matches_the_whole_reference(gen):
    ksk, key = _key(gen, 40, 12, 4, 3)
    ct = rand_mod_q(gen, 5, 41)
    got = _both_methods(key, ct)
    for b in range(5):
        assert got[b].tolist() == ref.keyswitch(ct[b].tolist(), ksk.tolist(), Q, 4, 3)


def test_key_residues_at_their_extremes(gen):
    """Residues 0, +-1, the centring boundaries (q_l -+ 1) / 2 and those whose signed bytes are -128 or
    127, on both primes, against digits that hit -B/2 and B/2 - 1."""
    n_in, n_out, base_log, level = 64, 30, 4, 4
    kk = torch.empty(n_in, level, 2, n_out + 1, dtype=torch.int32)
    for lane, q in enumerate(MODULI):
        edge = torch.tensor([0, 1, q - 1, (q - 1) // 2, (q + 1) // 2, 127, 128, 255, 256, q - 128, q - 129,
                             (1 << 24) + 128, q - (1 << 24) - 128, (q - 1) // 2 - 128], dtype=torch.int32)
        idx = torch.randint(0, len(edge), (n_in, level, n_out + 1), generator=gen)
        kk[:, :, lane] = edge[idx]
    key = LweKeyswitchKey(kk.contiguous(), base_log, level)
    half = 1 << (base_log - 1)
    ct = rand_mod_q(gen, 4, n_in + 1)
    ct[0, :n_in] = _masks_with_digits(-half, base_log, level, n_in)
    ct[1, :n_in] = _masks_with_digits(half - 1, base_log, level, n_in)
    ct[2, : n_in // 2] = _masks_with_digits(-half, base_log, level, n_in // 2)
    ct[3, :6] = torch.tensor([0, 1, Q - 1, Q // 2, Q // 2 + 1, (Q + 1) // 4])
    digits = ops.tfhe_decompose(ct[:2, :n_in].contiguous(), MODULI, base_log, level)
    assert (digits[0] == -half).all() and (digits[1] == half - 1).all()
    _both_methods(key, ct)
    planes = alg.keyswitch_byte_planes(key, MQ)
    assert planes.min() == -128 and planes.max() == 127


def test_byte_planes_recompose_the_centred_key(gen):
    n_in, n_out, level = 50, 9, 3
    _, key = _key(gen, n_in, n_out, 4, level)
    planes = alg.keyswitch_byte_planes(key, MQ)
    k8 = (n_in * level + 7) // 8 * 8
    assert planes.dtype == torch.int8 and planes.shape == (8 * (n_out + 1), k8)
    assert not planes[:, n_in * level:].any()  # the padding columns
    p = planes[:, : n_in * level].to(torch.int64).view(n_out + 1, 2, 4, n_in * level)
    r = sum(p[:, :, j] << (8 * j) for j in range(4))  # (c, l, t)
    q = torch.tensor(MODULI).view(1, 2, 1)
    assert ((r > -q / 2) & (r <= q / 2)).all()
    residues = key.data.view(n_in * level, 2, n_out + 1).permute(2, 1, 0).to(torch.int64)
    assert torch.equal(r % q, residues)
    assert alg.keyswitch_byte_planes(key, MQ) is planes  # built once, kept on the key


def test_int32_sums_at_their_bound(gen):
    """base_log 8 and n_in level = 131068: the bound 2^7 128 131068 = 2^31 - 2^16 allows the tensor
    path; digits all -128 against key residues 128 (low byte -128) make the first byte plane's sums
    reach it. One more mask and the bound passes 2^31: the GEMM runs."""
    n_in, n_out, base_log, level = 18724, 3, 8, 7
    kk = torch.full((n_in, level, 2, n_out + 1), 128, dtype=torch.int32)
    for lane, q in enumerate(MODULI):  # coefficient 0 random
        kk[:, :, lane, 0] = torch.randint(0, q, (n_in, level), generator=gen, dtype=torch.int32)
    key = LweKeyswitchKey(kk, base_log, level)
    assert alg.keyswitch_sum_bound(key) == (1 << 31) - (1 << 16)
    ct = rand_mod_q(gen, 2, n_in + 1)
    ct[0, :n_in] = _masks_with_digits(-128, base_log, level, n_in)
    assert (ops.tfhe_decompose(ct[0, :n_in].contiguous(), MODULI, base_log, level) == -128).all()
    _both_methods(key, ct)
    digits = ops.tfhe_keyswitch_digits(ct, MODULI, base_log, level, 2)
    sums = torch._int_mm(digits, alg.keyswitch_byte_planes(key, MQ).t())
    assert sums[0, 8 * 1].item() == 128 * 128 * n_in * level  # coefficient 1, prime 0, byte 0
    wide = LweKeyswitchKey(torch.zeros(n_in + 1, level, 2, n_out + 1, dtype=torch.int32), base_log, level)
    assert alg.keyswitch_sum_bound(wide) >= 1 << 31
    assert alg.keyswitch_method(wide) == alg.keyswitch_method(wide, "tensor") == "gemm"


@pytest.mark.parametrize("base_log,level", [(9, 2), (23, 1)])
def test_digits_beyond_int8_fall_back_to_the_gemm(gen, base_log, level):
    _, key = _key(gen, 100, 20, base_log, level)
    assert alg.keyswitch_method(key) == alg.keyswitch_method(key, "tensor") == "gemm"
    ct = rand_mod_q(gen, 3, 101)
    got = alg.keyswitch_lwe_ciphertext(key, ct, MQ)
    assert torch.equal(got, ops.tfhe_keyswitch(ct, key.data, MODULI, base_log, level))
    assert key.byte_planes is None  # never built
    with pytest.raises(RuntimeError, match="base_log must be at most 8"):
        ops.tfhe_keyswitch_digits(ct, MODULI, base_log, level, 3)


def test_large_batches_run_in_chunks(gen, monkeypatch):
    _, key = _key(gen, 200, 40, 4, 4)
    w8 = 8 * 41
    monkeypatch.setattr(alg, "KEYSWITCH_SUMS_BYTES", 4 * w8 * 5)  # 5 ciphertexts' sums per chunk
    calls = []
    real = ops.tfhe_keyswitch_combine
    monkeypatch.setattr(alg._ops, "tfhe_keyswitch_combine", lambda s, c, m: calls.append(s.shape[0]) or real(s, c, m))
    ct = rand_mod_q(gen, 3, 7, 201)
    _both_methods(key, ct)
    assert sorted(calls) == [4, 4, 4, 4, 5]  # 21 ciphertexts in 5 chunks of at most 5, balanced


def test_empty_batch_and_dimension_mismatch(gen):
    _, key = _key(gen, 30, 10, 4, 2)
    assert alg.keyswitch_lwe_ciphertext(key, torch.zeros(0, 31, dtype=torch.int64), MQ, method="tensor").shape == (0, 11)
    with pytest.raises(ParameterError, match="dimension"):
        alg.keyswitch_lwe_ciphertext(key, torch.zeros(2, 30, dtype=torch.int64), MQ)


def test_method_choice(gen, monkeypatch):
    _, key = _key(gen, 30, 10, 4, 2)
    assert alg.keyswitch_method(key, "gemm") == "gemm"
    ct = rand_mod_q(gen, 2, 31)
    calls, real = [], ops.tfhe_keyswitch
    monkeypatch.setattr(alg._ops, "tfhe_keyswitch", lambda *a: calls.append("gemm") or real(*a))
    alg.keyswitch_lwe_ciphertext(key, ct, MQ, method="gemm")
    alg.keyswitch_lwe_ciphertext(key, ct, MQ, method="tensor")
    assert calls == ["gemm"]
    with pytest.raises(ParameterError, match="method must be 'tensor' or 'gemm'"):
        alg.keyswitch_lwe_ciphertext(key, rand_mod_q(gen, 1, 31), MQ, method="int8")
    monkeypatch.setattr(alg, "KEYSWITCH_METHOD", "gemm")  # what FHETORCH_TFHE_KEYSWITCH=gemm sets at import
    assert alg.keyswitch_method(key) == "gemm"
    monkeypatch.setattr(alg, "KEYSWITCH_METHOD", "fast")
    with pytest.raises(ParameterError, match="FHETORCH_TFHE_KEYSWITCH must be"):
        alg.keyswitch_method(key)


@pytest.mark.cuda
def test_small_cuda_batches_take_the_gemm_kernel(gen, monkeypatch):
    """FHETORCH_TFHE_KEYSWITCH unset: CUDA batches of at most KEYSWITCH_GEMM_BATCH ciphertexts take "gemm"
    (its kernel for a few ciphertexts), larger ones "tensor"; the outputs equal the other method's."""
    monkeypatch.setattr(alg, "KEYSWITCH_METHOD_SET", False)
    _, key = _key(gen, 300, 100, 4, 2)
    key = LweKeyswitchKey(key.data.cuda(), key.base_log, key.level)
    calls, real = [], ops.tfhe_keyswitch
    monkeypatch.setattr(alg._ops, "tfhe_keyswitch", lambda *a: calls.append(a[0].shape[0]) or real(*a))
    for batch in (1, alg.KEYSWITCH_GEMM_BATCH, alg.KEYSWITCH_GEMM_BATCH + 1):
        ct = rand_mod_q(gen, batch, 301).cuda()
        out = alg.keyswitch_lwe_ciphertext(key, ct, MQ)
        other = "tensor" if batch <= alg.KEYSWITCH_GEMM_BATCH else "gemm"
        assert torch.equal(out, alg.keyswitch_lwe_ciphertext(key, ct, MQ, method=other))
    assert calls == [1, alg.KEYSWITCH_GEMM_BATCH, alg.KEYSWITCH_GEMM_BATCH + 1]


def test_byte_planes_are_never_saved_pickled_or_compared(gen):
    _, key = _key(gen, 30, 10, 4, 2)
    fresh = LweKeyswitchKey(key.data, key.base_log, key.level)
    alg.keyswitch_lwe_ciphertext(key, rand_mod_q(gen, 2, 31), MQ, method="tensor")
    assert key.byte_planes is not None and fresh.byte_planes is None
    assert key == fresh and repr(key) == repr(fresh)
    assert replace(key, data=key.data.clone()).byte_planes is None  # a moved key builds its own
    assert copy.copy(key).byte_planes is None and copy.deepcopy(key).byte_planes is None
    assert len(pickle.dumps(key)) == len(pickle.dumps(fresh))
    back = pickle.loads(pickle.dumps(key))
    assert back.byte_planes is None and torch.equal(back.data, key.data)


def test_a_context_saves_its_key_alone():
    """After a PBS (its key switch built the byte planes) a context saves and pickles as before:
    the planes are neither written nor carried."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        tctx = fhe.tfhe.Context("toy-tfhe-2bit", seed=3).keygen()
    x = torch.tensor([0, 1, 2, 3])
    y = fhe.tfhe.LUT(lambda m: (m + 1) % 4, bits=2)(tctx.encrypt(x))
    assert torch.equal(tctx.decrypt(y), (x + 1) % 4)
    assert tctx.keyswitch_key.byte_planes is not None
    _, tensors = tfhe_serialization.encode(tctx.public())
    assert set(tensors) == {"bootstrap_key", "keyswitch_key"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        server = pickle.loads(pickle.dumps(tctx.public()))
    assert server.keyswitch_key.byte_planes is None
    assert torch.equal(server.keyswitch_key.data, tctx.keyswitch_key.data)


def test_op_errors(gen):
    ct = rand_mod_q(gen, 3, 11)
    with pytest.raises(RuntimeError, match="rows must be at least the batch"):
        ops.tfhe_keyswitch_digits(ct, MODULI, 4, 2, 2)
    with pytest.raises(RuntimeError, match="n_in >= 1"):
        ops.tfhe_keyswitch_digits(torch.zeros(2, 1, dtype=torch.int64), MODULI, 4, 2, 2)
    with pytest.raises(RuntimeError, match=r"sums must be \(rows, 8 \(n_out \+ 1\)\)"):
        ops.tfhe_keyswitch_combine(torch.zeros(3, 20, dtype=torch.int32), ct, MODULI)
    with pytest.raises(RuntimeError, match="a row per ciphertext"):
        ops.tfhe_keyswitch_combine(torch.zeros(2, 16, dtype=torch.int32), ct, MODULI)
    with pytest.raises(RuntimeError, match="sums must be int32"):
        ops.tfhe_keyswitch_combine(torch.zeros(3, 16, dtype=torch.int64), ct, MODULI)


def test_digits_op_pads_rows_and_columns(gen):
    ct = rand_mod_q(gen, 2, 3, 8)  # n_in 7, level 3: K = 21, padded to 24
    d = ops.tfhe_keyswitch_digits(ct, MODULI, 5, 3, 20)
    assert d.shape == (20, 24) and d.dtype == torch.int8
    want = ops.tfhe_decompose(ct[..., :7].contiguous(), MODULI, 5, 3).reshape(6, 21)
    assert torch.equal(d[:6, :21].to(torch.int64), want)
    assert not d[6:].any() and not d[:, 21:].any()
