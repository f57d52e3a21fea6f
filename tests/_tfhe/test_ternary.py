"""Ternary secrets in the core (fhetorch/_tfhe/algorithms.py): the draw (values in {-1, 0, 1},
uniform), the split s = s+ - s- into two binary secrets, the mask extension
(a_0, -a_0, a_1, -a_1, ..., b) with <a_ext, s_ext> = <a, s> mod q, and the modulus switch
commuting with it exactly (round(2N (q - a) / q) = -round(2N a / q) mod 2N: no ties, q odd), on
fresh random values and the edge values where a rounding rule could slip (0, 1, q - 1 and both
sides of every half step). The noise after the PBS: tests/_tfhe/test_noise_measured.py."""
import math
import os

import pytest
import torch

from fhetorch._ring import Sampler
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.entities import LweSecretKey
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.params import tfhe_primes
from fhetorch.errors import ParameterError

MODULUS = Modulus(tfhe_primes())


def test_ternary_secret_is_uniform_on_three_values():
    count = 60000
    s = alg.generate_lwe_secret_key(Sampler(), count, "ternary")  # the OS-seeded ChaCha20 sampler
    assert s.distribution == "ternary" and s.data.dtype == torch.int64 and s.data.shape == (count,)
    values, counts = s.data.unique(return_counts=True)
    assert values.tolist() == [-1, 0, 1]
    sd = math.sqrt(count * (1 / 3) * (2 / 3))
    for c in counts.tolist():
        assert abs(c - count / 3) <= 5 * sd, counts.tolist()
    # neighbours independent: P(s_i = s_(i+1)) = 1/3
    same = int((s.data[1:] == s.data[:-1]).sum())
    assert abs(same - (count - 1) / 3) <= 5 * math.sqrt((count - 1) * (2 / 9))
    glwe = alg.generate_glwe_secret_key(Sampler(), 2, 1024, "ternary")
    assert glwe.data.shape == (2, 1024) and set(glwe.data.unique().tolist()) == {-1, 0, 1}
    assert glwe.as_lwe_key().distribution == "ternary"
    binary = alg.generate_lwe_secret_key(Sampler(), 4096)
    assert binary.distribution == "binary" and set(binary.data.unique().tolist()) == {0, 1}
    with pytest.raises(ParameterError, match="binary' or 'ternary"):
        alg.generate_lwe_secret_key(Sampler(), 8, "gaussian")


def test_two_keys_differ():
    a, b = (alg.generate_lwe_secret_key(Sampler(), 256, "ternary").data for _ in range(2))
    assert not torch.equal(a, b)


def _edge_masks(two_n: int, count: int) -> torch.Tensor:
    """Values of [0, q): 0, 1, q - 1, both neighbours of random half steps (j + 1/2) q / 2N, and
    uniform ones."""
    q = MODULUS.q
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    j = torch.randint(0, two_n, (count,), generator=g)
    half = [(2 * int(v) + 1) * q // (2 * two_n) for v in j]
    edges = [0, 1, q - 1] + half + [h + 1 for h in half]
    rand = [int(v) for v in torch.randint(0, 1 << 62, (count,), generator=g) % q]
    return torch.tensor(edges + rand, dtype=torch.int64)


def test_split_secret_and_extended_mask_keep_the_phase():
    n, rows = 64, 200
    s = alg.generate_lwe_secret_key(Sampler(), n, "ternary")
    bits = alg.split_ternary_secret(s)
    assert bits.shape == (2 * n,) and set(bits.unique().tolist()) <= {0, 1}
    assert torch.equal(bits[0::2] - bits[1::2], s.data), "s = s+ - s-"
    assert int((bits[0::2] * bits[1::2]).sum()) == 0, "s+_i and s-_i are never both 1"
    assert alg.bootstrap_key_bits(s)[1] and torch.equal(alg.bootstrap_key_bits(s)[0], bits)
    pool = _edge_masks(2048, rows * n)
    a = pool[torch.randperm(pool.numel())[: rows * n]].view(rows, n)  # edges and uniform values, mixed
    b = _edge_masks(2048, rows)[:rows]
    ct = torch.cat((a, b.unsqueeze(-1)), -1)
    ext = alg.extend_lwe_mask(ct, MODULUS)
    assert ext.shape == (rows, 2 * n + 1) and int(ext.min()) >= 0 and int(ext.max()) < MODULUS.q
    assert torch.equal(ext[:, 0:-1:2], a) and torch.equal(ext[:, -1], b)
    assert torch.equal(MODULUS.add(ext[:, 1:-1:2], a), torch.zeros_like(a)), "the s- masks are -a mod q"
    binary_key = LweSecretKey(bits)
    assert torch.equal(alg.decrypt_lwe_ciphertext(MODULUS, binary_key, ext),
                       alg.decrypt_lwe_ciphertext(MODULUS, s, ct)), "<a_ext, s_ext> = <a, s> mod q"


@pytest.mark.parametrize("log_2n", [11, 12, 16])
def test_modulus_switch_commutes_with_the_extension(log_2n):
    """What the kernels compute, round(2N x / q) on the extended mask, equals the extension of
    the switched mask at 2N: the s+ and s- rotations cancel exactly when s_i = 0."""
    two_n = 1 << log_2n
    a = _edge_masks(two_n, 4000)
    ct = torch.cat((a, torch.zeros(1, dtype=torch.int64)))  # one ciphertext, body 0
    sw = alg.modulus_switch(ct, MODULUS, log_2n)
    sw_ext = alg.modulus_switch(alg.extend_lwe_mask(ct, MODULUS), MODULUS, log_2n)
    assert torch.equal(sw_ext[0:-1:2], sw[:-1])
    assert torch.equal(sw_ext[1:-1:2], (-sw[:-1]) % two_n)


def test_multi_bit_key_refuses_a_ternary_secret():
    with pytest.raises(ParameterError, match="binary LWE secret"):
        alg.subset_indicators(alg.generate_lwe_secret_key(Sampler(), 8, "ternary"), 2)
