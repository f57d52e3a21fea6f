"""The multi-bit blind rotation with a Fourier key (op tfhe_fourier_multi_bit_blind_rotate;
csrc/tfhe_fft.h "the multi-bit blind rotation on the torus"; docs/tfhe.md "Multi-bit PBS on the
torus") on the CPU: the monomial tables against the FFT of monomials, each group's key bundle
against its definition, the rotation bit for bit against its parts (the LUT lifted to the torus,
per group tfhe_fourier_key_bundle then tfhe_torus_external_product, the return mod q), batched = one
at a time, clear errors. Whole PBS through tfhe.Context: tests/_tfhe/test_multi_bit.py (both
rotations). CPU = CUDA: tests/_tfhe/test_cuda_parity.py."""
import pytest
import torch

import fhetorch._ops as ops
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.fft import fft_bundle_rho, fft_exponents, fft_roots, fft_twiddles
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.ring import TFHERing
from fhetorch.errors import ParameterError

from .inputs import MODULI, Q, rand_mod_q
from .test_fourier import _rotation_frame

_MODULUS = Modulus(MODULI)


def _torus(gen, *shape):
    return torch.randint(-(1 << 63), (1 << 63) - 1, shape, generator=gen)


def _key(gen, log_n, k, level, g, groups):
    """A random Fourier multi-bit key: the FFTs of uniform torus polynomials (realistic magnitudes)."""
    k1 = k + 1
    return ops.tfhe_fft(_torus(gen, groups, 1 << g, k1, level, k1, 1 << log_n), fft_twiddles(log_n))


def _subset_rotations(ct_row, g, j, log_n):
    """a_S for S < 2^g of group j: the subset sums of the masks mod q, switched to 2N."""
    masks = [int(v) for v in ct_row[j * g:(j + 1) * g]]
    sums = torch.tensor([sum(m for u, m in enumerate(masks) if s >> u & 1) % Q for s in range(1 << g)])
    return alg.modulus_switch(sums, _MODULUS, log_n + 1)


@pytest.mark.parametrize("log_n", [4, 10, 11])
def test_roots_are_the_fft_of_monomials(gen, log_n):
    """tfhe_fft(X^a)[k] = roots[(e_k a) mod 2N], to the FFT's rounding (X^a for a >= N is -X^(a-N))."""
    big_n = 1 << log_n
    exps, roots = TFHERing(log_n, MODULI).fourier_monomial_tables()
    assert exps.tolist() == fft_exponents(log_n) and torch.equal(roots, fft_roots(log_n))
    assert roots[0] == 1 and roots[big_n] == -1 and roots[big_n // 2] == 1j  # exact where exact
    for a in [0, 1, 3, big_n - 1, big_n, big_n + 5, 2 * big_n - 1] + torch.randint(0, 2 * big_n, (4,), generator=gen).tolist():
        x = torch.zeros(big_n, dtype=torch.int64)
        x[a % big_n] = 1 if a < big_n else -1
        got = ops.tfhe_fft(x, fft_twiddles(log_n))
        want = roots[(exps.to(torch.int64) * a) % (2 * big_n)]
        assert float((got - want).abs().max()) < 1e-12


@pytest.mark.parametrize("g", [2, 3, 4])
def test_key_bundle_is_the_sum_of_monomial_times_ggsw(gen, g):
    """The bundle of group j at slot k is G_0 + sum_S zeta^(e_k a_S) G_S (a_S: the subset sums
    switched to 2N), to float64 rounding (fft_bundle_rho's size); a group whose masks are all zero
    sums its GGSWs."""
    log_n, k, level, groups = 6, 1, 2, 3
    exps, roots = TFHERing(log_n, MODULI).fourier_monomial_tables()
    bsk = _key(gen, log_n, k, level, g, groups)
    ct = rand_mod_q(gen, 4, g * groups + 1)
    ct[0, g:2 * g] = 0
    for j in range(groups):
        got = ops.tfhe_fourier_key_bundle(ct, bsk, roots, exps, MODULI, 20, level, j)
        assert got.shape == (4, k + 1, level, k + 1, 1 << (log_n - 1))
        for b in range(4):
            rot = _subset_rotations(ct[b], g, j, log_n)
            mono = roots[(exps.to(torch.int64).view(1, -1) * rot.view(-1, 1)) % (2 << log_n)]  # (2^g, M)
            want = (bsk[j] * mono.view(-1, 1, 1, 1, mono.shape[-1])).sum(0)
            scale = float(bsk[j].abs().max())
            assert float((got[b] - want).abs().max()) < 64 * (1 << g) * 2.0 ** -53 * scale
    zero = ops.tfhe_fourier_key_bundle(ct[:1], bsk, roots, exps, MODULI, 20, level, 1)[0]
    assert float((zero - bsk[1].sum(0)).abs().max()) < 64 * (1 << g) * 2.0 ** -53 * float(bsk[1].abs().max())
    assert fft_bundle_rho(g) > fft_bundle_rho(g - 1) > 0


def _rotation_by_parts(ct, luts, idx, bsk, tw, roots, exps, base_log, level, g):
    """The multi-bit rotation as Python composes it: lift, per group the bundle (its own op) times
    the accumulator (tfhe_torus_external_product), lower."""

    def advance(b, rot, acc):
        for j in range(bsk.shape[0]):
            bundle = ops.tfhe_fourier_key_bundle(ct[b:b + 1], bsk, roots, exps, MODULI, base_log, level, j)[0]
            acc = ops.tfhe_torus_external_product(acc, bundle.contiguous(), tw, base_log, level)
        return acc

    return _rotation_frame(ct, luts, idx, bsk.shape[2], advance)


# (log_n, k, base_log, level, G, groups): k = 1 and 2, level 1 to 3, the 4-bit presets' N = 2^11
@pytest.mark.parametrize("log_n,k,base_log,level,g,groups", [
    (6, 1, 12, 2, 2, 3), (7, 2, 20, 1, 3, 2), (6, 1, 7, 3, 4, 2), (11, 1, 22, 1, 4, 1)])
def test_fourier_multi_bit_rotation_is_its_parts(gen, log_n, k, base_log, level, g, groups):
    big_n, n = 1 << log_n, g * groups
    tw = fft_twiddles(log_n)
    exps, roots = TFHERing(log_n, MODULI).fourier_monomial_tables()
    bsk = _key(gen, log_n, k, level, g, groups)
    ct = rand_mod_q(gen, 4, n + 1)
    ct[1, :g] = 0  # every a_S zero in the first group
    ct[2, -1] = Q - 1
    luts = rand_mod_q(gen, 3, big_n)
    idx = torch.tensor([0, 2, 1, 7])  # 7: clamped to the last LUT
    got = ops.tfhe_fourier_multi_bit_blind_rotate(ct, luts, idx, bsk, tw, roots, exps, MODULI, base_log, level)
    want = _rotation_by_parts(ct, luts, idx.clamp(0, 2), bsk, tw, roots, exps, base_log, level, g)
    assert torch.equal(got, want)
    one = ops.tfhe_fourier_multi_bit_blind_rotate(ct[3:4], luts, idx[3:4], bsk, tw, roots, exps, MODULI, base_log,
                                                  level)
    assert torch.equal(got[3:4], one)


def test_fourier_multi_bit_rotation_refuses_bad_arguments(gen):
    log_n = 8
    tw = fft_twiddles(log_n)
    exps, roots = TFHERing(log_n, MODULI).fourier_monomial_tables()
    bsk = torch.zeros(2, 4, 2, 1, 2, 128, dtype=torch.complex128)  # G = 2, n = 4
    ct = rand_mod_q(gen, 2, 5)
    luts = rand_mod_q(gen, 1, 256)
    run = ops.tfhe_fourier_multi_bit_blind_rotate
    with pytest.raises(RuntimeError, match="2\\^G"):
        run(ct, luts, None, bsk[:, :3].contiguous(), tw, roots, exps, MODULI, 23, 1)
    with pytest.raises(RuntimeError, match="LWE dimension"):
        run(ct[:, :4].contiguous(), luts, None, bsk, tw, roots, exps, MODULI, 23, 1)
    with pytest.raises(RuntimeError, match="roots must be"):
        run(ct, luts, None, bsk, tw, roots[:256].contiguous(), exps, MODULI, 23, 1)
    with pytest.raises(RuntimeError, match="exponents must be"):
        run(ct, luts, None, bsk, tw, roots, exps.to(torch.int64), MODULI, 23, 1)
    with pytest.raises(RuntimeError, match="bsk must be"):
        run(ct, luts, None, bsk, tw, roots, exps, MODULI, 23, 2)
    with pytest.raises(RuntimeError, match="group must be"):
        ops.tfhe_fourier_key_bundle(ct, bsk, roots, exps, MODULI, 23, 1, 2)
    with pytest.raises(ParameterError, match="log_n"):
        fft_roots(3)
