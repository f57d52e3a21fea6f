"""Layouts and slot maps of a compiled model's layers (graph.py's "linear" kind).

`layer_map` gives the SlotMap (tensor/layout.py) and output Layout of one layer from its
input's layout: convolutions, average and global pooling, linear layers, the option-A
shortcut's slice and channel padding, constants.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..errors import LayoutError
from ..tensor.layout import (Layout, SlotMap, conv_map, gather_map, global_pool_map, matrix_map,  # noqa: F401
                             pad_channels_map, pool_map, subsample_map)
from .graph import UnsupportedLayerError


def layer_layout(layer, module, lin: Layout) -> Layout:
    """The output Layout of a graph.py linear layer reading `lin`."""
    return layer_map(layer, module, lin, None)[1]


def layer_map(layer, module, lin: Layout, n: int | None):
    """(SlotMap or None for a pure layout change, output Layout) of a graph.py linear layer on
    n slots (n None: the layout only)."""
    try:
        return _layer_map(layer, module, lin, n)
    except LayoutError as e:
        raise UnsupportedLayerError(f"nn: {layer.name}: {e}") from e


def _layer_map(layer, module, lin: Layout, n: int | None):
    node, op = layer.node, layer.op
    if op == "identity":
        return None, lin
    if op == "flatten":  # a layout change only: (C, 1, 1) keeps its slots
        return None, _flat(lin) if lin.is_image else lin
    if op == "conv2d":
        m = module
        if not isinstance(m, nn.Conv2d):
            raise UnsupportedLayerError(f"nn: {layer.name}: functional conv2d; use nn.Conv2d")
        s, p = m.stride, m.padding
        if s[0] != s[1] or p[0] != p[1] or not isinstance(p[0], int):
            raise UnsupportedLayerError(f"nn: {layer.name}: use equal strides and integer paddings on both axes")
        lout = lin.strided(m.out_channels, s[0])
        if lout.shape[1:] != tuple(layer.shape[1:]):
            raise UnsupportedLayerError(f"nn: {layer.name}: only 'same'-size convolutions (padding = kernel // 2) "
                                        f"run encrypted; output {tuple(layer.shape)}")
        return (None if n is None else conv_map(n, m.weight.detach(), None if m.bias is None else m.bias.detach(), s[0], p[0], lin, lout)), lout
    if op in ("avg_pool2d", "adaptive_avg_pool2d"):
        C, H, W = lin.shape
        if op == "adaptive_avg_pool2d":
            if tuple(layer.shape[1:]) != (1, 1):
                raise UnsupportedLayerError(f"nn: {layer.name}: adaptive pooling to {layer.shape[1:]}; use output 1")
            k = s = H
        else:
            k = module.kernel_size if module is not None else node.args[1]
            k = k if isinstance(k, int) else k[0]
            s = module.stride if module is not None else (node.args[2] if len(node.args) > 2 else k)
            s = s if isinstance(s, int) else s[0]
        if k == s == H == W and H & (H - 1) == 0:  # global pooling: a rotation-sum tree, values stay in place
            lout = Layout((C, 1, 1), lin.gap, lin.grid)
            return (None if n is None else global_pool_map(n, lin, lout)), lout
        lout = lin.strided(C, s) if H // s > 1 or W // s > 1 else Layout((C, 1, 1), lin.gap * s, lin.grid)
        return (None if n is None else pool_map(n, k, s, lin, lout)), lout
    if op == "linear":
        m = module
        flat = lin if not lin.is_image else _flat(lin)
        lout = Layout.vector(m.out_features)
        return (None if n is None else matrix_map(n, m.weight.detach(), None if m.bias is None else m.bias.detach(), flat, lout)), lout
    if op == "slice":
        idx = node.args[1]
        if not (isinstance(idx, tuple) and len(idx) == 4 and all(isinstance(t, slice) for t in idx)
                and idx[0] == slice(None) and idx[1] == slice(None) and idx[2] == idx[3]
                and idx[2].start in (None, 0) and idx[2].stop is None):
            raise UnsupportedLayerError(f"nn: {layer.name}: only x[:, :, ::s, ::s] slicing runs encrypted")
        return subsample_map(n, lin, idx[2].step or 1)
    if op == "pad":
        pad = tuple(node.args[1])
        if len(pad) != 6 or any(pad[:4]) or not all(isinstance(v, int) for v in pad):
            raise UnsupportedLayerError(f"nn: {layer.name}: only channel zero-padding F.pad(x, (0,0,0,0,a,b)) runs "
                                        "encrypted")
        return pad_channels_map(n, lin, pad[4], pad[5])
    if op == "mul_const":
        c = next(a for a in node.args if not hasattr(a, "op"))
        return (None if n is None else gather_map(n, torch.arange(lin.slots().numel()), lin, lin, float(c))), lin
    raise UnsupportedLayerError(f"nn: {layer.name} ({op}) has no encrypted form yet")


def _flat(lin: Layout) -> Layout:
    """A flattened image whose values are one per channel at 1x1 (after global pooling): slots c * block."""
    C, H, W = lin.shape
    if (H, W) != (1, 1):
        raise UnsupportedLayerError("nn: flatten of a feature map larger than 1x1 runs encrypted only after global "
                                    "average pooling")
    return lin


__all__ = ["Layout", "SlotMap", "layer_layout", "layer_map"]
