"""The TFHE kernels (tfhe_* ops) against the pure-Python references of tests/_tfhe/reference.py,
bit for bit, on the CPU; opcheck on each; batched calls equal to one-at-a-time calls."""

import pytest
import torch

import fhetorch._ops as ops
from fhetorch._ring import Sampler
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.fft import fft_twiddles
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.ring import TFHERing

from . import reference as ref
from .inputs import MODULI, Q, ggsw_kernel_form, ksk_kernel_form, rand_mod_q

MQ = Modulus(MODULI)


def _ring(log_n):
    return TFHERing(log_n, MODULI)


def test_modulus_switch_matches_reference(gen):
    x = torch.cat((rand_mod_q(gen, 500), torch.tensor([0, 1, Q - 1, Q // 2, Q // 2 + 1, (Q + 1) // 4])))
    for bits in (1, 11, 12, 24, 46, 48, 49, 62):  # <= 48: double estimate + exact correction; above: long division
        got = ops.tfhe_modulus_switch(x, MODULI, bits).tolist()
        assert got == [ref.modulus_switch(v, Q, bits) for v in x.tolist()], bits


@pytest.mark.parametrize("base_log,level", [(1, 3), (4, 6), (12, 2), (23, 1), (15, 4)])
def test_decompose_matches_reference_and_recomposes(gen, base_log, level):
    x = torch.cat((rand_mod_q(gen, 300), torch.tensor([0, Q - 1, Q // 2])))
    got = ops.tfhe_decompose(x.view(3, -1), MODULI, base_log, level).view(-1, level).tolist()
    g = ref.gadget(Q, base_log, level)
    for v, digits in zip(x.tolist(), got):
        assert digits == ref.decompose(v, Q, base_log, level)
        assert all(-(1 << (base_log - 1)) <= d < (1 << (base_log - 1)) for d in digits)
        err = (sum(d * gj for d, gj in zip(digits, g)) - v) % Q
        err = min(err, Q - err)
        assert err <= Q / 2 ** (base_log * level + 1) + level * (1 << base_log) / 4 + 1


def test_keyswitch_matches_reference(gen):
    n_in, n_out, base_log, level = 12, 7, 4, 3
    ksk = rand_mod_q(gen, n_in, level, n_out + 1)
    ct = rand_mod_q(gen, 2, 3, n_in + 1)
    got = ops.tfhe_keyswitch(ct, ksk_kernel_form(ksk), MODULI, base_log, level)
    assert got.shape == (2, 3, n_out + 1)
    kl = ksk.tolist()
    for c, g in zip(ct.view(-1, n_in + 1).tolist(), got.view(-1, n_out + 1).tolist()):
        assert g == ref.keyswitch(c, kl, Q, base_log, level)


@pytest.mark.parametrize("k,base_log,level", [(1, 7, 2), (2, 12, 1), (1, 23, 1)])
def test_external_product_matches_reference(gen, k, base_log, level):
    log_n, k1 = 4, k + 1
    ring = _ring(log_n)
    ggsw = rand_mod_q(gen, k1, level, k1, 1 << log_n)
    glwe = rand_mod_q(gen, 3, k1, 1 << log_n)
    got = alg.external_product(ring, ggsw_kernel_form(ring, ggsw), glwe, base_log, level)
    gl = ggsw.tolist()
    for b in range(3):
        assert got[b].tolist() == ref.external_product(glwe[b].tolist(), gl, Q, base_log, level)


def _blind_rotate_by_steps(ring, bsk, ct, luts, lut_index):
    """The reference composition: rotation, then one CMux (external product op) per key bit."""
    n2 = 2 * ring.n
    outs = []
    for b in range(ct.shape[0]):
        body = ref.modulus_switch(int(ct[b, -1]), Q, n2.bit_length() - 1)
        lut = luts[0 if lut_index is None else int(lut_index[b])].tolist()
        acc = torch.zeros(bsk.data.shape[1], ring.n, dtype=torch.int64)
        acc[-1] = torch.tensor(ref.rotate(lut, -body % n2, Q))
        for i in range(bsk.input_dimension):
            a = ref.modulus_switch(int(ct[b, i]), Q, n2.bit_length() - 1)
            rotated = alg.rotate_glwe(MQ, acc, a)
            acc = alg.cmux(ring, bsk.data[i], acc, rotated, bsk.base_log, bsk.level)
        outs.append(acc)
    return torch.stack(outs)


def test_blind_rotate_matches_cmux_steps_and_batches(gen):
    log_n, k1, level, base_log, n = 5, 2, 2, 9, 6
    ring = _ring(log_n)
    ggsw = rand_mod_q(gen, n, k1, level, k1, 1 << log_n)
    bsk = alg.LweBootstrapKey(ggsw_kernel_form(ring, ggsw), base_log, level)
    ct = rand_mod_q(gen, 5, n + 1)
    ct[0, 2] = 0  # a zero mask: the step is skipped
    luts = rand_mod_q(gen, 3, 1 << log_n)
    idx = torch.tensor([2, 0, 1, 1, 2])
    got = alg.blind_rotate(ring, bsk, ct, luts, idx)
    assert torch.equal(got, _blind_rotate_by_steps(ring, bsk, ct, luts, idx))
    one = torch.cat([alg.blind_rotate(ring, bsk, ct[b:b + 1], luts, idx[b:b + 1]) for b in range(5)])
    assert torch.equal(got, one)
    two_dims = alg.blind_rotate(ring, bsk, ct[:4].view(2, 2, n + 1), luts, idx[:4].view(2, 2))
    assert torch.equal(two_dims.view(4, k1, -1), got[:4])


def test_extract_lwe_sample_decrypts_to_the_coefficient():
    s = Sampler(seed=3)
    ring = _ring(5)
    key = alg.generate_glwe_secret_key(s, 2, 32)
    msg = alg._uniform_mod_q(s, ring, (2, 32))
    glwe = alg.encrypt_glwe_ciphertext(s, ring, key, msg, 0)
    assert torch.equal(alg.decrypt_glwe_ciphertext(ring, key, glwe), msg)
    for pos in (0, 1, 17, 31):
        lwe = alg.extract_lwe_sample(MQ, glwe, pos)
        assert torch.equal(alg.decrypt_lwe_ciphertext(MQ, key.as_lwe_key(), lwe), msg[:, pos])


def test_sample_int_range_and_streams():
    s = Sampler(seed=5)
    a = ops.tfhe_sample_int(s.key, 7, 4000, -3, 5)
    assert a.dtype == torch.int64 and int(a.min()) == -3 and int(a.max()) == 5
    assert torch.equal(a, ops.tfhe_sample_int(s.key, 7, 4000, -3, 5))
    assert not torch.equal(a, ops.tfhe_sample_int(s.key, 8, 4000, -3, 5))
    counts = torch.bincount(a + 3, minlength=9).double()
    assert (counts - 4000 / 9).abs().max() < 150
    big = ops.tfhe_sample_int(s.key, 9, 1000, 0, (1 << 62) - 1)
    assert int(big.min()) >= 0 and int(big.max()) > 1 << 61
    iw = s.irwin_hall(20000, 100)
    var = float(iw.double().var())
    assert abs(var / (4 * 100 * 101 / 3) - 1) < 0.05


def test_ops_refuse_bad_arguments():
    x = torch.zeros(4, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="tfhe_modulus_switch: moduli"):
        ops.tfhe_modulus_switch(x, [MODULI[0]], 3)
    with pytest.raises(RuntimeError, match="base_log"):
        ops.tfhe_decompose(x, MODULI, 30, 1)
    with pytest.raises(RuntimeError, match="keyswitch_key must be"):
        ops.tfhe_keyswitch(x.view(1, 4), torch.zeros(3, 1, 2, 5, dtype=torch.int32), MODULI, 4, 2)
    ring = _ring(4)
    with pytest.raises(RuntimeError, match="differs from the key"):
        ops.tfhe_blind_rotate(torch.zeros(2, 4, dtype=torch.int64), torch.zeros(1, 16, dtype=torch.int64), None,
                              torch.zeros(5, 2, 1, 2, 2, 16, dtype=torch.int32), ring.psi, ring.psi_inv, ring.post,
                              MODULI, 4, 1)


def test_opcheck(gen):
    ring = _ring(4)
    x = rand_mod_q(gen, 2, 3)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_modulus_switch, (x, list(MODULI), 11))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_decompose, (x, list(MODULI), 4, 3))
    ksk = ksk_kernel_form(rand_mod_q(gen, 2, 3, 5))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_keyswitch, (x, ksk, list(MODULI), 4, 3))
    ct3 = rand_mod_q(gen, 2, 3, 4)  # a leading batch shape; the digits op pads its rows for _int_mm
    torch.library.opcheck(torch.ops.fhetorch.tfhe_keyswitch_digits, (ct3, list(MODULI), 4, 3, 17))
    sums = torch.randint(-(1 << 30), 1 << 30, (7, 8 * 5), generator=gen, dtype=torch.int32)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_keyswitch_combine, (sums, ct3, list(MODULI)))
    ggsw = ggsw_kernel_form(ring, rand_mod_q(gen, 2, 2, 2, 16))
    glwe = rand_mod_q(gen, 3, 2, 16)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_external_product,
                          (glwe, ggsw, ring.psi, ring.psi_inv, ring.post, list(MODULI), 5, 2))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_glwe_keyswitch,
                          (glwe, ggsw[0], ring.psi, ring.psi_inv, ring.post, list(MODULI), 5, 2, 3))
    for y in (rand_mod_q(gen, 3, 2, 16), None):
        torch.library.opcheck(torch.ops.fhetorch.tfhe_glwe_pack_step,
                              (glwe, y, ggsw[0], ring.psi, ring.psi_inv, ring.post, list(MODULI), 5, 2, 5, 7))
    leaves = rand_mod_q(gen, 2, 3, 17)  # LWE inputs: (..., N + 1) in, (..., 2, N) out
    torch.library.opcheck(torch.ops.fhetorch.tfhe_glwe_pack_step,
                          (leaves, leaves.flip(0), ggsw[0], ring.psi, ring.psi_inv, ring.post, list(MODULI), 5, 2, 5,
                           7, 12345))
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, 2, 2, 2, 2, 16))
    luts = rand_mod_q(gen, 2, 16)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_blind_rotate,
                          (x, luts, torch.tensor([1, 0]), bsk, ring.psi, ring.psi_inv, ring.post,
                           list(MODULI), 5, 2))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_sample_int, (Sampler(seed=1).key, 3, 10, 0, 9))
    mb_bsk = ggsw_kernel_form(ring, rand_mod_q(gen, 2, 4, 2, 2, 2, 16))  # 2 groups of G = 2 key bits
    exps, pows = ring.monomial_tables()
    torch.library.opcheck(torch.ops.fhetorch.tfhe_multi_bit_blind_rotate,
                          (rand_mod_q(gen, 2, 5), luts, torch.tensor([1, 0]), mb_bsk, ring.psi, ring.psi_inv,
                           ring.post, exps, pows, list(MODULI), 5, 2))
    tw = fft_twiddles(4)
    poly = torch.randint(-(1 << 40), 1 << 40, (2, 16), generator=gen, dtype=torch.int64)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_fft, (poly, tw))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_ifft, (ops.tfhe_fft(poly, tw), tw))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_fft_product,
                          (poly.view(1, 2, 16), ops.tfhe_fft(poly.view(2, 1, 16), tw), tw))
    torus_ggsw = ops.tfhe_fft(torch.randint(-(1 << 62), 1 << 62, (2, 2, 2, 16), generator=gen, dtype=torch.int64), tw)
    glwes = torch.randint(-(1 << 62), 1 << 62, (2, 3, 2, 16), generator=gen, dtype=torch.int64)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_torus_external_product, (glwes[0], torus_ggsw, tw, 8, 2))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_torus_cmux, (glwes[0], glwes[1], torus_ggsw, tw, 8, 2))
    fourier_bsk = ops.tfhe_fft(torch.randint(-(1 << 62), 1 << 62, (2, 2, 2, 2, 16), generator=gen,
                                             dtype=torch.int64), tw)  # 2 key bits
    torch.library.opcheck(torch.ops.fhetorch.tfhe_fourier_blind_rotate,
                          (x, luts, torch.tensor([1, 0]), fourier_bsk, tw, list(MODULI), 8, 2))
    fourier_mb = ops.tfhe_fft(torch.randint(-(1 << 62), 1 << 62, (2, 4, 2, 2, 2, 16), generator=gen,
                                            dtype=torch.int64), tw)  # 2 groups of G = 2 key bits
    fexps, roots = ring.fourier_monomial_tables()
    ct5 = rand_mod_q(gen, 2, 5)
    torch.library.opcheck(torch.ops.fhetorch.tfhe_fourier_multi_bit_blind_rotate,
                          (ct5, luts, torch.tensor([1, 0]), fourier_mb, tw, roots, fexps, list(MODULI), 8, 2))
    torch.library.opcheck(torch.ops.fhetorch.tfhe_fourier_key_bundle,
                          (ct5, fourier_mb, roots, fexps, list(MODULI), 8, 2, 1))


def _external_product_by_ckks_ntt(ring, ggsw, glwe, base_log, level):
    """An independent product: the gadget digits (tfhe_decompose), the CKKS side's NTT and
    element-wise ops per (component, level), the CKKS INTT, CRT."""
    digits = ops.tfhe_decompose(glwe, MODULI, base_log, level)  # (B, k1, N, level)
    k1 = glwe.shape[-2]
    total = 0
    for p in range(k1):
        for j in range(level):
            d = ring.to_ntt(digits[:, p, :, j])  # (B, 2, N)
            total = total + torch.stack([ring.mul(d, ggsw[p, j, r]).to(torch.int64) for r in range(k1)], 1)
    q = torch.tensor(MODULI, dtype=torch.int64).view(2, 1)
    res = ops.intt((total % q).to(torch.int32).contiguous(), ring.mod, ring.psi_inv, ring.post).to(torch.int64)
    return MQ.compose(res[..., 0, :], res[..., 1, :])


@pytest.mark.parametrize("log_n,k,base_log,level", [(11, 1, 23, 1), (11, 1, 12, 2), (10, 2, 23, 1), (12, 1, 22, 1)])
def test_external_product_matches_ckks_ntt_at_full_size(gen, log_n, k, base_log, level):
    """N >= 2^10: the NTT rounds' lane layout (not used below N = 2^10) against the CKKS NTT."""
    ring, k1 = _ring(log_n), k + 1
    ggsw = ggsw_kernel_form(ring, rand_mod_q(gen, k1, level, k1, 1 << log_n))
    glwe = rand_mod_q(gen, 2, k1, 1 << log_n)
    got = alg.external_product(ring, ggsw, glwe, base_log, level)
    assert torch.equal(got, _external_product_by_ckks_ntt(ring, ggsw, glwe, base_log, level))


@pytest.mark.parametrize("batch", [3, 40])
@pytest.mark.parametrize("log_n,k,base_log,level,n", [(11, 1, 23, 1, 3), (11, 1, 12, 2, 2), (12, 1, 22, 1, 2),
                                                       (13, 1, 23, 1, 2), (10, 2, 23, 1, 2)])
def test_blind_rotate_paths_match_cmux_steps(gen, batch, log_n, k, base_log, level, n):
    """Every path of the rotation equals one CMux (external product op) per key bit: batch 3 the
    cluster path (B * 2 k1 <= 128: a ciphertext over 2 k1 teams), batch 40 the fused one (a whole
    rotation per team, N <= 2^12 at k = 1) or, at N = 2^13, the per-bit one."""
    ring, k1 = _ring(log_n), k + 1
    bsk = alg.LweBootstrapKey(ggsw_kernel_form(ring, rand_mod_q(gen, n, k1, level, k1, 1 << log_n)), base_log, level)
    ct = rand_mod_q(gen, batch, n + 1)
    ct[1, 0] = 0  # a skipped step
    luts = rand_mod_q(gen, 2, 1 << log_n)
    idx = torch.randint(0, 2, (batch,), generator=gen)
    got = alg.blind_rotate(ring, bsk, ct, luts, idx)
    assert torch.equal(got, _blind_rotate_by_steps(ring, bsk, ct, luts, idx))
