"""Where the values of a feature map sit in the slots, and linear layers as slot matrices.

A `Layout` places a (C, H, W) image, or a (F,) vector, in the slots of one ciphertext, with
the multiplexed packing of Lee et al. 2022:

    slot(c, y, x) = (c // g^2) * block + (y * g + (c % g^2) // g) * row + x * g + c % g,
    row = W * g, block = H * g * row,   g = the layout's gap

`gap` is 1 for the input and multiplies by s at each stride-s layer: a strided convolution
writes its output at every s-th position of its input's grid, and the g^2 - 1 positions in
between hold other channels (channel c sits at sub-position (c % g^2) // g, c % g of its
block). Every stride keeps the image grid, so each linear layer keeps a small set of slot
offsets (diagonals), and the values stay dense: a 64 x 8 x 8 map takes 4096 slots.
A convolution or pooling whose output does not fit its input's grid that way (an even
kernel growing the map, a stride that does not divide it, unequal strides) writes a
row-major layout of its own (gap 1, grid = its size): any torch geometry has a layout, the
maps of these just have more diagonals (conv_geometry, conv_layout).

Replication: an image layout occupies `period` slots (a power of two) and is repeated
n / period times over the n slots. A map between layouts writes every copy of its output and
reads the copy of its input that keeps the same offset in every copy, so the diagonal
offsets only count modulo the period: cyclic channel shifts cost no extra diagonal (a
stage-3 ResNet-20 convolution has 4 x 225 diagonals instead of 7 x 225). A vector layout
(F,) has period n: one copy, at slots 0..F-1.

Linear layers become `SlotMap`s: a sparse matrix over the slots (rows = output slots,
columns = input slots) and a bias vector, built from the layer's weights and the two layouts
(conv_map, pool_map, global_pool_map, matrix_map, gather_map); consecutive maps compose into
one (a sparse product). A SlotMap becomes a `circuits.LinearTransform` through its
generalised diagonals (offset = column - row mod n). Used by the image operations on
EncryptedTensors (tensor/image.py) and by compiled models (nn/layout.py, nn/run.py).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ..errors import LayoutError, ShapeError


@dataclass(frozen=True)
class Layout:
    shape: tuple  # (C, H, W) or (F,)
    gap: int = 1
    grid: tuple = ()  # (H * gap, W * gap) of the image grid; () for vectors

    @staticmethod
    def image(C: int, H: int, W: int) -> "Layout":
        return Layout((C, H, W), 1, (H, W))

    @staticmethod
    def vector(n: int) -> "Layout":
        return Layout((n,), 1, ())

    @property
    def is_image(self) -> bool:
        return len(self.shape) == 3

    @property
    def span(self) -> int:
        """Slots from 0 to the last one used, + 1."""
        if not self.is_image:
            return self.shape[0]
        return int(self.slot_indices().max()) + 1

    def period(self, n: int) -> int:
        """The slots one copy occupies: the span rounded up to a power of two (n for vectors)."""
        if not self.is_image:
            return n
        return 1 << max(0, (self.span - 1).bit_length())

    def slot_indices(self) -> torch.Tensor:
        """Slot index of every value (copy 0), in the natural (C, H, W) / (F,) order (int64)."""
        if not self.is_image:
            return torch.arange(self.shape[0])
        C, H, W = self.shape
        g = self.gap
        gh, gw = self.grid
        c = torch.arange(C).view(C, 1, 1)
        sub = c % (g * g)
        y = torch.arange(H).view(1, H, 1) * g + sub // g
        x = torch.arange(W).view(1, 1, W) * g + sub % g
        return ((c // (g * g)) * (gh * gw) + y * gw + x).flatten()

    def strided(self, C: int, s: int) -> "Layout":
        """The layout of a stride-s layer's output with C channels on this grid."""
        if not self.is_image:
            raise LayoutError("strided layer: needs an image layout; apply it to an image (C, H, W)")
        _, H, W = self.shape
        if H % s or W % s:
            raise LayoutError(f"strided layer: stride {s} on a {H}x{W} map leaves a remainder; use even sizes")
        return Layout((C, H // s, W // s), self.gap * s, self.grid)

    def pack(self, values: torch.Tensor, n: int) -> torch.Tensor:
        """(C, H, W) / (F,) values -> an n-slot vector, repeated every period (zeros elsewhere)."""
        p = self.period(n)
        out = torch.zeros(p, dtype=torch.float64)
        out[self.slot_indices()] = values.reshape(-1).to(torch.float64)
        return out.repeat(n // p)

    def unpack(self, slots: torch.Tensor) -> torch.Tensor:
        return slots[self.slot_indices().to(slots.device)].reshape(self.shape)


@dataclass
class SlotMap:
    """y = M S x + bias over n slots: M as COO (rows, cols, vals), bias (n,) float64, and S a
    rotation-sum tree (x <- x + rot_k(x) for each step k of `presum`; none by default) that
    costs rotations but no level and no diagonals: global average pooling sums its H x W
    positions that way, so the pooled map and the linear layer after it keep ~200 diagonals
    (as one slot matrix they would have one per slot of the feature map)."""

    n: int
    rows: torch.Tensor
    cols: torch.Tensor
    vals: torch.Tensor
    bias: torch.Tensor
    presum: tuple = ()

    def dense_apply(self, x: torch.Tensor) -> torch.Tensor:
        """The map on a plaintext slot vector (tests, simulation of layouts)."""
        for k in self.presum:
            x = x + torch.roll(x, -k)
        y = torch.zeros(self.n, dtype=torch.float64)
        y.index_add_(0, self.rows, self.vals * x[self.cols])
        return y + self.bias

    def expanded(self) -> "SlotMap":
        """The same map with S multiplied into M (no presum)."""
        rows, cols, vals = self.rows, self.cols, self.vals
        for k in self.presum:  # M (I + R_k): every entry (i, j) also reads j + k
            rows, cols, vals = torch.cat([rows, rows]), torch.cat([cols, (cols + k) % self.n]), torch.cat([vals, vals])
        return SlotMap(self.n, rows, cols, vals, self.bias)

    def then(self, other: "SlotMap") -> "SlotMap":
        """other after self: (other.M @ self.M, other.M @ self.bias + other.bias), self's presum kept."""
        if other.presum:
            other = other.expanded()
        with warnings.catch_warnings():  # torch's notes on sparse invariants / beta CSR support
            warnings.simplefilter("ignore", UserWarning)
            a = torch.sparse_coo_tensor(torch.stack([self.rows, self.cols]), self.vals, (self.n, self.n)).coalesce()
            b = torch.sparse_coo_tensor(torch.stack([other.rows, other.cols]), other.vals,
                                        (other.n, other.n)).coalesce()
            m = torch.sparse.mm(b, a).coalesce()
        bias = other.dense_apply(self.bias)  # other.M self.bias + other.bias
        idx = m.indices()
        return SlotMap(self.n, idx[0], idx[1], m.values(), bias, self.presum)

    def scaled(self, in_factor: float, out_factor: float) -> "SlotMap":
        """The map between scaled values: y / out_factor = M (x / in_factor) * in_factor / out_factor + bias / out_factor."""
        return SlotMap(self.n, self.rows, self.cols, self.vals * (in_factor / out_factor), self.bias / out_factor,
                       self.presum)

    def offsets(self) -> int:
        """How many distinct diagonals (before cancellations) the map has."""
        return int(torch.unique((self.cols - self.rows) % self.n).numel())

    def diagonals(self) -> dict:
        """{offset k: (n,) diagonal} with diag_k[i] = M[i, (i + k) mod n] (circuits/linear.py)."""
        ks, which = torch.unique((self.cols - self.rows) % self.n, return_inverse=True)
        d = torch.zeros(ks.numel(), self.n, dtype=torch.float64)
        d.index_put_((which, self.rows), self.vals, accumulate=True)
        keep = d.ne(0).any(dim=1)
        return {int(k): row for k, row, ok in zip(ks.tolist(), d, keep.tolist()) if ok}


def coo_map(n, rows, cols, vals, lin: Layout, lout: Layout, bias=None):
    """The SlotMap of out[rows] += vals * in[cols] (copy-0 slots of the two layouts), written to
    every copy of the output; each entry reads the input's copy at offset [0, period) from its
    row, so offsets count modulo the input's period (module doc)."""
    rows, cols, vals = rows.reshape(-1).long(), cols.reshape(-1).long(), vals.reshape(-1).to(torch.float64)
    p_in, p_out = lin.period(n), lout.period(n)
    copies = n // p_out
    rows = (rows.view(1, -1) + torch.arange(copies).view(-1, 1) * p_out).flatten()
    # the input's value sits at cols + any multiple of p_in: take the one at offset [0, p_in)
    cols = (rows + (cols.repeat(copies) - rows) % p_in) % n
    vals = vals.repeat(copies)
    full = torch.zeros(n, dtype=torch.float64)
    if bias is not None:
        full[:p_out] = bias[:p_out]
        full = full[:p_out].repeat(copies)
    return SlotMap(n, rows, cols, vals, full)


def pair(v, what: str) -> tuple:
    """An int or a pair of ints (torch's convention for kernel sizes, strides, paddings)."""
    t = (v, v) if isinstance(v, int) and not isinstance(v, bool) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(t) != 2 or not all(isinstance(a, int) and not isinstance(a, bool) for a in t):
        raise ShapeError(f"{what} must be an int or a pair of ints, got {v!r}")
    return t


def conv_geometry(size: tuple, kernel: tuple, stride=1, padding=0, dilation=1, what: str = "conv2d"):
    """((Ho, Wo), (top, left) padding) of a convolution or pooling window on an (H, W) map,
    as torch computes them: Ho = (H + 2 p - d (k - 1) - 1) // s + 1; padding 'valid' is 0 and
    'same' (stride 1) keeps the size, with torch's extra row / column at the bottom / right
    for even kernels."""
    (sh, sw), (dh, dw) = pair(stride, f"{what}: stride"), pair(dilation, f"{what}: dilation")
    if min(sh, sw, dh, dw) < 1:
        raise ShapeError(f"{what}: stride and dilation must be >= 1, got stride {stride}, dilation {dilation}")
    span = ((kernel[0] - 1) * dh + 1, (kernel[1] - 1) * dw + 1)  # the window's reach
    if padding == "valid":
        padding = 0
    if padding == "same":
        if (sh, sw) != (1, 1):
            raise ShapeError(f"{what}: padding='same' needs stride 1 (as in torch); give the padding as numbers")
        return tuple(size), ((span[0] - 1) // 2, (span[1] - 1) // 2)
    if isinstance(padding, str):
        raise ShapeError(f"{what}: padding must be 'same', 'valid', an int or a pair of ints, got {padding!r}")
    ph, pw = pair(padding, f"{what}: padding")
    if min(ph, pw) < 0:
        raise ShapeError(f"{what}: padding must be >= 0, got {padding}")
    out = ((size[0] + 2 * ph - span[0]) // sh + 1, (size[1] + 2 * pw - span[1]) // sw + 1)
    if min(out) < 1:
        raise ShapeError(f"{what}: a {kernel[0]}x{kernel[1]} window (dilation {dilation}) does not fit the "
                         f"{size[0]}x{size[1]} map with padding {padding}")
    return out, (ph, pw)


def conv_layout(lin: Layout, C: int, size: tuple, stride) -> Layout:
    """The layout of a convolution's or pooling's output (C channels of `size`) read from lin
    with `stride`: lin's grid with the gap times the stride where the output fits it (no value
    moves: few diagonals), else a row-major layout of its own (any size, any stride; its maps
    have more diagonals)."""
    (Ho, Wo), (sh, sw) = size, pair(stride, "stride")
    if lin.is_image and sh == sw:
        g, (gh, gw) = lin.gap * sh, lin.grid
        if Ho * g <= gh and Wo * g <= gw:
            return Layout((C, Ho, Wo), g, lin.grid)
    return Layout.image(C, Ho, Wo)


def conv_map(n, w, b, stride, padding, lin: Layout, lout: Layout, dilation=1, groups: int = 1):
    """The SlotMap of a convolution (torch's conv2d with zero padding): weight w (Co, Ci / groups,
    kh, kw), bias b or None; stride, dilation: ints or pairs; padding: the (top, left) zeros
    (an int or a pair; conv_geometry gives them); lout's (Ho, Wo) sets where the output stops."""
    Co, Cg, kh, kw = w.shape
    _, H, W = lin.shape
    _, Ho, Wo = lout.shape
    (sh, sw), (ph, pw), (dh, dw) = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
    co, ci, dy, dx, y, x = torch.meshgrid(torch.arange(Co), torch.arange(Cg), torch.arange(kh), torch.arange(kw),
                                          torch.arange(Ho), torch.arange(Wo), indexing="ij")
    cin = (co // (Co // groups)) * Cg + ci  # output channel co reads its group's input channels
    iy, ix = y * sh + dy * dh - ph, x * sw + dx * dw - pw
    ok = (iy >= 0) & (iy < H) & (ix >= 0) & (ix < W) & (w[co, ci, dy, dx] != 0)
    sin, sout = lin.slot_indices().view(lin.shape[0], H, W), lout.slot_indices().view(Co, Ho, Wo)
    rows = sout[co[ok], y[ok], x[ok]]
    cols = sin[cin[ok], iy[ok], ix[ok]]
    vals = w.to(torch.float64)[co[ok], ci[ok], dy[ok], dx[ok]]
    bias = None
    if b is not None:
        bias = torch.zeros(n, dtype=torch.float64)
        bias[sout.flatten()] = b.to(torch.float64).repeat_interleave(Ho * Wo)
    return coo_map(n, rows, cols, vals, lin, lout, bias)


def pool_map(n, k, s, lin: Layout, lout: Layout, padding=0):
    """Average pooling with a k window (int or pair), stride s and zero padding counted in the
    average (torch's count_include_pad=True): a depthwise convolution by 1 / (kh kw)."""
    C = lin.shape[0]
    kh, kw = pair(k, "kernel_size")
    w = torch.full((C, 1, kh, kw), 1.0 / (kh * kw), dtype=torch.float64)
    return conv_map(n, w, None, s, padding, lin, lout, groups=C)


def global_pool_map(n, lin: Layout, lout: Layout):
    """Mean over an H x W map (powers of two): rotation sums along x (steps gap * 2^i) and y
    (steps row * gap * 2^i) leave each channel's sum at its (0, 0) slot; M scales it."""
    C, H, W = lin.shape
    g, row = lin.gap, lin.grid[1]
    steps = tuple(g << i for i in range(W.bit_length() - 1)) + tuple(row * g << i for i in range(H.bit_length() - 1))
    sc = lout.slot_indices()
    m = coo_map(n, sc, sc, torch.full((C,), 1.0 / (H * W), dtype=torch.float64), lin, lout)
    m.presum = steps
    return m


def matrix_map(n, m: torch.Tensor, b, lin: Layout, lout: Layout):
    """out[lout slot i] = sum_j m[i, j] in[lin slot j] (m dense, natural order)."""
    rows, cols = torch.nonzero(m, as_tuple=True)
    sin, sout = lin.slot_indices(), lout.slot_indices()
    bias = None
    if b is not None:
        bias = torch.zeros(n, dtype=torch.float64)
        bias[sout] = b.to(torch.float64)
    return coo_map(n, sout[rows], sin[cols], m.to(torch.float64)[rows, cols], lin, lout, bias)


def gather_map(n, src_index: torch.Tensor, lin: Layout, lout: Layout, scale: float = 1.0):
    """out value i = scale * in value src_index[i] (natural order; -1: zero)."""
    sin, sout = lin.slot_indices(), lout.slot_indices()
    ok = src_index >= 0
    return coo_map(n, sout[ok], sin[src_index[ok]], torch.full((int(ok.sum()),), scale, dtype=torch.float64), lin, lout)


def subsample_map(n, lin: Layout, s: int):
    """(map, output layout) of x[..., ::s, ::s]: the grid stays, the gap grows by s."""
    C, H, W = lin.shape
    lout = lin.strided(C, s)
    _, Ho, Wo = lout.shape
    c, y, x = torch.meshgrid(torch.arange(C), torch.arange(Ho), torch.arange(Wo), indexing="ij")
    src = (c * H * W + y * s * W + x * s).flatten()
    return (None if n is None else gather_map(n, src, lin, lout)), lout


def pad_channels_map(n, lin: Layout, before: int, after: int):
    """(map, output layout) of F.pad(x, (0, 0, 0, 0, before, after)): zero channels around the map."""
    C, H, W = lin.shape
    lout = Layout((C + before + after, H, W), lin.gap, lin.grid)
    src = torch.full((C + before + after, H, W), -1, dtype=torch.long)
    src[before : before + C] = torch.arange(C * H * W).view(C, H, W)
    return (None if n is None else gather_map(n, src.flatten(), lin, lout)), lout


__all__ = ["Layout", "SlotMap", "conv_geometry", "conv_layout", "conv_map", "pool_map", "global_pool_map", "matrix_map",
           "gather_map", "coo_map", "pair", "subsample_map", "pad_channels_map"]
