"""Image layers on EncryptedTensors (tensor/image.py) against torch: F.conv2d (every kernel,
stride and padding torch accepts, dilation, groups; its slot maps for all of them, encrypted
runs for a set), average and global pooling, flatten, F.linear, the option-A
shortcut (x[..., ::2, ::2] and channel F.pad), a residual block; layouts checked on every
op. toy-n12 (or the device of FHETORCH_TEST_DEVICE); fresh random inputs and weights.
Bound: ~2^-20 of the values' size per layer (CKKS noise at scale 2^40 through <= 5 levels)."""
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

import fhetorch as fhe
from fhetorch.tensor.image import conv2d_map
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


def _torch_or_none(x, w, b, stride, padding, dilation=1, groups=1):
    try:
        with warnings.catch_warnings():  # torch's note on 'same' padding of even kernels
            warnings.simplefilter("ignore", UserWarning)
            return F.conv2d(x, w, b, stride, padding, dilation, groups)
    except (RuntimeError, ValueError):
        return None


def _layouts(gen):
    """A fresh image's layout and a multiplexed one (gap 2, after a stride-2 layer), C x H x W random."""
    C, H, W = (int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in ((1, 4), (4, 9), (4, 9)))
    return [Layout.image(C, H, W), Layout((C, H, W), 2, (2 * H, 2 * W))]


@pytest.mark.parametrize("kernel", [1, 2, 3, 4, 5, (2, 3)])
def test_conv2d_maps_match_torch_for_every_geometry(gen, kernel):
    """Every stride and padding, on a fresh and a multiplexed layout: where torch computes a
    convolution the slot map gives the same values (in its output layout); where torch refuses,
    conv2d raises ShapeError. Plaintext maps: cheap enough to cover every combination."""
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    n = 512  # holds both layouts (<= 3 x 12 x 12 values out)
    geometries = [(s, p, d) for s in (1, 2, 3, (1, 2)) for p in (0, 1, 2, (0, 1), "same", "valid") for d in (1, 2)]
    for lin in _layouts(gen):
        C, H, W = lin.shape
        x = torch.randn(1, C, H, W, generator=gen, dtype=torch.float64)
        for stride, padding, dilation in geometries:
            Co = int(torch.randint(1, 4, (1,), generator=gen))
            w = torch.randn(Co, C, *k, generator=gen, dtype=torch.float64)
            b = torch.randn(Co, generator=gen, dtype=torch.float64)
            want = _torch_or_none(x, w, b, stride, padding, dilation)
            what = f"kernel {k}, stride {stride}, padding {padding}, dilation {dilation}, {lin}"
            if want is None:
                with pytest.raises(fhe.ShapeError):
                    conv2d_map(lin, n, w, b, stride, padding, dilation)
                continue
            m, lout = conv2d_map(lin, n, w, b, stride, padding, dilation)
            got = lout.unpack(m.dense_apply(lin.pack(x[0], n)))
            assert got.shape == want.shape[1:], what
            torch.testing.assert_close(got, want[0], rtol=1e-9, atol=1e-9, msg=what)


def test_conv2d_maps_with_groups(gen):
    lin = _layouts(gen)[1]
    C, H, W = lin.shape
    lin = Layout((2 * C, H, W), lin.gap, lin.grid)
    x = torch.randn(1, 2 * C, H, W, generator=gen, dtype=torch.float64)
    w = torch.randn(4, C, 3, 3, generator=gen, dtype=torch.float64)
    m, lout = conv2d_map(lin, 512, w, None, 1, 1, 1, 2)
    got = lout.unpack(m.dense_apply(lin.pack(x[0], 512)))
    torch.testing.assert_close(got, F.conv2d(x, w, None, 1, 1, 1, 2)[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel,stride,padding,dilation,groups", [
    (2, 1, 1, 1, 1),        # even kernels grow the map: 8x8 -> 9x9
    (4, 1, 2, 1, 1),
    (3, 1, 0, 1, 1),        # 'valid': 6x6 on the 8x8 grid
    (3, 3, 1, 1, 1),        # stride 3: a row-major layout of its own
    (4, 1, "same", 1, 1),   # torch's extra row and column at the bottom and right
    ((2, 3), (1, 2), (1, 0), 2, 2),
])
def test_conv2d_encrypted_matches_torch(ctx_n10, gen, kernel, stride, padding, dilation, groups):
    C, Co = 2, 2 * int(torch.randint(1, 3, (1,), generator=gen))
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    x = torch.randn(1, C, 8, 8, generator=gen)
    w, b = torch.randn(Co, C // groups, *k, generator=gen) * 0.3, torch.randn(Co, generator=gen)
    ey = F.conv2d(ctx_n10.encrypt(x), w, b, stride, padding, dilation, groups)
    assert ey.level == ctx_n10.max_level - 1
    _close(ctx_n10, ey, F.conv2d(x, w, b, stride, padding, dilation, groups),
           f"conv2d kernel {kernel}, stride {stride}, padding {padding}")


def test_conv2d_after_a_strided_layer_grows_out_of_its_grid(ctx_n10, gen):
    """A multiplexed 4x4 map (gap 2 on the 8x8 grid) through an even kernel: 5x5, no longer
    on the grid, so a row-major layout of its own."""
    x = torch.randn(1, 2, 8, 8, generator=gen)
    w1, w2 = torch.randn(4, 2, 3, 3, generator=gen) * 0.3, torch.randn(3, 4, 2, 2, generator=gen) * 0.3
    ey = F.conv2d(F.conv2d(ctx_n10.encrypt(x), w1, None, 2, 1), w2, None, 1, 1)
    assert ey.layout is None and ey.shape == (1, 3, 5, 5)
    _close(ctx_n10, ey, F.conv2d(F.conv2d(x, w1, None, 2, 1), w2, None, 1, 1), "strided conv then even kernel")


def test_conv2d_errors_say_what_to_change(ctx_n10, gen):
    ex = ctx_n10.encrypt(torch.randn(1, 2, 8, 8, generator=gen))
    w = torch.randn(3, 2, 3, 3, generator=gen)
    with pytest.raises(fhe.ShapeError, match="(C, H, W)"):
        F.conv2d(ctx_n10.encrypt(torch.randn(16, generator=gen)), w, None, 1, 1)
    with pytest.raises(fhe.ShapeError, match="stride 1"):
        F.conv2d(ex, w, None, 2, "same")
    with pytest.raises(fhe.ShapeError, match="padding"):
        F.conv2d(ex, w, None, 1, "full")
    with pytest.raises(fhe.ShapeError, match=">= 0"):
        F.conv2d(ex, w, None, 1, -1)
    with pytest.raises(fhe.ShapeError, match="does not fit"):
        F.conv2d(ex, torch.randn(3, 2, 9, 9), None, 1, 0)
    with pytest.raises(fhe.ShapeError, match="input channels"):
        F.conv2d(ex, torch.randn(3, 4, 3, 3), None, 1, 1)
    with pytest.raises(fhe.ShapeError, match="groups"):
        F.conv2d(ex, torch.randn(3, 1, 3, 3), None, 1, 1, 1, 2)
    with pytest.raises(fhe.ShapeError, match="bias"):
        F.conv2d(ex, w, torch.randn(2), 1, 1)


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
    with pytest.raises(NotImplementedError, match="flatten"):
        torch.flatten(strided, 1)  # a multiplexed layout's slots are not row-major
    assert torch.flatten(ex, 1).shape == (1, 128)  # the flat packing is: a relabelling
    with pytest.raises(NotImplementedError, match="indexing"):
        strided[:, :, 1:, :]  # an image layout: only the shortcut's subsampling


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
