"""Image layers on EncryptedTensors: F.conv2d, average / global pooling, flatten, F.linear
and the option-A shortcut (x[..., ::2, ::2], channel F.pad), with plaintext weights.

An image tensor of shape (C, H, W) or (1, C, H, W) is packed in a `Layout` (tensor/layout.py):
a fresh encryption is the gap-1 layout (row-major, the flat packing); a stride-s layer keeps
the grid, multiplies the gap by s and multiplexes the channels into the gaps (Lee et al.
2022), so no values move and every layer keeps few slot offsets. A convolution whose output
does not fit the grid that way (an even kernel growing the map, stride 3 on 8 x 8, ...)
writes a row-major layout of its own: F.conv2d follows torch for every geometry. Each layer
is one slot matrix evaluated as a fused BSGS LinearTransform: one level (flatten: none;
global pooling: rotations and one level). The output carries its layout (`et.layout`); a gap-1 output is the
flat packing again. ctx.decrypt reads any of these layouts.

Rotation keys: the transforms use the steps their diagonals need; with only the default
+-2^i keys they compose each step from those (slower); `image_rotations` lists the steps so
the client can generate them directly.
"""
from __future__ import annotations

import torch

from ..circuits.linear import LinearTransform
from .._ckks import evaluator as ev
from ..errors import LayoutError, ShapeError, UnsupportedOperationError
from .layout import (Layout, SlotMap, conv_geometry, conv_layout, conv_map, global_pool_map, matrix_map,
                     pad_channels_map, pool_map, subsample_map)


def layout_of(x) -> Layout:
    """The image layout of x: its own, or the flat packing of a fresh (C, H, W) tensor."""
    lay = x.layout
    if isinstance(lay, Layout):
        return lay
    if lay is not None:
        raise LayoutError("image layers: this tensor is packed in a compiled model's layout; run the model instead")
    shape = _chw(x)
    return Layout.image(*shape) if len(shape) == 3 else Layout.vector(shape[0])


def _chw(x) -> tuple:
    shape = tuple(x.shape)
    if len(shape) == 4 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) not in (1, 3):
        raise ShapeError(f"image layers on EncryptedTensor: shape (C, H, W) or (1, C, H, W) expected, "
                         f"got {tuple(x.shape)}")
    return shape


def image_layout(x, what: str) -> Layout:
    """layout_of(x) for a layer that needs an image: (C, H, W) or (1, C, H, W)."""
    lay = layout_of(x)
    if not lay.is_image:
        raise ShapeError(f"{what} on EncryptedTensor: an image of shape (C, H, W) or (1, C, H, W) expected, got "
                         f"{tuple(x.shape)}; reshape the plaintext before encrypting")
    return lay


def _apply(x, m: SlotMap, lout: Layout, shape: tuple):
    """x's ciphertext(s) through slot map m (one level): a tensor of layout lout and `shape`
    (the batch dimension of x, if any, is put back)."""
    ctx = x.ctx
    shape = ((1,) + tuple(shape)) if len(x.shape) in (2, 4) and x.shape[0] == 1 else tuple(shape)
    flat = lout.is_image and lout.gap == 1 and lout.grid == tuple(lout.shape[1:])
    if x.multi or m.n > ctx.slots:
        return _apply_blocks(x, m, lout, shape, flat)
    n = max(x.slots, m.n)
    ct = x.ciphertext.replace(slots=n)  # a packing of S slots is also one of any multiple
    for k in m.presum:
        ct = ev.add(ctx, ct, ev.rotate(ctx, ct, k))
    ct = LinearTransform.from_diagonals(ctx, m.diagonals(), n)(ct)
    if bool(m.bias.any()):
        ct = ev.add_values(ctx, ct, m.bias.to(ctx.device))
    if flat:  # the flat packing again
        return x._like(ct.replace(slots=lout.period(n)), shape=shape).with_layout(None)
    return x._like(ct, shape=shape).with_layout(lout)


def _apply_blocks(x, m: SlotMap, lout: Layout, shape: tuple, flat: bool):
    """A map over V = m.n > slots virtual slots, for tensors spanning several ciphertexts
    (virtual slot s is slot s % slots of ciphertext s // slots): output block i = the sum over
    input blocks j of the map's (i, j) block, each one n-slot LinearTransform (one level)."""
    ctx, n = x.ctx, x.ctx.slots
    if m.presum:
        m = m.expanded()  # rotations would cross ciphertexts: the sums go into the matrix
    cts = [ct.replace(slots=n) for ct in x.ciphertexts]
    p_out = lout.period(m.n)
    k_out = 1 if p_out <= n else -(-(int(lout.slot_indices().max()) + 1) // n)
    keep = m.rows < k_out * n
    rows, cols, vals = m.rows[keep], m.cols[keep], m.vals[keep]
    bi, bj = rows // n, cols // n
    out = []
    for i in range(k_out):
        acc = None
        for j in range(len(cts)):
            sel = (bi == i) & (bj == j)
            if not bool(sel.any()):
                continue
            block = SlotMap(n, rows[sel] % n, cols[sel] % n, vals[sel], torch.zeros(n, dtype=torch.float64))
            y = LinearTransform.from_diagonals(ctx, block.diagonals(), n)(cts[j])
            acc = y if acc is None else ev.add(ctx, acc, y)
        if acc is None:
            raise LayoutError(f"image layer: output block {i} reads nothing (an empty map)")
        bias = m.bias[i * n : (i + 1) * n]
        if bool(bias.any()):
            acc = ev.add_values(ctx, acc, bias.to(ctx.device))
        out.append(acc)
    if k_out == 1:
        ct = out[0].replace(slots=lout.period(n)) if flat else out[0]
        return type(x)(ctx, ct, shape, x.is_complex(), None if flat else lout)
    return type(x)(ctx, out, shape, x.is_complex(), None if flat else lout)


def _slots(x, lout: Layout) -> int:
    """The (virtual) slot count of a map from x's layout to lout: a power of two holding both
    layouts' periods and all of x's ciphertexts."""
    n = max(x.slots * x.count, layout_of(x).period(x.ctx.slots),
            lout.period(x.ctx.slots) if lout.is_image else 1)
    return 1 << max(0, (n - 1).bit_length())


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d with plaintext weights, any kernel, stride, padding ('same',
    'valid', ints or pairs), dilation and groups: one level. The output keeps x's grid when it
    fits there (tensor/layout.py conv_layout), else it gets a row-major layout of its own."""
    lin = image_layout(x, "conv2d")
    w = torch.as_tensor(weight).detach()
    lout, _ = _conv_geometry(lin, w, bias, stride, padding, dilation, groups)
    m, lout = conv2d_map(lin, _slots(x, lout), w, bias, stride, padding, dilation, groups)
    return _apply(x, m, lout, lout.shape)


def conv2d_map(lin: Layout, n: int, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """(SlotMap on n slots, output Layout) of conv2d reading layout lin."""
    w = torch.as_tensor(weight).detach()
    b = None if bias is None else torch.as_tensor(bias).detach()
    lout, pad = _conv_geometry(lin, w, b, stride, padding, dilation, groups)
    return conv_map(n, w, b, stride, pad, lin, lout, dilation, groups), lout


def _conv_geometry(lin: Layout, w, b, stride, padding, dilation, groups):
    """(output layout, (top, left) padding) of conv2d; ShapeError for arguments torch would refuse."""
    C, H, W = lin.shape
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ShapeError(f"conv2d: groups must be a positive int, got {groups!r}")
    if w.dim() != 4 or w.shape[1] * groups != C or w.shape[0] % groups:
        raise ShapeError(f"conv2d: weight of shape {tuple(w.shape)} for {C} input channels and groups={groups}; "
                         "expected (out_channels, in_channels / groups, kh, kw), out_channels divisible by groups")
    if b is not None and tuple(torch.as_tensor(b).shape) != (w.shape[0],):
        raise ShapeError(f"conv2d: bias of shape {tuple(torch.as_tensor(b).shape)} for {w.shape[0]} output channels")
    size, pad = conv_geometry((H, W), tuple(w.shape[2:]), stride, padding, dilation)
    return conv_layout(lin, w.shape[0], size, stride), pad


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    s = k if stride is None else (stride if isinstance(stride, int) else stride[0])
    if padding not in (0, (0, 0)) or k != s:
        raise UnsupportedOperationError("avg_pool2d on EncryptedTensor: kernel = stride and no padding")
    lin = layout_of(x)
    C, H, W = lin.shape
    if k == H == W:
        return adaptive_avg_pool2d(x, 1)
    lout = lin.strided(C, s)
    return _apply(x, pool_map(_slots(x, lout), k, s, lin, lout), lout, lout.shape)


def adaptive_avg_pool2d(x, output_size):
    if output_size not in (1, (1, 1)):
        raise UnsupportedOperationError("adaptive_avg_pool2d on EncryptedTensor: output size 1 (global pooling) only")
    lin = layout_of(x)
    C, H, W = lin.shape
    if H != W or H & (H - 1):
        raise UnsupportedOperationError(f"global pooling on EncryptedTensor: square maps of a power-of-two side, "
                                        f"got {H}x{W}")
    lout = Layout((C, 1, 1), lin.gap, lin.grid)
    return _apply(x, global_pool_map(_slots(x, lout), lin, lout), lout, (C, 1, 1))


def flatten(x, start_dim=0, end_dim=-1):
    """A (C, 1, 1) map after global pooling, as C values (no level: the layout says where they are)."""
    lin = layout_of(x)
    if not lin.is_image:
        return x
    C, H, W = lin.shape
    if (H, W) != (1, 1):
        raise UnsupportedOperationError("flatten on an encrypted image: only after global pooling (C x 1 x 1)")
    shape = (1, C) if len(x.shape) == 4 and start_dim == 1 else (C,)
    return x._like(x.ciphertext, shape=shape)


def linear(x, weight, bias=None):
    """F.linear on a flattened image layout: the C values read where the layout has them; the
    m outputs come out as the flat packing of a fresh (m,) tensor (every copy written)."""
    lin = layout_of(x)
    w = torch.as_tensor(weight).detach()
    if w.dim() != 2 or w.shape[1] != lin.shape[0]:
        raise ShapeError(f"linear: weight of shape {tuple(w.shape)} for {lin.shape[0]} encrypted values")
    lout = Layout((w.shape[0], 1, 1), 1, (1, 1))  # m values at slots 0..m-1, repeated every power of two >= m
    m = matrix_map(_slots(x, lout), w, None if bias is None else torch.as_tensor(bias).detach(), lin, lout)
    return _apply(x, m, lout, (w.shape[0],))


def subsample(x, s: int):
    """x[..., ::s, ::s]: the option-A shortcut's subsampling (the grid stays, the gap grows)."""
    lin = layout_of(x)
    m, lout = subsample_map(_slots(x, lin.strided(lin.shape[0], s)), lin, s)
    return _apply(x, m, lout, lout.shape)


def pad_channels(x, before: int, after: int):
    """F.pad(x, (0, 0, 0, 0, before, after)): zero channels around the map (the option-A shortcut)."""
    lin = layout_of(x)
    lout = Layout((lin.shape[0] + before + after,) + tuple(lin.shape[1:]), lin.gap, lin.grid)
    m, lout = pad_channels_map(_slots(x, lout), lin, before, after)
    return _apply(x, m, lout, lout.shape)


__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "conv2d", "flatten", "layout_of", "linear", "pad_channels", "subsample"]
