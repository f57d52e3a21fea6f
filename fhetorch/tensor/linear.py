"""Matrix products and sums of 1-D EncryptedTensors (x @ W, torch.matmul, F.linear, torch.sum).

Layout: x (length k) fills the first k slots of an S-slot packing, S = next power of two >= k.
A packing of S slots is also one of any n = S * 2^j <= ctx.slots slots (the values repeat
with period S), so y = W^T x (length m) is computed as an n x n LinearTransform with
n = max(S, S'), S' = next power of two >= m, whose row i is the output row i mod S' (zero
for i mod S' >= m): y then repeats with period S' and is read as an S'-slot packing, the
layout of a fresh encryption of shape (m,). One level (plus none for the bias).
"""
from __future__ import annotations

import math

import torch

from ..circuits.linear import LinearTransform
from .._ckks import evaluator as ev
from ..errors import ShapeError, SlotError, UnsupportedOperationError


def _pow2(k: int) -> int:
    return 1 << max(0, math.ceil(math.log2(k)))


def linear(x, weight, bias=None):
    """F.linear(x, weight, bias): y = weight @ x + bias, weight (m, k) plaintext, x encrypted (k,)."""
    w = torch.as_tensor(weight)
    x.single("linear/matmul")
    if x.dim() != 1:
        raise UnsupportedOperationError(f"linear/matmul on EncryptedTensor: only 1-D encrypted inputs, got shape "
                                        f"{tuple(x.shape)}")
    if w.dim() == 1:
        w = w[None]
        squeeze = True
    else:
        squeeze = False
    if w.dim() != 2 or w.shape[1] != x.shape[0]:
        raise ShapeError(f"linear/matmul: weight of shape {tuple(torch.as_tensor(weight).shape)} does not match the "
                         f"encrypted vector of length {x.shape[0]}")
    m, k = w.shape
    ctx = x.ctx
    if m > ctx.slots:
        raise SlotError(f"linear/matmul: the output has {m} values, more than the {ctx.slots} slots of one "
                        "ciphertext; split the weight matrix")
    s_in, s_out = x.slots, _pow2(m)
    n = max(s_in, s_out)
    is_c = w.is_complex()
    w = w.detach().to(torch.complex128 if is_c else torch.float64).cpu()
    big = torch.zeros((n, n), dtype=w.dtype)
    rows = torch.arange(n)
    valid = rows % s_out < m
    big[rows[valid], :k] = w[rows[valid] % s_out]
    lt = _transform(ctx, big)
    ct = x.ciphertext.replace(slots=n)
    out = lt(ct).replace(slots=s_out)
    y = x._like(out, x.is_complex() or is_c, shape=() if squeeze else (m,))
    if bias is not None:
        y = y + bias
    return y


def _transform(ctx, big: torch.Tensor) -> LinearTransform:
    return LinearTransform(ctx, big)


MAX_MAP_DIAGONALS = 1024  # a slot map's nonzero diagonals (each one encoded plaintext a level)


def slot_map(x, src: torch.Tensor, out_shape, weight: float = 1.0, what: str = "slot map"):
    """y[r] = weight * x.flat[src[r]] (0 where src[r] < 0) for a flat-layout x in one ciphertext
    (indexing, transpose, the gather after a partial sum, a part of a concatenation): one
    LinearTransform from its nonzero diagonals (one level)
    writes y into the first S' slots (S' = next power of two >= y's size), then log2(n / S')
    rotations repeat it every S' slots of the n = max(S, S') slots it works on: the flat packing
    of a fresh tensor of out_shape.

    Raises UnsupportedOperationError for an image or model layout, or a map of more than
    MAX_MAP_DIAGONALS diagonals; ShapeError (x.single) for a tensor in several ciphertexts."""
    if x.layout is not None:
        raise UnsupportedOperationError(f"{what}: an image- or model-layout tensor's slots are not row-major; "
                                        "use the image layers, or decrypt")
    ct = x.single(what)
    src = src.reshape(-1).long()
    m = src.numel()
    if m > x.ctx.slots:
        raise ShapeError(f"{what}: the result has {m} values, more than the {x.ctx.slots} slots of one ciphertext")
    s_in, s_out = x.slots, _pow2(m)
    n = max(s_in, s_out)
    rows = torch.arange(m)[src >= 0]
    src = src[src >= 0]
    ks = (src - rows) % n
    uniq, inv = torch.unique(ks, return_inverse=True)
    if uniq.numel() > MAX_MAP_DIAGONALS:
        raise UnsupportedOperationError(
            f"{what}: this rearrangement of {x.numel()} encrypted values needs {uniq.numel()} diagonals (rotations "
            f"of the slot vector), more than {MAX_MAP_DIAGONALS}; split the tensor, or rearrange after decrypting")
    diags = torch.zeros(uniq.numel(), n, dtype=torch.float64)
    diags[inv, rows] = float(weight)
    lt = LinearTransform.from_diagonals(x.ctx, {int(k): d for k, d in zip(uniq.tolist(), diags)}, n)
    out = lt(ct.replace(slots=n))
    step = s_out
    while step < n:  # repeat the first S' slots: the packing of S' slots
        out = ev.add(x.ctx, out, ev.rotate(x.ctx, out, -step))
        step *= 2
    return x._like(out.replace(slots=s_out), shape=tuple(out_shape))


def cat(xs, dim: int = 0, what: str = "cat"):
    """torch.cat of flat-layout EncryptedTensors: each part gathered to its place in the result
    (one slot map, one level), the parts added.

    Raises UnsupportedOperationError for a plaintext part (encrypt it first), ShapeError for
    shapes torch.cat refuses or a result larger than one ciphertext, and what slot_map raises."""
    xs = list(xs)
    if not xs or any(type(x) is not type(xs[0]) for x in xs):
        raise UnsupportedOperationError(f"{what}: every part must be an EncryptedTensor; encrypt plaintext parts "
                                        "first (ctx.encrypt)")
    try:
        out_shape = torch.cat([torch.empty(x.shape, device="meta") for x in xs], dim).shape
    except (RuntimeError, IndexError) as e:
        raise ShapeError(f"{what}: {e}; the parts have shapes {[tuple(x.shape) for x in xs]}") from None
    total = None
    for i, x in enumerate(xs):
        src = torch.cat([torch.arange(y.numel()).reshape(y.shape) if j == i else torch.full(y.shape, -1)
                         for j, y in enumerate(xs)], dim)
        part = slot_map(x, src, out_shape, what=what)
        total = part if total is None else total + part
    return total


def sum_along(x, dims):
    """x with each slot i holding the sum of x.flat[i + sum_d k_d stride_d] over k_d < size_d for
    the dimensions `dims` (rotate-and-add by doubling, ~2 log2(size) rotations a dimension, no
    level): the sums sit at the positions whose coordinates in `dims` are 0."""
    ctx, ct = x.ctx, x.single("sum")
    strides = [math.prod(x.shape[d + 1:]) for d in range(x.dim())]
    for d in dims:
        size, st = x.shape[d], strides[d]
        total, offset, block, span = None, 0, ct, 1  # block: the sum of `span` consecutive steps
        while True:
            if size & span:
                part = block if offset == 0 else ev.rotate(ctx, block, offset * st)
                total = part if total is None else ev.add(ctx, total, part)
                offset += span
            if span * 2 > size:
                break
            block = ev.add(ctx, block, ev.rotate(ctx, block, span * st))
            span *= 2
        ct = total
    return x._like(ct)


def matmul(x, w, *, x_right: bool = False):
    """x @ w (or w @ x with x_right) for a 1-D EncryptedTensor x and a plaintext matrix w."""
    w = torch.as_tensor(w)
    if x_right:  # W (m, k) @ x (k,)
        return linear(x, w)
    return linear(x, w.transpose(0, 1) if w.dim() == 2 else w)  # x (k,) @ W (k, m) = W^T x


def sum_all(x, keepdim=False, weight=1):
    """Sum of all values of x (one ciphertext or a batch of them) times `weight`: shape ()
    (keepdim: all dims of size 1). Padding slots are masked to zero first (one level; the mask
    is `weight` on the values) when x has any, else a weight other than 1 is one product; a
    batch is added slot-wise, then log2(slots) rotations add the slots (rotate-and-add)."""
    ctx, ct = x.ctx, x.ciphertext
    if x.numel() < x.count * x.slots:
        mask = torch.zeros(x.count * x.slots, dtype=torch.float64)
        mask[: x.numel()] = weight
        ct = ev.mul_values(ctx, ct, mask.view(ct.batch_shape + (x.slots,)).to(x.device))
    elif weight != 1:
        ct = ev.mul_scalar(ctx, ct, weight)
    ct = ev.sum_batch(ctx, ct)
    step = 1
    while step < ct.slots:
        ct = ev.add(ctx, ct, ev.rotate(ctx, ct, step))
        step *= 2
    shape = (1,) * x.dim() if keepdim else ()
    return type(x)(ctx, ct.replace(slots=1), shape, x.is_complex())
