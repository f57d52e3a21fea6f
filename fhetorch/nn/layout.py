"""Layouts and slot maps of a compiled model's layers (graph.py's "linear" kind).

`layer_map` gives the SlotMap (tensor/layout.py) and output Layout of one layer from its
input's layout: convolutions, average and global pooling, linear layers, the option-A
shortcut's slice and channel padding, constants.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..errors import LayoutError, ShapeError, UnsupportedLayerError
from ..tensor.layout import (Layout, SlotMap, conv_geometry, conv_layout, conv_map, gather_map,  # noqa: F401
                             global_pool_map, matrix_map, pad_channels_map, pair, pool_map, subsample_map)
from .maxpool import layer_call_args, max_pool_layout


def layer_layout(layer, module, lin: Layout) -> Layout:
    """The output Layout of a graph.py linear layer reading `lin`."""
    return layer_map(layer, module, lin, None)[1]


def layer_map(layer, module, lin: Layout, n: int | None):
    """(SlotMap or None for a pure layout change, output Layout) of a graph.py linear layer on
    n slots (n None: the layout only)."""
    try:
        return _layer_map(layer, module, lin, n)
    except (LayoutError, ShapeError) as e:
        raise UnsupportedLayerError(f"nn: {layer.name}: {e}") from e


def _layer_map(layer, module, lin: Layout, n: int | None):
    node, op = layer.node, layer.op
    if op == "identity":
        return None, lin
    if op == "flatten":  # a flattened image keeps its layout: slots() lists them in flatten's order
        return None, lin
    if op in ("conv2d", "avg_pool2d", "adaptive_avg_pool2d") and not lin.is_image:
        raise UnsupportedLayerError(f"nn: {layer.name} ({op}) reads a vector of {lin.shape[0]} values; image "
                                    "layers run encrypted on feature maps only (not after flatten / view)")
    if op == "conv2d":
        m = module
        if not isinstance(m, nn.Conv2d):
            raise UnsupportedLayerError(f"nn: {layer.name}: functional conv2d; use nn.Conv2d")
        if m.padding_mode != "zeros":
            raise UnsupportedLayerError(f"nn: {layer.name}: padding_mode={m.padding_mode!r}; only zero padding runs "
                                        "encrypted (padding_mode='zeros')")
        size, pad = conv_geometry(lin.shape[1:], m.kernel_size, m.stride, m.padding, m.dilation)
        lout = _same_shape(layer, conv_layout(lin, m.out_channels, size, m.stride))
        if n is None:
            return None, lout
        b = None if m.bias is None else m.bias.detach()
        return conv_map(n, m.weight.detach(), b, m.stride, pad, lin, lout, m.dilation, m.groups), lout
    if op in ("avg_pool2d", "adaptive_avg_pool2d"):
        C, H, W = lin.shape
        if op == "adaptive_avg_pool2d":
            if tuple(layer.shape[1:]) != (1, 1):
                raise UnsupportedLayerError(f"nn: {layer.name}: adaptive pooling to {layer.shape[1:]}; use output 1")
            k = s = (H, W)
            pad = (0, 0)
        else:
            k, s, pad = _avg_pool_args(layer, module)
        if k == s == (H, W) and pad == (0, 0) and H == W and H & (H - 1) == 0:  # global: a rotation-sum tree
            lout = Layout((C, 1, 1), lin.gap, lin.grid)
            return (None if n is None else global_pool_map(n, lin, lout)), lout
        size, pad = conv_geometry((H, W), k, s, pad, what="avg_pool2d")
        lout = _same_shape(layer, conv_layout(lin, C, size, s))
        return (None if n is None else pool_map(n, k, s, lin, lout, pad)), lout
    if op == "linear":
        m = module
        lout = Layout.vector(m.out_features)  # a flattened image keeps its layout: read in place
        b = None if m.bias is None else m.bias.detach()
        return (None if n is None else matrix_map(n, m.weight.detach(), b, lin, lout)), lout
    if op == "slice":
        idx = node.args[1]
        if not (isinstance(idx, tuple) and len(idx) == 4 and all(isinstance(t, slice) for t in idx)
                and idx[0] == slice(None) and idx[1] == slice(None) and idx[2] == idx[3]
                and idx[2].start in (None, 0) and idx[2].stop is None):
            raise UnsupportedLayerError(f"nn: {layer.name}: only x[:, :, ::s, ::s] slicing runs encrypted")
        return subsample_map(n, lin, idx[2].step or 1)
    if op == "pad":
        pad = tuple(node.args[1])
        mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
        value = node.args[3] if len(node.args) > 3 else node.kwargs.get("value", None)
        if len(pad) != 6 or any(pad[:4]) or not all(isinstance(v, int) for v in pad) or mode != "constant" \
                or value not in (None, 0):
            raise UnsupportedLayerError(f"nn: {layer.name}: only channel zero-padding F.pad(x, (0,0,0,0,a,b)) runs "
                                        "encrypted")
        return pad_channels_map(n, lin, pad[4], pad[5])
    if op == "mul_const":
        c = next(a for a in node.args if not hasattr(a, "op"))
        return (None if n is None else gather_map(n, torch.arange(lin.slot_indices().numel()), lin, lin, float(c))), lin
    raise UnsupportedLayerError(f"nn: {layer.name} ({op}) has no encrypted form yet")


def _same_shape(layer, lout: Layout) -> Layout:
    """lout, checked against the shape torch gave the layer (a wrong map must not run)."""
    if tuple(lout.shape) != tuple(layer.shape):
        raise UnsupportedLayerError(f"nn: {layer.name}: its encrypted form gives {tuple(lout.shape)}, torch "
                                    f"{tuple(layer.shape)}; this layer's options have no encrypted form yet")
    return lout


def _avg_pool_args(layer, module):
    """(kernel, stride, padding) pairs of an average pooling (nn.AvgPool2d or F.avg_pool2d);
    UnsupportedLayerError for the options that change torch's divisor (ceil_mode,
    count_include_pad=False with padding, divisor_override)."""
    args = layer_call_args(layer, module, ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                           "divisor_override"))
    k = pair(args["kernel_size"], "avg_pool2d: kernel_size")
    s = pair(args.get("stride") or k, "avg_pool2d: stride")
    pad = pair(args.get("padding", 0), "avg_pool2d: padding")
    if args.get("ceil_mode") or args.get("divisor_override") is not None or \
            (any(pad) and args.get("count_include_pad") is False):
        raise UnsupportedLayerError(f"nn: {layer.name}: average pooling with ceil_mode, divisor_override or "
                                    "count_include_pad=False; use the defaults (or padding=0)")
    return k, s, pad


def layer_module(layer, modules: dict):
    """The nn.Module a layer calls (None for functions and methods)."""
    return modules.get(layer.node.target) if layer.node.op == "call_module" else None


def switch_values(lay: Layout, n: int) -> int:
    """The values a switch to TFHE converts for a tensor of layout `lay` packed in n slots: one
    period (the layout repeats every period slots, so the others are copies of the same values;
    the switch's result repeats its values the same way), all n for a vector."""
    return min(n, lay.period(n))


def model_switch_values(layers: list, layouts: dict, n: int) -> dict:
    """{ReLU or act layer name: switch_values of its input's layout} (whether or not the layer runs
    a lookup table)."""
    return {l.name: switch_values(layouts[l.inputs[0]], n) for l in layers if l.kind in ("relu", "act")}


def model_layouts(layers: list, modules: dict, max_slots: int):
    """({value name: Layout}, slot count) of a graph.py layer list: the input's layout (an image
    (C, H, W) or a vector (F,)), each linear layer's output layout, the others' their input's.
    The slot count is the largest period, at most max_slots (one ciphertext). Raises
    UnsupportedLayerError for what the encrypted run cannot do (nn.compile checks it)."""
    inp = layers[0]
    if len(inp.shape) not in (1, 3):
        raise UnsupportedLayerError(f"nn: encrypted models take an image (C, H, W) or a vector (F,) per input; "
                                    f"this one takes {tuple(inp.shape)}")
    layouts = {inp.name: Layout.image(*inp.shape) if len(inp.shape) == 3 else Layout.vector(inp.shape[0])}
    for l in layers[1:]:
        src = layouts[l.inputs[0]]
        if l.kind == "linear":
            layouts[l.name] = layer_layout(l, layer_module(l, modules), src)
            continue
        if l.kind == "max":
            layouts[l.name] = _same_shape(l, max_pool_layout(l, layer_module(l, modules), src))
            continue
        others = [layouts[i] for i in l.inputs[1:] if layouts[i] != src]
        if others:
            raise UnsupportedLayerError(f"nn: {l.name} ({l.op}) joins values packed differently ({src} and "
                                        f"{others[0]}); give both branches the same strides and sizes")
        layouts[l.name] = src
    n = max(lay.period(1) if lay.is_image else 1 << max(0, (lay.span - 1).bit_length()) for lay in layouts.values())
    if n > max_slots:
        raise UnsupportedLayerError(f"nn: the feature maps need {n} slots, more than one ciphertext's {max_slots}; "
                                    "compiled models keep each map in one ciphertext: use a preset with a larger N, "
                                    "or the image layers on EncryptedTensors (F.conv2d, ...), which span several")
    return layouts, n


__all__ = ["Layout", "SlotMap", "layer_layout", "layer_map", "layer_module", "model_layouts", "model_switch_values",
           "switch_values"]
