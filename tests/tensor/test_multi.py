"""EncryptedTensors spanning several ciphertexts (more values than slots): element-wise
arithmetic with ciphertexts, scalars and broadcast plaintexts, sums, levels, against torch on
fresh random values; bootstrapping chunk pairs on the toy bootstrappable preset."""
import os
import warnings

import pytest
import torch

import fhetorch as fhe


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


def _rand(gen, *shape):
    return torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1


def test_elementwise_and_sum(ctx_n10, assert_close, gen):
    n = ctx_n10.slots
    x, y = _rand(gen, 3, n - 5), _rand(gen, 3, n - 5)  # 3 n - 15 values: 3 ciphertexts, the last one padded
    ex, ey = ctx_n10.encrypt(x), ctx_n10.encrypt(y)
    assert ex.count == 3 and ex.ciphertext.data.shape[0] == 3 and ex.shape == x.shape  # one batched ciphertext
    row = _rand(gen, n - 5)
    ez = ex * ey + 0.5 * ex - row  # ciphertext x ciphertext, scalar, a broadcast plaintext row
    assert_close(ctx_n10.decrypt(ez), x * y + 0.5 * x - row, 2**-18, "multi-ciphertext arithmetic")
    assert_close(ctx_n10.decrypt((-ez).square()), (x * y + 0.5 * x - row) ** 2, 2**-16, "neg, square")
    s = ex.sum()
    assert s.shape == () and not s.multi
    assert_close(ctx_n10.decrypt(s), x.sum(), 2**-10, "sum over chunks")
    # the last ciphertext's padding slots hold 1 after + 1: the sum must mask them
    assert_close(ctx_n10.decrypt((ex + 1.0).sum()), (x + 1).sum(), 2**-10, "sum with padding slots not zero")
    dropped = ex.drop_level(2)
    assert dropped.level == ex.level - 2
    assert_close(ctx_n10.decrypt(dropped), x, 2**-20, "drop_level")
    with pytest.raises(ValueError, match="shape"):
        ex + ctx_n10.encrypt(_rand(gen, 2 * n))


@pytest.mark.parametrize("padded", [False, True])
def test_mean_division_power_reshape(ctx_n10, assert_close, gen, padded):
    """Over 2 ciphertexts, full (no mask: mean's 1 / n is one product) or padded (in the mask)."""
    n = 2 * ctx_n10.slots - (24 if padded else 0)
    x = _rand(gen, n)
    ex = ctx_n10.encrypt(x)
    assert ex.count == 2
    m = ex.mean()
    assert m.shape == () and m.level == ex.level - 1
    assert_close(ctx_n10.decrypt(m), x.mean(), 2**-18, "mean over chunks")
    assert_close(ctx_n10.decrypt(ex / -3.0 + ex ** 3), x / -3 + x ** 3, 2**-16, "division and cube over chunks")
    r = ex.reshape(4, -1)
    assert r.shape == (4, n // 4) and r.count == 2
    assert_close(ctx_n10.decrypt(r), x.reshape(4, -1), 2**-20, "reshape over chunks")


def test_bootstrap_chunks(gen, assert_close):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.Context("toy-n13-bts", "cpu").keygen(bootstrap=True)
    x = _rand(gen, 5 * ctx.slots)  # five ciphertexts: two pairs in one batched bootstrapping, the fifth its own
    ex = ctx.encrypt(x, level=0)
    out = ex.bootstrap()
    assert out.multi and out.level == ctx.bootstrap_config.user_levels
    assert_close(ctx.decrypt(out), x, 2**-15, "bootstrapped chunks")
