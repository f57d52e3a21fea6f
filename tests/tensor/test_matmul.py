"""x @ W, torch.matmul, F.linear and torch.sum on 1-D EncryptedTensors (fhetorch/tensor/linear.py)."""
import pytest
import torch
import torch.nn.functional as F

import fhetorch as fhe

BOUND = 1e-6  # |x| <= 1, |W| <= 1/4 (k <= 64), |b| <= 1: measured ~1e-8


def _data(k, m, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(k, dtype=torch.float64, generator=gen) * 2 - 1
    w = (torch.rand(k, m, dtype=torch.float64, generator=gen) * 2 - 1) / 4
    b = torch.rand(m, dtype=torch.float64, generator=gen) * 2 - 1
    return x, w, b


@pytest.mark.parametrize("k,m", [(8, 8), (5, 3), (6, 20), (16, 2), (64, 64)])
def test_matmul_forms(ctx_n10, assert_close, k, m):
    x, w, _ = _data(k, m, k * 100 + m)
    ex = ctx_n10.encrypt(x)
    for name, got in (("x @ W", ex @ w), ("torch.matmul", torch.matmul(ex, w)), ("W^T @ x", w.T @ ex),
                      ("Tensor.matmul", ex.matmul(w))):
        assert got.shape == (m,) and got.level == ex.level - 1
        assert got.slots == 1 << (m - 1).bit_length()  # the layout of a fresh encryption of shape (m,)
        assert_close(ctx_n10.decrypt(got), x @ w, BOUND, f"{name} {k}x{m}")


@pytest.mark.parametrize("preset", ["toy-n10", "toy-n12"])
def test_linear_with_bias_and_chaining(make_context, assert_close, preset):
    ctx = make_context(preset)
    x, w, b = _data(12, 7, 1)
    ex = ctx.encrypt(x)
    y = F.linear(ex, w.T, b)
    assert_close(ctx.decrypt(y), F.linear(x, w.T, b), BOUND, f"F.linear + bias {preset}")
    assert_close(ctx.decrypt(F.linear(ex, w.T)), F.linear(x, w.T), BOUND, "F.linear, no bias")
    # the result combines with fresh encryptions of its shape and feeds the next layer
    assert_close(ctx.decrypt(y + ctx.encrypt(b)), F.linear(x, w.T, b) + b, BOUND, "y + enc(b)")
    _, w2, b2 = _data(7, 4, 2)
    z = F.linear(y, w2.T, bias=b2)
    assert_close(ctx.decrypt(z), F.linear(F.linear(x, w.T, b), w2.T, b2), BOUND, "two layers")


def test_dot_product_and_complex(ctx_n10, assert_close):
    gen = torch.Generator().manual_seed(9)
    x = torch.rand(10, dtype=torch.float64, generator=gen) - 0.5
    v = torch.rand(10, dtype=torch.float64, generator=gen) - 0.5
    got = ctx_n10.encrypt(x) @ v
    assert got.shape == ()
    assert_close(ctx_n10.decrypt(got), x @ v, BOUND, "dot product")
    wc = (torch.rand(10, 4, dtype=torch.float64, generator=gen) + 1j * torch.rand(10, 4, dtype=torch.float64,
                                                                                       generator=gen)) / 4
    got = ctx_n10.encrypt(x) @ wc
    assert got.is_complex()
    assert_close(ctx_n10.decrypt(got), x.to(torch.complex128) @ wc, BOUND, "complex W")


@pytest.mark.parametrize("k", [1, 8, 13, 64, 100])
def test_sum(ctx_n10, assert_close, k):
    gen = torch.Generator().manual_seed(k)
    x = torch.rand(k, dtype=torch.float64, generator=gen) * 2 - 1
    ex = ctx_n10.encrypt(x)
    for name, got in (("x.sum()", ex.sum()), ("torch.sum", torch.sum(ex)), ("dim=0", ex.sum(dim=0))):
        assert got.shape == ()
        # masking the padding costs one level when numel() is not a power of two
        assert got.level == ex.level - (0 if k == ex.slots else 1)
        assert_close(ctx_n10.decrypt(got), x.sum(), BOUND * k ** 0.5, f"{name} k={k}")
    got = ex.sum(keepdim=True, dim=0)
    assert got.shape == (1,)
    # the sum is a valid 1-slot packing: it adds to a fresh encryption of a scalar
    assert_close(ctx_n10.decrypt(ex.sum() + ctx_n10.encrypt(torch.tensor(1.0, dtype=torch.float64))),
                 x.sum() + 1, BOUND * k ** 0.5, "sum + enc(1)")


def test_errors(ctx_n10):
    ex = ctx_n10.encrypt(torch.zeros(8, dtype=torch.float64))
    with pytest.raises(ValueError, match="more than the 512 slots"):
        ex @ torch.zeros(8, 600, dtype=torch.float64)
    with pytest.raises(ValueError, match="does not match"):
        ex @ torch.zeros(7, 4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="1-D"):
        ctx_n10.encrypt(torch.zeros(2, 4, dtype=torch.float64)) @ torch.zeros(4, 4, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="both operands encrypted"):
        ex @ ex
    with pytest.raises(fhe.ShapeError, match="sum: dim 2 is not a dimension"):
        ctx_n10.encrypt(torch.zeros(2, 4, dtype=torch.float64)).sum(dim=2)
    with pytest.raises(NotImplementedError, match="torch.matmul"):
        torch.exp(ex)
