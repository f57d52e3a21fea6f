"""Max pooling by TFHE lookup tables (layer kind "max"): max(a, b) = b + (a - b) [a > b] (the
product form, the default) or b + 2 relu((a - b) / 2) (the direct form; lut.py), the step or the
ReLU through CKKS <-> TFHE switching (fhetorch/circuits/switching), in waves.

Each output position's window is a list of w candidates (the k_h k_w inputs it covers; those in
the padding dropped, the list filled up by repeating its first valid input, since max(a, a) = a
exactly: the grid holds 0). A tournament pairs neighbours wave by wave, an odd one out waiting
for the next wave, so a window of w values takes ceil(log2 w) waves and w - 1 comparisons per
position:
- wave 1 reads the input through slot maps (tensor/layout.py): for a pair (a, b), the
  difference a - b and the base b, each a one-level linear transform into the output layout
  (every position picks its own window entries, so padding costs nothing more);
- later waves read the previous results, already in the output layout: a difference is a
  subtraction.
Every comparison of a wave goes through one switch (a batch of ciphertexts): the LUT takes
e = a - b on twice the ReLU grid's interval, so that the grid point nearest e is twice the one
nearest (a - b) / 2 and the table gives relu((a - b) / 2) in [0, 1] (no level for the 1/2, the
output on its level's nominal scale). The result is b + r + r. The product form's LUT takes e on
[-2, 2] (twice lut.FACTOR_INTERVAL: 0 a midpoint) and gives s = [e > 0]; the result is
b + e s, one multiplication: exact but where a and b are within the switch's noise of each
other (there the error is at most |a - b|).

Values are divided by the input's bound B, which the output shares (a max stays within it).
Levels: the input needs the switch's levels plus the maps' one; the direct form's output sits
one level below the input (at most at the switch's output level): the bases are not refreshed;
the product form's product costs one level per wave (`output_level`). The direct form's error:
each comparison's ReLU input is within half a grid step of (a - b) / 2, so each wave adds at
most one grid step (times B); simulate() computes the same quantised tournament.
"""
from __future__ import annotations

import math

import torch

from ..errors import UnsupportedLayerError
from ..tensor.layout import Layout, coo_map, conv_layout, pair
from .lut import FACTOR_INTERVAL, LUTReLU, factor, grid_interval


def layer_call_args(layer, module, names) -> dict:
    """The arguments `names` of a pooling layer: the module's attributes, or the functional call's
    positional (after the input) and keyword arguments. Raises nothing."""
    if module is not None:
        return {a: getattr(module, a) for a in names}
    node = layer.node
    return dict(zip(names, node.args[1:]), **node.kwargs)


def max_pool_args(layer, module) -> tuple:
    """(kernel, stride, padding, dilation) pairs of nn.MaxPool2d / F.max_pool2d; raises
    UnsupportedLayerError for return_indices (the indices are not a value to encrypt)."""
    args = layer_call_args(layer, module, ("kernel_size", "stride", "padding", "dilation", "ceil_mode",
                                           "return_indices"))
    if args.get("return_indices"):
        raise UnsupportedLayerError(f"nn.compile: {layer.name}: max pooling with return_indices=True has no "
                                    "encrypted form; use return_indices=False")
    k = pair(args["kernel_size"], "max_pool2d: kernel_size")
    s = pair(args.get("stride") or k, "max_pool2d: stride")
    return k, s, pair(args.get("padding", 0), "max_pool2d: padding"), pair(args.get("dilation", 1),
                                                                           "max_pool2d: dilation")


def windows(in_shape: tuple, out_shape: tuple, k, s, pad, dilation) -> torch.Tensor:
    """(C, Ho, Wo, w) int64: the natural-order (C, H, W) index of each position's w = kh kw
    candidates, its valid inputs first (window order), then its first valid input repeated.
    The output size is torch's (out_shape, ceil_mode included): every window holds an input."""
    C, H, W = in_shape
    _, Ho, Wo = out_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = k, s, pad, dilation
    y = torch.arange(Ho).view(Ho, 1, 1) * sh + (torch.arange(kh) * dh).repeat_interleave(kw).view(1, 1, -1) - ph
    x = torch.arange(Wo).view(1, Wo, 1) * sw + (torch.arange(kw) * dw).repeat(kh).view(1, 1, -1) - pw
    ok = (y >= 0) & (y < H) & (x >= 0) & (x < W)  # (Ho, Wo, w)
    if not bool(ok.any(-1).all()):
        raise UnsupportedLayerError(f"nn.compile: a max-pooling window covers padding only (kernel {k}, padding "
                                    f"{pad}); torch needs padding <= kernel / 2")
    flat = y.clamp(0, H - 1) * W + x.clamp(0, W - 1)
    order = torch.argsort((~ok).to(torch.int8), dim=-1, stable=True)  # valid ones first, in window order
    flat, ok = flat.gather(-1, order), ok.gather(-1, order)
    flat = torch.where(ok, flat, flat[..., :1])  # fill with the first valid input
    return flat.unsqueeze(0) + (torch.arange(C) * H * W).view(C, 1, 1, 1)


def tournament(w: int) -> list:
    """The waves of a tournament over w candidates: [[(i, j) pairs of this wave's candidate
    indices], ...]; a wave's results come first in the next wave's list, then the odd one out."""
    waves = []
    while w > 1:
        waves.append([(2 * i, 2 * i + 1) for i in range(w // 2)])
        w = w // 2 + w % 2
    return waves


def simulate_max(x: torch.Tensor, idx: torch.Tensor, bits: int, check, form: str = "direct") -> torch.Tensor:
    """The encrypted tournament in float64 on x / B (N, C, H, W), quantised as the LUTs do (in
    `form`, "direct" or "product"); check(d) counts the LUT inputs (a - b) / 2 outside [-1, 1].
    Returns (N, C, Ho, Wo). Raises nothing."""
    flat = x.reshape(x.shape[0], -1)
    cands = [flat[:, idx[..., j]] for j in range(idx.shape[-1])]
    for wave in tournament(len(cands)):
        nxt = []
        for i, j in wave:
            d = (cands[i] - cands[j]) / 2
            check(d)
            if form == "product":
                nxt.append(cands[j] + 2 * d * larger(2 * LUTReLU.quantise(d, bits, FACTOR_INTERVAL)))
            else:
                nxt.append(cands[j] + 2 * torch.relu(LUTReLU.quantise(d, bits)))
        cands = nxt + (cands[-1:] if len(cands) % 2 else [])
    return cands[0]


def max_pool_layout(layer, module, lin: Layout) -> Layout:
    """The output layout: a convolution's with the pooling's stride (layout.conv_layout)."""
    if not lin.is_image:
        raise UnsupportedLayerError(f"nn: {layer.name} (max_pool2d) reads a vector; max pooling runs on feature maps")
    _, s, _, _ = max_pool_args(layer, module)
    C, Ho, Wo = layer.shape
    return conv_layout(lin, C, (Ho, Wo), s)


def first_wave_maps(n: int, layer, module, lin: Layout, lout: Layout) -> tuple:
    """([(difference map, base map)] of wave 1's pairs, the odd one out's map or None): SlotMaps
    from the input's layout to the output's."""
    k, s, pad, dil = max_pool_args(layer, module)
    idx = windows(lin.shape, layer.shape, k, s, pad, dil)
    sin, sout = lin.slot_indices(), lout.slot_indices()
    rows = sout.view(-1)

    def pick(js, signs):
        cols = torch.cat([sin[idx[..., j].reshape(-1)] for j in js])
        vals = torch.cat([torch.full((rows.numel(),), float(v), dtype=torch.float64) for v in signs])
        return coo_map(n, rows.repeat(len(js)), cols, vals, lin, lout)

    w = idx.shape[-1]
    pairs = [(pick((i, j), (1, -1)), pick((j,), (1,))) for i, j in tournament(w)[0]] if w > 1 else []
    odd = pick((w - 1,), (1,)) if w % 2 else None
    return pairs, odd


def waves(layer, module) -> int:
    k, _, _, _ = max_pool_args(layer, module)
    return math.ceil(math.log2(k[0] * k[1])) if k[0] * k[1] > 1 else 0


def output_level(level_in: int, lut_level: int, waves: int, form: str) -> int:
    """The level of a max pooling's result: wave 1's maps take one level from the input's; the
    direct form adds the bases (no level) at the lower of that and the switch's output level
    `lut_level`; the product form multiplies, one level per wave. Raises nothing."""
    base = min(level_in - 1, lut_level)
    return base - waves if form == "product" else base


def comparisons(layer, module) -> int:
    k, _, _, _ = max_pool_args(layer, module)
    return k[0] * k[1] - 1


def lut_interval(bits: int, form: str = "direct") -> tuple:
    """The LUT's interval for e = a - b: twice the ReLU grid's (the direct form) or twice the
    factor's (the product form). Raises nothing."""
    lo, hi = FACTOR_INTERVAL if form == "product" else grid_interval(bits)
    return (2 * lo, 2 * hi)


def half_relu(e: torch.Tensor) -> torch.Tensor:
    return torch.relu(e / 2)


larger = factor(torch.relu)  # the product form's [e > 0] (1/2 at 0, never a point of its grid)


__all__ = ["comparisons", "first_wave_maps", "half_relu", "larger", "layer_call_args", "lut_interval", "max_pool_args",
           "max_pool_layout", "output_level", "simulate_max", "tournament", "waves", "windows"]
