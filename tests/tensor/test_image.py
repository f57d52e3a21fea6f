"""Image layers on EncryptedTensors (tensor/image.py) against torch: F.conv2d (stride 1 and
2, 'same' padding, bias), average and global pooling, flatten, F.linear, the option-A
shortcut (x[..., ::2, ::2] and channel F.pad), a residual block; layouts checked on every
op. toy-n12 (or the device of FHETORCH_TEST_DEVICE); fresh random inputs and weights.
Bound: ~2^-20 of the values' size per layer (CKKS noise at scale 2^40 through <= 5 levels)."""
import os

import pytest
import torch
import torch.nn.functional as F

import fhetorch as fhe
from fhetorch.tensor.layout import Layout


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


def _close(ctx, et, want, what):
    got = ctx.decrypt(et).cpu()
    assert got.shape == want.shape, what
    bound = 1e-5 * max(1.0, float(want.abs().max()))
    err = float((got - want.to(torch.float64)).abs().max())
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d(ctx_n12, gen, stride):
    C, Co, H = int(torch.randint(1, 5, (1,), generator=gen)), int(torch.randint(1, 9, (1,), generator=gen)), 8
    x = torch.randn(1, C, H, H, generator=gen)
    w, b = torch.randn(Co, C, 3, 3, generator=gen) * 0.3, torch.randn(Co, generator=gen)
    ey = F.conv2d(ctx_n12.encrypt(x), w, b, stride=stride, padding=1)
    assert ey.level == ctx_n12.max_level - 1
    assert (ey.layout is None) == (stride == 1)  # stride 2: the gap grows, the grid stays
    _close(ctx_n12, ey, F.conv2d(x, w, b, stride=stride, padding=1), f"conv2d stride {stride}")


def test_residual_block_with_option_a_shortcut(ctx_n12, gen):
    """conv(s=2) -> conv + subsampled, channel-padded shortcut, then pooling, flatten, linear."""
    x = torch.randn(1, 4, 8, 8, generator=gen)
    w1, w2 = torch.randn(8, 4, 3, 3, generator=gen) * 0.3, torch.randn(8, 8, 3, 3, generator=gen) * 0.3
    wl, bl = torch.randn(3, 8, generator=gen), torch.randn(3, generator=gen)

    def block(t):
        y = F.conv2d(F.conv2d(t, w1, None, 2, 1), w2, None, 1, 1)
        return y + F.pad(t[:, :, ::2, ::2], (0, 0, 0, 0, 2, 2))

    ex = ctx_n12.encrypt(x)
    ey, y = block(ex), block(x)
    assert isinstance(ey.layout, Layout) and ey.layout.gap == 2 and ey.layout.grid == (8, 8)
    _close(ctx_n12, ey, y, "residual block")
    ep, p = F.adaptive_avg_pool2d(ey, 1), F.adaptive_avg_pool2d(y, 1)
    _close(ctx_n12, ep, p, "global pooling")
    eo = F.linear(torch.flatten(ep, 1), wl, bl)
    assert eo.layout is None and eo.shape == (1, 3)  # a fresh (1, 3) tensor's flat packing
    _close(ctx_n12, eo, F.linear(torch.flatten(p, 1), wl, bl), "pool -> flatten -> linear")
    _close(ctx_n12, eo * 2 + 1, F.linear(torch.flatten(p, 1), wl, bl) * 2 + 1, "then flat arithmetic")


def test_avg_pool2d(ctx_n12, gen):
    x = torch.randn(3, 8, 8, generator=gen)
    ey = F.avg_pool2d(ctx_n12.encrypt(x), 2)
    _close(ctx_n12, ey, F.avg_pool2d(x, 2), "avg_pool2d")


def test_layouts_are_checked(ctx_n12, gen):
    x = torch.randn(1, 2, 8, 8, generator=gen)
    ex = ctx_n12.encrypt(x)
    strided = F.conv2d(ex, torch.randn(2, 2, 3, 3, generator=gen), None, 2, 1)
    fresh = ctx_n12.encrypt(torch.randn(1, 2, 4, 4, generator=gen))  # same shape, flat layout
    with pytest.raises(fhe.LayoutError, match="layout"):
        strided + fresh
    with pytest.raises(fhe.LayoutError):
        strided + torch.ones(1, 2, 4, 4)
    with pytest.raises(NotImplementedError, match="same"):
        F.conv2d(ex, torch.randn(2, 2, 3, 3), None, 1, 0)
    with pytest.raises(NotImplementedError, match="flatten"):
        torch.flatten(ex, 1)
    with pytest.raises(NotImplementedError, match="indexing"):
        ex[:, :, 1:, :]


def test_feature_maps_over_several_ciphertexts(ctx_n10, gen):
    """A 4 x 16 x 16 map (1024 values) on 512-slot ciphertexts: two ciphertexts; each layer's
    map is cut into (output, input) ciphertext blocks. conv -> conv(s=2) + shortcut -> pool."""
    x = torch.randn(1, 4, 16, 16, generator=gen)
    w1, w2 = torch.randn(4, 4, 3, 3, generator=gen) * 0.3, torch.randn(8, 4, 3, 3, generator=gen) * 0.3
    b1 = torch.randn(4, generator=gen)
    ex = ctx_n10.encrypt(x)
    assert len(ex.ciphertexts) == 2
    ey, y = F.conv2d(ex, w1, b1, 1, 1), F.conv2d(x, w1, b1, 1, 1)
    assert ey.multi and ey.layout is None  # stride 1: the flat packing, still two ciphertexts
    _close(ctx_n10, ey, y, "conv2d over two ciphertexts")
    ez = F.conv2d(ey, w2, None, 2, 1) + F.pad(ey[:, :, ::2, ::2], (0, 0, 0, 0, 2, 2))
    z = F.conv2d(y, w2, None, 2, 1) + F.pad(y[:, :, ::2, ::2], (0, 0, 0, 0, 2, 2))
    assert isinstance(ez.layout, Layout) and ez.layout.gap == 2  # 8 x 8 x 8 multiplexed on the 16 x 16 grid
    _close(ctx_n10, ez, z, "strided block over two ciphertexts")
    ep = F.adaptive_avg_pool2d(ez, 1)
    _close(ctx_n10, ep, F.adaptive_avg_pool2d(z, 1), "global pooling of a multiplexed map")
    with pytest.raises(NotImplementedError, match="image-layout"):
        ez.sum()
