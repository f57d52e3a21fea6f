"""A trained torch model as a graph of encryptable layers (the compiler's front end).

`lower(model, example)` traces the model with torch.fx (eval mode), folds each BatchNorm into
the convolution or linear layer before it, propagates shapes with the example input, and
returns the traced GraphModule and a list of `Layer`s in execution order. Every layer is of one
of these kinds:

- "input";
- "linear": a map that is linear in the encrypted input plus a plaintext bias: conv2d, linear,
  average pooling, batch norm that could not be folded, flatten / view, the option-A shortcut's
  subsampling slice and channel padding, identity, dropout, a product with a constant. One
  level each once packed (consecutive ones merge into one map; see plan.py);
- "relu": ReLU, replaced by a polynomial approximation on [-B, B], B from calibration (or a
  TFHE lookup table with relu="lut");
- "act": GELU, SiLU, Sigmoid, Tanh, Hardswish: a TFHE lookup table through CKKS <-> TFHE
  switching (fhetorch/nn/lut.py; bootstrappable presets);
- "max": max pooling (nn.MaxPool2d, F.max_pool2d), a tournament of lookup-table ReLUs
  (fhetorch/nn/maxpool.py; bootstrappable presets);
- "add": the sum of two encrypted values (residual connections).

Anything else raises UnsupportedLayerError naming the layer and what to use instead.
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from ..errors import ShapeError, UnsupportedLayerError
from .maxpool import comparisons


@dataclass
class Layer:
    name: str
    kind: str  # "input" | "linear" | "relu" | "act" | "max" | "add" | "op" (a step of known depth: `levels`)
    op: str  # what it is: conv2d, linear, avg_pool2d, flatten, slice, pad, relu, add, ...
    inputs: list
    shape: tuple  # output shape of one sample
    node: fx.Node = field(repr=False, default=None)
    levels: int = 0  # "op" layers: the levels the step consumes (circuits outside fhetorch.nn, e.g. HELR)
    tables: int = 0  # "max" layers: lookup tables (comparisons) per output value


_LINEAR_MODULES = {nn.Conv2d: "conv2d", nn.Linear: "linear", nn.AvgPool2d: "avg_pool2d",
                   nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d", nn.BatchNorm2d: "batch_norm",
                   nn.BatchNorm1d: "batch_norm", nn.Flatten: "flatten", nn.Identity: "identity",
                   nn.Dropout: "identity"}
_LINEAR_FUNCTIONS = {F.avg_pool2d: "avg_pool2d", F.adaptive_avg_pool2d: "adaptive_avg_pool2d",
                     torch.flatten: "flatten", F.pad: "pad", operator.getitem: "slice", F.linear: "linear",
                     F.conv2d: "conv2d", F.dropout: "identity"}
_LINEAR_METHODS = {"view": "flatten", "reshape": "flatten", "flatten": "flatten", "contiguous": "identity"}
_RELU = {F.relu, torch.relu}
# activations computed by lookup tables (kind "act"), module and function forms
_ACT_MODULES = {nn.GELU: "gelu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Hardswish: "hardswish"}
_ACT_FUNCTIONS = {F.gelu: "gelu", F.silu: "silu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid",
                  torch.tanh: "tanh", F.tanh: "tanh", F.hardswish: "hardswish"}
_ACT_METHODS = {"sigmoid": "sigmoid", "tanh": "tanh"}
_ADD = {operator.add, torch.add}
_MAX_POOL = {nn.MaxPool2d: "max_pool2d", F.max_pool2d: "max_pool2d"}

# what to use instead, by module / function name
_ALTERNATIVES = {
    "AdaptiveMaxPool2d": "use nn.MaxPool2d with the window of the map, or nn.AdaptiveAvgPool2d",
    "Softmax": "return the logits and apply softmax after decryption",
    "LayerNorm": "use BatchNorm (folded into the previous layer)",
}


def _unsupported(name: str, what: str) -> UnsupportedLayerError:
    hint = _ALTERNATIVES.get(what, "use conv2d / linear / average pooling / batch norm / ReLU / residual additions")
    return UnsupportedLayerError(f"nn.compile: layer {name!r} ({what}) cannot be computed encrypted; {hint}")


def activation_function(layer: Layer, modules: dict):
    """The torch callable of an "act" layer (its module, or its function with the call's keywords)."""
    node = layer.node
    if node.op == "call_module":
        return modules[node.target]
    if node.op == "call_method":
        return getattr(torch, node.target)
    f, kw = node.target, dict(node.kwargs)
    return (lambda x: f(x, **kw)) if kw else f


def trace(model: nn.Module) -> fx.GraphModule:
    """An fx GraphModule of an eval-mode copy of model, BatchNorms folded into the layer before."""
    m = copy.deepcopy(model).eval()
    try:
        gm = fx.symbolic_trace(m)
    except Exception as e:  # noqa: BLE001 - fx's own errors are obscure; name the cause
        raise UnsupportedLayerError(f"nn.compile: torch.fx cannot trace the model ({e}); data-dependent control "
                                    "flow cannot run encrypted") from e
    return _fold_batch_norms(gm)


# (layer, batch norm) pairs whose batch norm folds into the layer's weights and bias
_FOLDS = ((nn.Conv1d, nn.BatchNorm1d, fuse_conv_bn_eval), (nn.Conv2d, nn.BatchNorm2d, fuse_conv_bn_eval),
          (nn.Conv3d, nn.BatchNorm3d, fuse_conv_bn_eval), (nn.Linear, nn.BatchNorm1d, fuse_linear_bn_eval))


def _fold_batch_norms(gm: fx.GraphModule) -> fx.GraphModule:
    """Each eval-mode BatchNorm with running statistics that reads a conv / linear layer's output,
    and is that output's only reader, folded into the layer (the layer's module replaced by a
    fused copy, the BatchNorm removed)."""
    modules = dict(gm.named_modules())
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or len(node.args) != 1 or not isinstance(node.args[0], fx.Node):
            continue
        prev = node.args[0]
        if prev.op != "call_module" or len(prev.users) != 1:
            continue
        layer, bn = modules[prev.target], modules[node.target]
        fold = next((f for lt, bt, f in _FOLDS if type(layer) is lt and type(bn) is bt), None)
        if fold is None or not bn.track_running_stats or bn.running_mean is None:
            continue
        fused = fold(layer, bn)
        parent, _, attr = prev.target.rpartition(".")
        setattr(gm.get_submodule(parent) if parent else gm, attr, fused)
        modules[prev.target] = fused
        node.replace_all_uses_with(prev)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


def _node_args(node: fx.Node) -> list:
    """The node's inputs that are other nodes (values), not constants."""
    return [a for a in node.args if isinstance(a, fx.Node)]


def _expected_input(gm: fx.GraphModule) -> str:
    """What the first layer reading the input expects, for error messages ("" if unknown)."""
    modules = dict(gm.named_modules())
    inp = next(n for n in gm.graph.nodes if n.op == "placeholder")
    for user in inp.users:
        mod = modules.get(user.target) if user.op == "call_module" else None
        if isinstance(mod, nn.Conv2d):
            return f"; its first layer {user.target!r} takes (n, {mod.in_channels}, H, W)"
        if isinstance(mod, nn.Linear):
            return f"; its first layer {user.target!r} takes (n, {mod.in_features})"
    return ""


def lower(model: nn.Module, example: torch.Tensor):
    """(GraphModule with BN folded, [Layer]) for a model and an example batch."""
    gm = trace(model)
    example = example.to(torch.float32)
    try:  # before ShapeProp, which prints a traceback of its own
        with torch.no_grad():
            gm(example)
    except Exception as e:  # noqa: BLE001 - torch's message is kept
        shape = ", ".join(["n"] + [str(d) for d in example.shape[1:]])
        raise ShapeError(f"nn.compile: the model does not run on calibration inputs of shape ({shape})"
                         f"{_expected_input(gm)} ({type(e).__name__}: {e})") from e
    ShapeProp(gm).propagate(example)
    layers = []
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        meta = node.meta.get("tensor_meta")
        shape = tuple(meta.shape[1:]) if meta is not None and hasattr(meta, "shape") else ()
        ins = [a.name for a in _node_args(node)]
        if node.op == "placeholder":
            layers.append(Layer(node.name, "input", "input", [], shape, node))
            continue
        if node.op == "get_attr":
            raise _unsupported(node.name, "a parameter used as an activation")
        if node.op == "call_module":
            mod = modules[node.target]
            if isinstance(mod, nn.ReLU):
                kind, op = "relu", "relu"
            elif type(mod) in _ACT_MODULES:
                kind, op = "act", _ACT_MODULES[type(mod)]
            elif type(mod) in _MAX_POOL:
                kind, op = "max", _MAX_POOL[type(mod)]
            elif type(mod) in _LINEAR_MODULES:
                kind, op = "linear", _LINEAR_MODULES[type(mod)]
            else:
                raise _unsupported(node.target, type(mod).__name__)
        elif node.op == "call_function":
            f = node.target
            if f in _RELU:
                kind, op = "relu", "relu"
            elif f in _ACT_FUNCTIONS:
                kind, op = "act", _ACT_FUNCTIONS[f]
            elif f in _MAX_POOL:
                kind, op = "max", _MAX_POOL[f]
            elif f in _ADD:
                if len(ins) != 2:  # a constant added: a plaintext bias
                    kind, op = "linear", "add_const"
                else:
                    kind, op = "add", "add"
            elif f in (operator.mul, torch.mul) and len(ins) == 1:
                kind, op = "linear", "mul_const"
            elif f in _LINEAR_FUNCTIONS:
                kind, op = "linear", _LINEAR_FUNCTIONS[f]
            else:
                raise _unsupported(node.name, getattr(f, "__name__", str(f)))
        elif node.op == "call_method":
            if node.target == "size":
                continue  # shape arithmetic, no value
            if node.target == "relu":
                kind, op = "relu", "relu"
            elif node.target in _ACT_METHODS:
                kind, op = "act", _ACT_METHODS[node.target]
            elif node.target in _LINEAR_METHODS:
                kind, op = "linear", _LINEAR_METHODS[node.target]
            else:
                raise _unsupported(node.name, f"Tensor.{node.target}")
        else:
            raise _unsupported(node.name, node.op)
        if kind != "add" and len(ins) != 1:
            raise _unsupported(node.name, f"{op} of {len(ins)} encrypted inputs")
        layer = Layer(node.name, kind, op, ins, shape, node)
        if kind == "max":
            layer.tables = comparisons(layer, modules.get(node.target) if node.op == "call_module" else None)
        layers.append(layer)
    return gm, layers
