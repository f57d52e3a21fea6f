"""The LWE key switch (the tiled GEMM of csrc/tfhe.h) on the CPU, bit for bit against the
pure-Python reference and against the composition it replaces (gadget digits from tfhe_decompose,
then an exact integer product per prime), on random inputs at toy and tfhe-4bit shapes. The
batch sizes reach every tiling of the CPU plan: the K loop split (small batches), one and four
ciphertexts per micro-tile; the reduction inside the K loop is reached at base_log 23."""

import pytest
import torch

import fhetorch._ops as ops
from fhetorch._tfhe.modular import Modulus

from . import reference as ref
from .inputs import MODULI, Q, ksk_kernel_form, rand_mod_q

MQ = Modulus(MODULI)
EDGES = [0, 1, Q - 1, Q // 2, Q // 2 + 1, (Q + 1) // 4]


def _inputs(gen, batch, n_in, n_out, level, key_max=False):
    ksk = rand_mod_q(gen, n_in, level, n_out + 1)
    kk = ksk_kernel_form(ksk)
    if key_max:  # every residue q_l - 1: the largest products the lazy sums see
        ksk = torch.full_like(ksk, Q - 1)
        kk = ksk_kernel_form(ksk)
    ct = rand_mod_q(gen, batch, n_in + 1)
    edges = torch.tensor(EDGES, dtype=torch.int64)
    m = min(len(EDGES), n_in)
    ct[0, :m] = edges[:m]
    return ct, ksk, kk


def _composition(ct, kk, base_log, level):
    """body - sum_ij d_ij ksk_ij per prime with the digits of tfhe_decompose and int64 matmuls."""
    n_in = ct.shape[-1] - 1
    d = ops.tfhe_decompose(ct[:, :n_in].contiguous(), MODULI, base_log, level).reshape(ct.shape[0], -1)
    res = []
    for lane, q in enumerate(MODULI):
        key = kk[:, :, lane, :].reshape(n_in * level, -1).to(torch.int64)
        s = torch.zeros(ct.shape[0], key.shape[1], dtype=torch.int64)
        for t0 in range(0, key.shape[0], 1024):  # |sum| < 1024 * 2^22 * 2^31: no int64 overflow
            s = (s + d[:, t0:t0 + 1024] @ key[t0:t0 + 1024]) % q
        s[:, -1] -= ct[:, -1] % q
        res.append((-s) % q)
    return MQ.compose(res[0], res[1])



# (batch, n_in, n_out, base_log, level): the CPU plan (8 tiles at once) splits K for batches 1 and 3
# at n_out 32, uses one ciphertext per micro-tile at 200 and four at 600
@pytest.mark.parametrize("batch,n_in,n_out,base_log,level", [
    (1, 1024, 32, 4, 6), (3, 1024, 32, 4, 6), (200, 1024, 32, 4, 6), (600, 128, 40, 4, 6),
    (5, 1024, 70, 23, 1), (4, 100, 33, 1, 40), (9, 37, 130, 3, 5)])
def test_keyswitch_matches_reference_and_composition(gen, batch, n_in, n_out, base_log, level):
    ct, ksk, kk = _inputs(gen, batch, n_in, n_out, level)
    got = ops.tfhe_keyswitch(ct, kk, MODULI, base_log, level)
    assert got.shape == (batch, n_out + 1)
    assert torch.equal(got, _composition(ct, kk, base_log, level))
    for b in sorted({0, batch - 1}):
        want = ref.keyswitch(ct[b].tolist(), ksk.tolist(), Q, base_log, level) if n_in * n_out <= 40000 else \
            ref.keyswitch_columns(ct[b].tolist(), ksk, Q, base_log, level, list(range(n_out + 1)))
        assert got[b].tolist() == want


def test_keyswitch_largest_key_residues(gen):
    # base_log 23: products up to 2^53, the sums reduced inside the K loop
    ct, ksk, kk = _inputs(gen, 2, 1500, 20, 1, key_max=True)
    got = ops.tfhe_keyswitch(ct, kk, MODULI, 23, 1)
    assert torch.equal(got, _composition(ct, kk, 23, 1))
    assert got[1].tolist() == ref.keyswitch(ct[1].tolist(), ksk.tolist(), Q, 23, 1)


def test_keyswitch_at_tfhe_4bit_shape(gen):
    n_in, n_out, base_log, level = 2048, 833, 3, 5
    ct, ksk, kk = _inputs(gen, 70, n_in, n_out, level)  # four ciphertexts per micro-tile
    got = ops.tfhe_keyswitch(ct, kk, MODULI, base_log, level)
    assert torch.equal(got, _composition(ct, kk, base_log, level))
    cols = [0, 1, 63, 64, 500, 831, 832, 833]  # tile edges and the body
    assert got[69, cols].tolist() == ref.keyswitch_columns(ct[69].tolist(), ksk, Q, base_log, level, cols)
    one = ct[:1]  # one ciphertext per micro-tile
    assert torch.equal(ops.tfhe_keyswitch(one, kk, MODULI, base_log, level), got[:1])


def test_keyswitch_batched_equals_one_at_a_time(gen):
    ct, _, kk = _inputs(gen, 70, 300, 90, 5)
    ct = ct.view(2, 35, -1)
    got = ops.tfhe_keyswitch(ct, kk, MODULI, 3, 5)  # another plan than a single ciphertext's
    assert got.shape == (2, 35, 91)
    for i in (0, 1):
        for b in (0, 17, 34):
            assert torch.equal(got[i, b], ops.tfhe_keyswitch(ct[i, b], kk, MODULI, 3, 5))


def test_keyswitch_of_an_empty_batch():
    kk = torch.zeros(4, 2, 2, 6, dtype=torch.int32)
    assert ops.tfhe_keyswitch(torch.zeros(0, 5, dtype=torch.int64), kk, MODULI, 3, 2).shape == (0, 6)
