"""torch functions on EncryptedTensors: the handlers `EncryptedTensor.__torch_function__`
dispatches to, registered into encrypted_tensor.TORCH_FUNCTIONS at import (fhetorch/tensor
imports this module). Each handler puts torch's argument conventions onto the tensor's methods.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import UnsupportedOperationError
from . import encrypted_tensor as _et
from . import image as _image
from . import linear as _linear
from .encrypted_tensor import EncryptedTensor, _matmul, _scaled, sort_values
from .layout import Layout


def _add(a, b, *, alpha=1):
    b = b if alpha == 1 else _scaled(b, alpha)
    return a._add(b) if isinstance(a, EncryptedTensor) else b._add(a)


def _sub(a, b, *, alpha=1):
    b = b if alpha == 1 else _scaled(b, alpha)
    return a._sub(b) if isinstance(a, EncryptedTensor) else b._rsub(a)


def _rsub(a, b, *, alpha=1):  # torch.rsub(a, b) = b - alpha * a
    return _sub(b, a, alpha=alpha)


def _mul(a, b):
    return a._mul(b) if isinstance(a, EncryptedTensor) else b._mul(a)


def _neg(x):
    return -x


def _div(a, b, *, rounding_mode=None):
    if not isinstance(a, EncryptedTensor):
        return b.__rtruediv__(a)
    return a.div(b, rounding_mode=rounding_mode)


def _pow(a, k):
    if not isinstance(a, EncryptedTensor):
        return k.__rpow__(a)
    return a.pow(k)


def _mean(x, dim=None, keepdim=False, **kwargs):
    if kwargs:
        raise UnsupportedOperationError(f"torch.mean on EncryptedTensor: unsupported arguments {sorted(kwargs)}")
    return x.mean(dim, keepdim)


def _reshape(x, *shape):
    return x.reshape(*shape)


def _roll(x, shifts, dims=None):
    return x.roll(shifts, dims)


def _linear_layer(x, weight, bias=None):
    return _image.linear(x, weight, bias) if isinstance(x.layout, Layout) else _linear.linear(x, weight, bias)


def _pad(x, pad, mode="constant", value=None):
    pad = tuple(pad)
    if len(pad) == 6 and not any(pad[:4]) and value in (0, None) and mode == "constant":
        return _image.pad_channels(x, pad[4], pad[5])
    raise UnsupportedOperationError("F.pad on EncryptedTensor: only zero channels, F.pad(x, (0, 0, 0, 0, a, b))")


def _torch_sort(x, dim=-1, descending=False, stable=False, *, out=None):
    if out is not None:
        raise UnsupportedOperationError("torch.sort on EncryptedTensor: out= is not supported")
    return x.sort(dim, descending, stable)


def _msort(x):
    return sort_values(x)


def _cat(tensors, dim=0, *, out=None):
    if out is not None:
        raise UnsupportedOperationError("torch.cat on EncryptedTensor: out= is not supported")
    return _linear.cat(tensors, dim)


def _stack(tensors, dim=0, *, out=None):
    if out is not None:
        raise UnsupportedOperationError("torch.stack on EncryptedTensor: out= is not supported")
    tensors = list(tensors)
    try:
        shapes = [torch.empty(t.shape, device="meta").unsqueeze(dim).shape for t in tensors]
    except (IndexError, AttributeError) as e:
        raise UnsupportedOperationError(f"torch.stack on EncryptedTensor: {e}; stack EncryptedTensors of one "
                                        "shape") from None
    return _linear.cat([t.reshape(s) for t, s in zip(tensors, shapes)], dim, "stack")


def _sum(x, dim=None, keepdim=False, **kwargs):
    if kwargs:
        raise UnsupportedOperationError(f"torch.sum on EncryptedTensor: unsupported arguments {sorted(kwargs)}")
    return x.sum(dim, keepdim)


_et.TORCH_FUNCTIONS.update({
    **dict.fromkeys((torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__), _add),
    **dict.fromkeys((torch.sub, torch.subtract, torch.Tensor.sub, torch.Tensor.__sub__), _sub),
    **dict.fromkeys((torch.rsub, torch.Tensor.__rsub__), _rsub),
    **dict.fromkeys((torch.mul, torch.multiply, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__), _mul),
    **dict.fromkeys((torch.neg, torch.negative, torch.Tensor.neg, torch.Tensor.__neg__), _neg),
    **dict.fromkeys((torch.positive, torch.Tensor.positive, torch.Tensor.__pos__), lambda x: x),
    **dict.fromkeys((torch.div, torch.divide, torch.true_divide, torch.Tensor.div, torch.Tensor.divide,
                     torch.Tensor.true_divide, torch.Tensor.__truediv__, torch.Tensor.__rtruediv__), _div),
    **dict.fromkeys((torch.pow, torch.Tensor.pow, torch.Tensor.__pow__, torch.Tensor.__rpow__), _pow),
    **dict.fromkeys((torch.square, torch.Tensor.square), lambda x: x.square()),
    **dict.fromkeys((torch.mean, torch.Tensor.mean), _mean),
    **dict.fromkeys((torch.reshape, torch.Tensor.reshape, torch.Tensor.view), _reshape),
    **dict.fromkeys((torch.clone, torch.Tensor.clone), lambda x: x.clone()),
    **dict.fromkeys((torch.transpose, torch.swapaxes, torch.swapdims, torch.Tensor.transpose, torch.Tensor.swapaxes,
                     torch.Tensor.swapdims), lambda x, d0, d1: x.transpose(d0, d1)),
    **dict.fromkeys((torch.permute, torch.Tensor.permute), lambda x, *dims: x.permute(*dims)),
    **dict.fromkeys((torch.t, torch.Tensor.t), lambda x: x.t()),
    **dict.fromkeys((torch.roll, torch.Tensor.roll), _roll),
    **dict.fromkeys((torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__), _matmul),
    torch.Tensor.__rmatmul__: lambda a, b: _matmul(b, a),
    **dict.fromkeys((torch.sum, torch.Tensor.sum), _sum),
    **dict.fromkeys((torch.cat, torch.concat, torch.concatenate), _cat),
    torch.stack: _stack,
    **dict.fromkeys((torch.sort, torch.Tensor.sort), _torch_sort),
    **dict.fromkeys((torch.msort, torch.Tensor.msort), _msort),
    **dict.fromkeys((torch.flatten, torch.Tensor.flatten),
                    lambda x, start_dim=0, end_dim=-1: x.flatten(start_dim, end_dim)),
    F.linear: _linear_layer,
    F.conv2d: _image.conv2d,
    F.avg_pool2d: _image.avg_pool2d,
    F.adaptive_avg_pool2d: _image.adaptive_avg_pool2d,
    F.pad: _pad,
})
_et._SUPPORTED.update({
    "torch.add", "torch.sub", "torch.rsub", "torch.mul", "torch.neg", "torch.positive", "torch.roll", "torch.matmul",
    "torch.div (plaintext divisor)", "torch.pow (integer exponent)", "torch.square", "torch.sum", "torch.mean",
    "torch.reshape", "torch.clone", "torch.transpose", "torch.permute", "torch.t", "torch.sort (values)",
    "torch.msort", "torch.flatten", "torch.cat", "torch.stack", "F.linear", "F.conv2d", "F.avg_pool2d", "F.adaptive_avg_pool2d",
    "F.pad (channels)"})
