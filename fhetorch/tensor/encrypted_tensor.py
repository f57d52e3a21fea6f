"""EncryptedTensor: a torch-like tensor whose values are one CKKS ciphertext.

Layout (this version): the flattened values occupy the first numel() slots of an S-slot
packing, S the smallest power of two >= numel() (the sparse packing of fhetorch/_ckks/encoder.py).
Slots from numel() to S hold unspecified values. A raw `rotate(k)` rotates the S slots;
`roll` follows torch.roll on the logical tensor: one rotation when it moves the whole
packing cyclically (numel() == S, rolling the flattened tensor or dimension 0), otherwise two
rotations and two 0/1 masks (one level).
"""
from __future__ import annotations

import math

import torch

from .._ckks import evaluator as ev
from .._ckks.arguments import as_int, check_dense
from .._ckks.ciphertext import Ciphertext
from ..errors import (ContextError, EncodingError, EncryptedValueError, LayoutError, ShapeError,
                      UnsupportedOperationError)
from ..circuits import bootstrap as _bootstrap
from . import image as _image
from . import linear as _linear
from .layout import Layout

_ALIASES = {"multiply": "mul", "subtract": "sub", "negative": "neg"}


def binary_op(name: str, a, b):
    """torch's binary `name` (add, __add__, __rsub__, ...) with a and/or b encrypted."""
    if name.startswith("__r"):  # Tensor.__rsub__(t, ex) means ex - t
        a, b, name = b, a, name[3:-2]
    name = _ALIASES.get(name.strip("_"), name.strip("_"))
    enc_first = isinstance(a, EncryptedTensor)
    if name == "add":
        return a._add(b) if enc_first else b._add(a)
    if name == "mul":
        return a._mul(b) if enc_first else b._mul(a)
    if name == "sub":
        return a._sub(b) if enc_first else (-b)._add(a)
    raise UnsupportedOperationError(f"{name} on EncryptedTensor: not an arithmetic operator")


def _layout_name(layout) -> str:
    if layout is None:
        return "the flat layout"
    if isinstance(layout, Layout):
        return f"the image layout {layout}"
    return f"the layout of value {layout[2]!r} of a model compiled for {layout[1]}" if layout[0] == "nn" else str(layout)


class EncryptedTensor:
    """Values of a tensor, encrypted. Create with `ctx.encrypt(t)`; read with `ctx.decrypt(et)`.

    A tensor with more values than one ciphertext's slots spans several: chunk j holds the
    flattened values [j * slots, (j + 1) * slots) in the flat layout above (`.ciphertexts`).
    Element-wise arithmetic, sums, level changes, bootstrapping and devices work on every
    chunk; rotations, rolls, matrix products and image layers need one ciphertext.

    The operators (+, -, *, @, and add, sub, mul, neg, matmul) raise LevelError when a product
    has no level left, ScaleError for scales that cannot be matched, ContextError for another
    context's or device's operand, LayoutError and ShapeError for operands packed or shaped
    differently, EncodingError for NaN/inf or too large plaintext operands, MissingKeyError
    without the relinearisation key, UnsupportedOperationError for what has no encrypted form."""

    def __init__(self, ctx, ciphertext, shape, is_complex: bool = False, layout=None):
        self.ctx = ctx
        self.ciphertexts = list(ciphertext) if isinstance(ciphertext, (list, tuple)) else [ciphertext]
        self.shape = torch.Size(shape)
        self._complex = bool(is_complex)
        # None: the flat layout above; otherwise where a producer (fhetorch.nn) put the values,
        # e.g. a compiled model's feature-map layout; operands must agree on it.
        self.layout = layout

    @property
    def ciphertext(self) -> Ciphertext:
        """The ciphertext of a one-ciphertext tensor."""
        if len(self.ciphertexts) != 1:
            raise UnsupportedOperationError(f"this operation needs the tensor in one ciphertext; it spans "
                                            f"{len(self.ciphertexts)} ({self.numel()} values, {self.ctx.slots} slots "
                                            "each): element-wise arithmetic, sum, levels and bootstrapping work on it, "
                                            "rotations and linear layers do not; split the tensor")
        return self.ciphertexts[0]

    @property
    def multi(self) -> bool:
        """True when the values span several ciphertexts."""
        return len(self.ciphertexts) > 1

    # --- metadata ---------------------------------------------------------------------
    @property
    def level(self) -> int:
        """Rescales left before the ciphertext is exhausted."""
        return min(ct.level for ct in self.ciphertexts)

    @property
    def scale(self) -> float:
        return float(self.ciphertexts[0].scale)

    @property
    def device(self) -> torch.device:
        return self.ciphertexts[0].device

    @property
    def dtype(self) -> torch.dtype:
        return torch.complex128 if self._complex else torch.float64

    @property
    def slots(self) -> int:
        """Slots of the packing (a power of two >= numel(); per chunk for several ciphertexts)."""
        return self.ciphertexts[0].slots

    def is_complex(self) -> bool:
        return self._complex

    def numel(self) -> int:
        return self.shape.numel()

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self):
        return self.shape[0]

    def __bool__(self):
        raise EncryptedValueError("bool() of an EncryptedTensor (if ex:, while ex:, ex and ...): an encrypted value has "
                                  "no truth value anyone without the secret key can see; decrypt it first, "
                                  "bool(ctx.decrypt(ex))")

    def _no_plain_number(self, kind: str):
        raise EncryptedValueError(f"{kind}() of an EncryptedTensor: its value is encrypted; decrypt it first, "
                                  f"{kind}(ctx.decrypt(ex))")

    def __float__(self):
        self._no_plain_number("float")

    def __int__(self):
        self._no_plain_number("int")

    def __complex__(self):
        self._no_plain_number("complex")

    def __repr__(self):
        return (f"EncryptedTensor(shape={tuple(self.shape)}, dtype={self.dtype}, level={self.level}, "
                f"scale=2^{math.log2(self.scale):.2f}, device={self.device})")

    def _like(self, ct: Ciphertext, is_complex=None, shape=None) -> "EncryptedTensor":
        return EncryptedTensor(self.ctx, ct, self.shape if shape is None else shape,
                               self._complex if is_complex is None else is_complex, self.layout)

    # --- several ciphertexts -------------------------------------------------------------
    def chunks(self) -> list:
        """One-ciphertext flat tensors, one per ciphertext, in order (views of the values).

        Raises nothing."""
        n = self.ctx.slots
        sizes = [min(n, self.numel() - j * n) for j in range(len(self.ciphertexts))]
        if len(self.ciphertexts) == 1:
            return [self]
        return [EncryptedTensor(self.ctx, ct, (k,), self._complex) for ct, k in zip(self.ciphertexts, sizes)]

    def _joined(self, parts: list, shape, is_complex: bool) -> "EncryptedTensor":
        """The chunk results as one tensor of this tensor's layout (chunk ops are slot-wise)."""
        return EncryptedTensor(parts[0].ctx, [p.ciphertext for p in parts], shape, is_complex, self.layout)

    def _each(self, fn, other=None) -> "EncryptedTensor":
        """fn(chunk) or fn(chunk, other's chunk) over the chunks (other: an EncryptedTensor of
        the same shape, a plaintext broadcast to this shape, or a scalar)."""
        mine = self.chunks()
        if isinstance(other, EncryptedTensor):
            self._check_partner(other, "element-wise op")
            theirs = other.chunks()
        elif other is None or isinstance(other, (bool, int, float, complex)):
            theirs = [other] * len(mine)
        else:
            t = torch.as_tensor(other)
            check_dense(t, "element-wise op")
            try:
                t = torch.broadcast_to(t, self.shape).flatten()
            except RuntimeError:
                raise ShapeError(f"element-wise op: plaintext of shape {tuple(t.shape)} does not broadcast to the "
                                 f"encrypted shape {tuple(self.shape)}") from None
            n = self.ctx.slots
            theirs = [t[j * n : j * n + m.numel()] for j, m in enumerate(mine)]
        out = [fn(a) if other is None else fn(a, b) for a, b in zip(mine, theirs)]
        return self._joined(out, self.shape, any(o.is_complex() for o in out))

    def with_layout(self, layout) -> "EncryptedTensor":
        """The same ciphertext described by another layout (None: the flat packing).

        Raises UnsupportedOperationError for a tensor spanning several ciphertexts."""
        return EncryptedTensor(self.ctx, self.ciphertext, self.shape, self._complex, layout)

    def __getitem__(self, idx):
        """x[..., ::s, ::s] on an image (the option-A shortcut's subsampling); nothing else yet."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        whole = slice(None)
        lead, tail = idx[:-2], idx[-2:]
        if (len(idx) == self.dim() and len(tail) == 2 and all(i == whole for i in lead) and tail[0] == tail[1]
                and isinstance(tail[0], slice) and tail[0].start in (None, 0) and tail[0].stop is None
                and self.dim() in (3, 4)):
            return _image.subsample(self, tail[0].step or 1)
        raise UnsupportedOperationError("indexing an EncryptedTensor: only x[:, :, ::s, ::s] / x[:, ::s, ::s] on "
                                        "images (the values live in slots; other selections need a slot map)")

    # --- operands ---------------------------------------------------------------------
    def _check_partner(self, other: "EncryptedTensor", what: str):
        self.ctx.check_same_keys(other.ctx, what)
        if other.layout != self.layout:
            raise LayoutError(f"{what}: the operands are packed in different layouts ({_layout_name(self.layout)} and "
                              f"{_layout_name(other.layout)}); combine values of one layout")
        if other.device != self.device:
            raise ContextError(f"{what}: operands on {self.device} and {other.device}; move one with .to()")
        if other.shape != self.shape:
            raise ShapeError(f"{what}: encrypted operands must have the same shape, got {tuple(self.shape)} and "
                             f"{tuple(other.shape)}")

    def _plain(self, x, what: str):
        """A plaintext operand as a Python complex (scalar) or a padded slot vector."""
        if self.layout is not None and not isinstance(x, (bool, int, float, complex)):
            raise LayoutError(f"{what}: this tensor is packed in {_layout_name(self.layout)}; a plaintext tensor "
                              "operand would be packed flat. Use a scalar, or combine inside the compiled model")
        if isinstance(x, bool):  # torch semantics: True acts as 1
            x = int(x)
        if isinstance(x, (int, float, complex)):
            if isinstance(x, complex) or math.isfinite(x):
                if isinstance(x, complex) and not (math.isfinite(x.real) and math.isfinite(x.imag)):
                    raise EncodingError(f"{what}: constant {x} is not finite")
                return complex(x), isinstance(x, complex)
            raise EncodingError(f"{what}: constant {x} is not finite")
        t = torch.as_tensor(x)
        check_dense(t, what)
        if t.dtype == torch.bool:
            t = t.to(torch.int64)
        if t.numel() == 1 and t.dim() == 0:
            return self._plain(t.item(), what)
        try:
            t = torch.broadcast_to(t, self.shape)
        except RuntimeError:
            raise ShapeError(f"{what}: plaintext of shape {tuple(t.shape)} does not broadcast to the encrypted "
                             f"shape {tuple(self.shape)}") from None
        is_c = t.is_complex()
        v = t.to(torch.complex128 if is_c else torch.float64).flatten()
        if not bool(torch.isfinite(torch.view_as_real(v.to(torch.complex128))).all()):
            raise EncodingError(f"{what}: plaintext contains NaN or inf")
        padded = torch.zeros(self.slots, dtype=v.dtype)
        padded[: v.numel()] = v
        return padded.to(self.device), is_c

    # --- arithmetic -------------------------------------------------------------------
    def _add(self, other, sign: int = 1) -> "EncryptedTensor":
        if self.multi or getattr(other, "multi", False):
            return self._each(lambda a, b: a._add(b, sign), other)
        what = "add" if sign > 0 else "sub"
        if isinstance(other, EncryptedTensor):
            self._check_partner(other, what)
            f = ev.add if sign > 0 else ev.sub
            return self._like(f(self.ctx, self.ciphertext, other.ciphertext), self._complex or other._complex)
        p, is_c = self._plain(other, what)
        if isinstance(p, complex):
            ct = ev.add_scalar(self.ctx, self.ciphertext, sign * p, what)
        else:
            ct = ev.add_plain(self.ctx, self.ciphertext, p, subtract=sign < 0)
        return self._like(ct, self._complex or is_c)

    def _sub(self, other) -> "EncryptedTensor":
        return self._add(other, -1)

    def _mul(self, other) -> "EncryptedTensor":
        if self.multi or getattr(other, "multi", False):
            return self._each(lambda a, b: a._mul(b), other)
        if isinstance(other, EncryptedTensor):
            self._check_partner(other, "mul")
            return self._like(ev.multiply(self.ctx, self.ciphertext, other.ciphertext), self._complex or other._complex)
        p, is_c = self._plain(other, "mul")
        if isinstance(p, complex):
            ct = ev.mul_scalar(self.ctx, self.ciphertext, p)
        else:
            ct = ev.mul_plain(self.ctx, self.ciphertext, p)
        return self._like(ct, self._complex or is_c)

    def __neg__(self):
        if self.multi:
            return self._each(lambda a: -a)
        return self._like(ev.neg(self.ctx, self.ciphertext))

    def __add__(self, o):
        return self._add(o)

    def __radd__(self, o):
        return self._add(o)

    def __sub__(self, o):
        return self._sub(o)

    def __rsub__(self, o):
        return (-self)._add(o)

    def __mul__(self, o):
        return self._mul(o)

    def __rmul__(self, o):
        return self._mul(o)

    def neg(self):
        return -self

    def add(self, o, *, alpha=1):
        return self._add(o if alpha == 1 else _scaled(o, alpha))

    def sub(self, o, *, alpha=1):
        return self._sub(o if alpha == 1 else _scaled(o, alpha))

    def mul(self, o):
        return self._mul(o)

    def square(self):
        """self * self, relinearised and rescaled (one level).

        Raises LevelError at level 0, MissingKeyError without the relinearisation key."""
        if self.multi:
            return self._each(lambda a: a.square())
        return self._like(ev.square(self.ctx, self.ciphertext))

    def mul_i(self):
        """Multiply by the imaginary unit (exact, no level used).

        Raises nothing."""
        if self.multi:
            return self._each(lambda a: a.mul_i())
        return self._like(ev.mul_i(self.ctx, self.ciphertext), True)

    def conj(self):
        """The complex conjugate (a real tensor is its own).

        Raises MissingKeyError without the conjugation key."""
        if self.multi:
            return self._each(lambda a: a.conj())
        return self._like(ev.conjugate(self.ctx, self.ciphertext)) if self._complex else self

    # --- levels -----------------------------------------------------------------------
    def drop_level(self, levels: int = 1) -> "EncryptedTensor":
        """The same values `levels` levels lower, on the lower level's nominal scale.

        Raises LevelError for more levels than are left or a negative count, IntegerArgumentError
        for a count that is not an int, ScaleError for a scale the lower level cannot hold."""
        if self.multi:
            return self._each(lambda a: a.drop_level(levels))
        return self._like(ev.drop_level(self.ctx, self.ciphertext, levels))

    def rescale(self) -> "EncryptedTensor":
        """Divide the scale by the top prime(s) of the level, one level lower (products rescale
        themselves; this is for products made without).

        Raises LevelError at level 0, ScaleError when the result would fall far below the
        next level's nominal scale (a fresh ciphertext: use drop_level)."""
        if self.multi:
            return self._each(lambda a: a.rescale())
        return self._like(ev.rescale(self.ctx, self.ciphertext))

    def bootstrap(self) -> "EncryptedTensor":
        """A new EncryptedTensor with the same values and levels refreshed (a bootstrappable
        preset, keys from ctx.keygen(bootstrap=True)); see fhetorch/circuits/bootstrap.py.
        Several ciphertexts: two real chunks share one bootstrapping (as a + i b).

        Raises ParameterError for a preset that is not bootstrappable, MissingKeyError without
        the bootstrapping keys (ctx.keygen(bootstrap=True))."""
        if self.multi:
            return self._bootstrap_chunks()
        return self._like(_bootstrap.bootstrap(self.ctx, self.ciphertext))

    def _bootstrap_chunks(self) -> "EncryptedTensor":
        parts = self.chunks()
        out = []
        for j in range(0, len(parts), 2):
            pair = parts[j : j + 2]
            if len(pair) == 2 and not self._complex and pair[0].slots == pair[1].slots:
                out += list(pair[0].bootstrap_with(pair[1]))
            else:
                out += [q.bootstrap() for q in pair]
        return self._joined(out, self.shape, self._complex)

    def bootstrap_with(self, other: "EncryptedTensor") -> tuple:
        """(self, other) refreshed by one bootstrapping of self + i other (both real-valued).

        Raises EncodingError for a complex tensor, SlotError when they pack different slot
        counts, and what bootstrap() raises."""
        if self._complex or other._complex:
            raise EncodingError("bootstrap_with: both tensors must be real (they travel as real and imaginary parts)")
        u, v = _bootstrap.bootstrap_pair(self.ctx, self.ciphertext, other.ciphertext)
        return self._like(u), other._like(v)

    # --- rotations ----------------------------------------------------------------------
    def rotate(self, k: int) -> "EncryptedTensor":
        """Raw left rotation of the slot vector: slot i takes slot i + k (cyclic over .slots).

        Raises MissingKeyError when no key (nor the +-2^i keys) makes step k at this level,
        IntegerArgumentError for a step that is not an int, UnsupportedOperationError for a
        tensor spanning several ciphertexts."""
        return self._like(ev.rotate(self.ctx, self.ciphertext, as_int(k, "rotate", "the step")))

    def roll(self, shifts, dims=None) -> "EncryptedTensor":
        """torch.roll semantics on the logical tensor.

        Raises MissingKeyError for a missing rotation key, LevelError at level 0 when the roll
        needs masks, ShapeError when shifts and dims differ in length, IndexError for a dimension
        out of range, IntegerArgumentError for shifts or dims that are not ints,
        UnsupportedOperationError for several shifts without dims or several ciphertexts."""
        shifts = [as_int(s, "roll", "a shift") for s in _as_tuple(shifts)]
        if dims is None:
            if len(shifts) != 1:
                raise UnsupportedOperationError("roll: several shifts need dims (as in torch.roll)")
            flat = EncryptedTensor(self.ctx, self.ciphertext, (self.numel(),), self._complex)
            return self._like(flat._roll_dim(shifts[0], 0).ciphertext)
        dims = [as_int(d, "roll", "a dimension") for d in _as_tuple(dims)]
        if len(shifts) != len(dims):
            raise ShapeError("roll: shifts and dims must have the same length")
        out = self
        for s, d in zip(shifts, dims):
            out = out._roll_dim(s, d)
        return out

    def _roll_dim(self, shift: int, dim: int) -> "EncryptedTensor":
        nd = len(self.shape)
        if not -nd <= dim < nd:
            raise IndexError(f"roll: dimension {dim} out of range for a {nd}-d tensor")
        dim %= nd
        size = self.shape[dim]
        k = shift % size
        if k == 0:
            return self
        inner = math.prod(self.shape[dim + 1:])
        outer = math.prod(self.shape[:dim])
        if outer == 1 and self.numel() == self.slots:  # a cyclic rotation of the whole packing
            return self.rotate(-k * inner)
        idx = torch.arange(self.slots)
        coord = (idx // inner) % size
        valid = idx < self.numel()
        hi = ((coord >= k) & valid).to(torch.float64)
        lo = ((coord < k) & valid).to(torch.float64)
        a = self.rotate(-k * inner)._mul_mask(hi)
        b = self.rotate((size - k) * inner)._mul_mask(lo)
        return a._add(b)

    # --- linear algebra (fhetorch/tensor/linear.py) --------------------------------------
    def __matmul__(self, w):
        return _matmul(self, w)

    def __rmatmul__(self, w):
        return _matmul(w, self)

    def matmul(self, w):
        return _matmul(self, w)

    def sum(self, dim=None, keepdim=False):
        """Sum of all values, shape () (rotate-and-add; one level if numel() < slots, else none;
        several ciphertexts: the chunks' sums added).

        Raises UnsupportedOperationError for a sum over some dimensions only or an image
        layout, MissingKeyError for a missing rotation key, LevelError at level 0 when padding
        slots must be masked."""
        if isinstance(self.layout, Layout):
            raise UnsupportedOperationError("sum of an image-layout tensor: its slots also hold values the layout "
                                            "ignores; use F.adaptive_avg_pool2d, flatten and F.linear, or decrypt")
        if self.multi:
            sums = [_linear.sum_all(c) for c in self.chunks()]
            ctx, total = self.ctx, sums[0].ciphertext
            for t in sums[1:]:
                total = ev.add(ctx, total, t.ciphertext)
            shape = (1,) * self.dim() if keepdim else ()
            if dim is not None:
                dims = (dim,) if isinstance(dim, int) else tuple(dim)
                if sorted(d % self.dim() for d in dims) != list(range(self.dim())):
                    raise UnsupportedOperationError("sum on EncryptedTensor: only the sum over all dimensions is "
                                                    "supported")
            return EncryptedTensor(ctx, total, shape, self._complex)
        return _linear.sum_all(self, dim, keepdim)

    def _mul_mask(self, mask: torch.Tensor) -> "EncryptedTensor":
        return self._like(ev.mul_plain(self.ctx, self.ciphertext, mask.to(self.device)))

    # --- copies (pickling: fhetorch/tensor/serialization.py) -----------------------------------
    def __copy__(self) -> "EncryptedTensor":
        return EncryptedTensor(self.ctx, self.ciphertexts, self.shape, self._complex, self.layout)

    def __deepcopy__(self, memo) -> "EncryptedTensor":
        """New ciphertext data, the same context: copying a tensor never copies its keys."""
        cts = [ct.replace(data=ct.data.clone()) for ct in self.ciphertexts]
        return EncryptedTensor(self.ctx, cts, self.shape, self._complex, self.layout)

    # --- devices -----------------------------------------------------------------------
    def to(self, device) -> "EncryptedTensor":
        """The same values on `device` (with its context's copy there).

        Raises RuntimeError (torch's) for a device this build or machine lacks."""
        ctx = self.ctx.to(device)
        if ctx.device == self.device:
            return self
        return EncryptedTensor(ctx, [ct.to(ctx.device) for ct in self.ciphertexts], self.shape, self._complex,
                               self.layout)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    # --- torch function dispatch ---------------------------------------------------
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name.strip("_") in ("add", "sub", "mul", "multiply", "subtract", "radd", "rsub", "rmul") \
                and len(args) == 2:
            alpha = kwargs.pop("alpha", 1)
            if kwargs:
                raise UnsupportedOperationError(f"torch.{name} on EncryptedTensor: unsupported arguments "
                                                f"{sorted(kwargs)}")
            a, b = args
            return binary_op(name, a, b if alpha == 1 else _scaled(b, alpha))
        if name in ("neg", "__neg__", "negative") and len(args) == 1:
            return -args[0]
        if name == "roll":
            x = args[0]
            shifts = args[1] if len(args) > 1 else kwargs.get("shifts")
            dims = args[2] if len(args) > 2 else kwargs.get("dims")
            return x.roll(shifts, dims)
        if name in ("matmul", "__matmul__", "__rmatmul__") and len(args) == 2 and not kwargs:
            a, b = args if name != "__rmatmul__" else args[::-1]
            return _matmul(a, b)
        if name == "linear":
            x = args[0]
            w = args[1] if len(args) > 1 else kwargs.get("weight")
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            return _image.linear(x, w, b) if isinstance(x.layout, Layout) else _linear.linear(x, w, b)
        if name in ("conv2d", "avg_pool2d", "adaptive_avg_pool2d", "flatten"):
            return getattr(_image, name)(*args, **kwargs)
        if name == "pad":
            x, pad = args[0], tuple(args[1] if len(args) > 1 else kwargs["pad"])
            if len(pad) == 6 and not any(pad[:4]) and kwargs.get("value", 0) in (0, None) and \
                    (len(args) < 3 or args[2] == "constant"):
                return _image.pad_channels(x, pad[4], pad[5])
            raise UnsupportedOperationError("F.pad on EncryptedTensor: only zero channels, "
                                            "F.pad(x, (0, 0, 0, 0, a, b))")
        if name == "sum" and isinstance(args[0], EncryptedTensor):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            return args[0].sum(dim, kwargs.get("keepdim", False))
        raise UnsupportedOperationError(f"{name} is not supported on EncryptedTensor (supported: torch.add, torch.sub, "
                                        "torch.mul, torch.neg, torch.roll, torch.matmul, torch.sum, torch.flatten, the "
                                        "arithmetic operators, @ included, and F.linear, F.conv2d, F.avg_pool2d, "
                                        "F.adaptive_avg_pool2d, F.pad of channels, x[..., ::s, ::s])")


def _matmul(a, b):
    """a @ b with one operand a 1-D EncryptedTensor and the other a plaintext matrix."""
    if isinstance(a, EncryptedTensor) and isinstance(b, EncryptedTensor):
        raise UnsupportedOperationError("matmul: both operands encrypted is not supported; one must be plaintext")
    return _linear.matmul(a, b) if isinstance(a, EncryptedTensor) else _linear.matmul(b, a, x_right=True)


def _as_tuple(x) -> tuple:
    """roll's shifts / dims: one value or a sequence of them."""
    return tuple(x) if isinstance(x, (list, tuple, torch.Size)) else (x,)


def _scaled(x, alpha):
    if isinstance(x, EncryptedTensor):
        return x * alpha
    return torch.as_tensor(x) * alpha if not isinstance(x, (int, float, complex)) else x * alpha
