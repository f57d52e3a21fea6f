"""The blind rotation with a Fourier bootstrapping key (op tfhe_fourier_blind_rotate; csrc/tfhe_fft.h;
docs/tfhe.md, "The Fourier blind rotation") on the CPU: bit for bit the composition of its parts
(the LUT lifted to the torus, one tfhe_torus_cmux per key bit, the return mod q, all checked here
against Python integers), the key's exact product with the secret, the Fourier key's GGSW rows,
and whole PBS through tfhe.Context on both rotations. CPU = CUDA: tests/_tfhe/test_cuda_parity.py."""
import dataclasses
import warnings

import pytest
import torch

import fhetorch as fhe
import fhetorch._ops as ops
from fhetorch._ring import Sampler
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.entities import GlweSecretKey
from fhetorch._tfhe.fft import fft_twiddles
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.params import make_params
from fhetorch._tfhe.presets import PRESETS
from fhetorch._tfhe.ring import TFHERing
from fhetorch.errors import ParameterError

from .inputs import MODULI, Q, rand_mod_q

TWO64 = 1 << 64


def _signed(x: int) -> int:
    x %= TWO64
    return x - TWO64 if x >= 1 << 63 else x


def _lift(x: int) -> int:
    """round(x 2^64 / q) mod 2^64, signed (q odd: no tie)."""
    return _signed((x * TWO64 + Q // 2) // Q)


def _lower(y: int) -> int:
    """round(y q / 2^64) mod q for y read unsigned (half up)."""
    return ((y % TWO64) * Q + (1 << 63)) // TWO64 % Q


def _rotate_torus(p: torch.Tensor, s: int) -> torch.Tensor:
    """X^s p (negacyclic) on int64 torus rows (..., N), s in [0, 2N)."""
    n = p.shape[-1]
    src = (torch.arange(n) - s) % (2 * n)
    x = p[..., src % n]
    return torch.where(src >= n, -x, x)


def _torus_start(lut, body, k1):
    """The rotation's start on the torus: masks zero, body X^(-body) times the LUT lifted (body: the
    switched body, in [0, 2N))."""
    big_n = lut.shape[-1]
    acc = torch.zeros(k1, big_n, dtype=torch.int64)
    lifted = torch.tensor([_lift(v) for v in lut.tolist()], dtype=torch.int64)
    acc[-1] = _rotate_torus(lifted, (2 * big_n - body) % (2 * big_n))
    return acc


def _rotation_frame(ct, luts, idx, k1, advance):
    """A torus rotation as Python composes it, each ciphertext b in turn: switch to 2N, lift the
    LUT onto the torus (_torus_start), acc = advance(b, rot[b], acc), lower back mod q."""
    rot = alg.modulus_switch(ct, _MODULUS, luts.shape[-1].bit_length())  # log2 2N
    outs = []
    for b in range(ct.shape[0]):
        acc = advance(b, rot[b], _torus_start(luts[int(idx[b])], int(rot[b, -1]), k1))
        outs.append(torch.tensor([[_lower(v) for v in row] for row in acc.tolist()], dtype=torch.int64))
    return torch.stack(outs)


def _fourier_rotation_by_parts(ct, luts, idx, bsk, tw, base_log, level):
    """The rotation as Python composes it: lift, CMux per key bit (tfhe_torus_cmux), lower."""

    def advance(b, rot, acc):
        for i in range(ct.shape[1] - 1):
            a = int(rot[i])
            if a:
                acc = ops.tfhe_torus_cmux(acc, _rotate_torus(acc, a), bsk[i].contiguous(), tw, base_log, level)
        return acc

    return _rotation_frame(ct, luts, idx, bsk.shape[1], advance)


_MODULUS = Modulus(MODULI)


@pytest.mark.parametrize("log_n,k,base_log,level", [(8, 1, 12, 2), (9, 2, 20, 1), (8, 1, 7, 3)])
def test_fourier_rotation_is_its_parts(gen, log_n, k, base_log, level):
    big_n, k1, n = 1 << log_n, k + 1, 7
    tw = fft_twiddles(log_n)
    bsk = ops.tfhe_fft(torch.randint(-(1 << 63), (1 << 63) - 1, (n, k1, level, k1, big_n), generator=gen), tw)
    ct = rand_mod_q(gen, 5, n + 1)
    ct[1, 2] = 0  # a zero rotation is skipped
    ct[2, -1] = Q - 1
    luts = rand_mod_q(gen, 3, big_n)
    idx = torch.tensor([0, 2, 1, 2, 7])  # 7: clamped to the last LUT
    got = ops.tfhe_fourier_blind_rotate(ct, luts, idx, bsk, tw, MODULI, base_log, level)
    want = _fourier_rotation_by_parts(ct, luts, idx.clamp(0, 2), bsk, tw, base_log, level)
    assert torch.equal(got, want)
    assert torch.equal(got[3:4], ops.tfhe_fourier_blind_rotate(ct[3:4], luts, idx[3:4], bsk, tw, MODULI, base_log,
                                                               level))


def test_fourier_rotation_refuses_bad_arguments(gen):
    tw = fft_twiddles(8)
    bsk = torch.zeros(4, 2, 1, 2, 128, dtype=torch.complex128)
    ct = rand_mod_q(gen, 2, 5)
    luts = rand_mod_q(gen, 1, 256)
    with pytest.raises(RuntimeError, match="bsk must be"):
        ops.tfhe_fourier_blind_rotate(ct, luts, None, bsk, tw, MODULI, 23, 2)
    with pytest.raises(RuntimeError, match="LWE dimension"):
        ops.tfhe_fourier_blind_rotate(ct[:, :4].contiguous(), luts, None, bsk, tw, MODULI, 23, 1)
    with pytest.raises(RuntimeError, match="lut_index"):
        ops.tfhe_fourier_blind_rotate(ct, luts, torch.zeros(3, dtype=torch.int64), bsk, tw, MODULI, 23, 1)


def test_torus_key_product_is_exact(gen):
    big_n, k = 64, 2
    ring = TFHERing(6, MODULI)
    key = GlweSecretKey(torch.randint(0, 2, (k, big_n), generator=gen))
    a = torch.randint(-(1 << 63), (1 << 63) - 1, (3, k, big_n), generator=gen)
    got = alg.torus_poly_mul_key(ring, a, key)
    for b in range(3):
        want = [0] * big_n
        for p in range(k):
            for i, ai in enumerate(a[b, p].tolist()):
                for j, zj in enumerate(key.data[p].tolist()):
                    if zj:
                        want[(i + j) % big_n] += ai if i + j < big_n else -ai
        assert got[b].tolist() == [_signed(w) for w in want]


def test_fourier_key_rows_decrypt_to_the_gadget():
    """Row (p, j) of a key bit's GGSW has phase e - mu g_j S_p (masks, p < k) or e + mu g_j (body),
    e within the sampler's bound 4 W plus the FFT form's conversion error (a torus value keeps its
    53 leading bits in a double: about 2^10 per coefficient, 2^14 after the round trip), far
    below the smallest g_j (2^34)."""
    ring = TFHERing(8, MODULI)
    s = Sampler(seed=3)
    k, big_n, base_log, level, width = 1, 256, 10, 3, 50
    glwe = alg.generate_glwe_secret_key(s, k, big_n)
    lwe = alg.generate_lwe_secret_key(s, 6)
    key = alg.generate_fourier_bootstrap_key(s, ring, lwe, glwe, base_log, level, width)
    assert key.data.shape == (6, k + 1, level, k + 1, big_n // 2) and key.data.dtype == torch.complex128
    rows = ops.tfhe_ifft(key.data, ring.twiddles)  # (6, k1, level, k1, N)
    phase = rows[..., -1, :] - alg.torus_poly_mul_key(ring, rows[..., :-1, :], glwe)  # (6, k1, level, N)
    g = alg.torus_gadget(base_log, level)
    for i, mu in enumerate(lwe.data.tolist()):
        for j in range(level):
            for p in range(k + 1):
                want = torch.zeros(big_n, dtype=torch.int64)
                if p < k:
                    want = -mu * g[j] * glwe.data[p]  # mu g_j S_p (a constant times S_p)
                else:
                    want[0] = mu * g[j]
                err = phase[i, p, j] - want
                assert int(err.abs().max()) <= 4 * width + (1 << 17)


@pytest.mark.parametrize("rotation", ["fft", "ntt"])
@pytest.mark.parametrize("name", ["toy-tfhe-4bit", "toy-tfhe-2bit"])
def test_pbs_on_either_rotation(name, rotation):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = make_params(dataclasses.replace(PRESETS[name], blind_rotation=rotation), allow_insecure=True)
        tctx = fhe.tfhe.Context(p).keygen()
    assert p.blind_rotation == rotation
    assert type(tctx.bootstrap_key).__name__ == ("FourierLweBootstrapKey" if rotation == "fft" else "LweBootstrapKey")
    space = p.message_space
    x = torch.arange(space).repeat(3)
    table = torch.randperm(space)
    lut = fhe.tfhe.LUT.from_table(table)
    assert torch.equal(tctx.decrypt(lut(tctx.encrypt(x))), table[x])


def test_blind_rotation_choice_is_validated():
    lit = PRESETS["toy-tfhe-4bit"]
    assert make_params(lit, allow_insecure=True).blind_rotation == "fft"  # the default, classical
    assert make_params(PRESETS["toy-tfhe-4bit-mb2"], allow_insecure=True).blind_rotation == "fft"  # and multi-bit
    mb_ntt = dataclasses.replace(PRESETS["toy-tfhe-4bit-mb2"], blind_rotation="ntt")
    assert make_params(mb_ntt, allow_insecure=True).blind_rotation == "ntt"
    with pytest.raises(ParameterError, match="blind_rotation must be"):
        make_params(dataclasses.replace(lit, blind_rotation="fast"), allow_insecure=True)
