"""EncryptedTensor: a torch-like tensor whose values are CKKS ciphertexts.

Storage: one Ciphertext. A tensor of at most `ctx.slots` values is one ciphertext, data
(2, L, N): the flattened values occupy the first numel() slots of an S-slot packing, S the
smallest power of two >= numel() (the sparse packing of fhetorch/_ckks/encoder.py); slots
from numel() to S hold unspecified values. A larger tensor is B ciphertexts of full slots in
one batched Ciphertext, data (B, 2, L, N): ciphertext j holds the flattened values
[j * slots, (j + 1) * slots). Element-wise arithmetic, levels and bootstrapping act on the
whole batch at once (one kernel launch per step, whatever B).

A raw `rotate(k)` rotates the S slots of each ciphertext; `roll` follows torch.roll on the
logical tensor: one rotation when it moves the whole packing cyclically (numel() == S,
rolling the flattened tensor or dimension 0), otherwise two rotations and two 0/1 masks
(one level). Rotations, rolls, matrix products and most image layers need one ciphertext.

torch functions reach an EncryptedTensor through `__torch_function__`, dispatched by the
table `TORCH_FUNCTIONS` (a torch callable -> its handler), which fhetorch/tensor/dispatch.py fills.
"""
from __future__ import annotations

import math

import torch

from .._ckks import evaluator as ev
from .._ckks.arguments import as_int, check_dense
from .._ckks.ciphertext import Ciphertext
from ..circuits import bootstrap as _bootstrap
from ..circuits import sort as _sort
from ..errors import (ContextError, EncodingError, EncryptedValueError, LayoutError, ParameterError, ShapeError,
                      UnsupportedOperationError)
from . import image as _image
from . import linear as _linear
from .layout import Layout


def _layout_name(layout) -> str:
    if layout is None:
        return "the flat layout"
    if isinstance(layout, Layout):
        return f"the image layout {layout}"
    return f"the layout of value {layout[2]!r} of a model compiled for {layout[1]}" if layout[0] == "nn" else str(layout)


def _stack(cts) -> Ciphertext:
    """One batched Ciphertext from ciphertexts that share level, scale and slot count."""
    first = cts[0]
    for ct in cts[1:]:
        if (ct.level, ct.slots, ct.size) != (first.level, first.slots, first.size) or \
                not ev.same_scale(ct.scale, first.scale):
            raise ShapeError("EncryptedTensor: the ciphertexts of one tensor must share level, scale and slot count "
                             f"(got level {first.level} / {ct.level}, slots {first.slots} / {ct.slots})")
    return first.replace(data=torch.stack([ct.data for ct in cts]))


class EncryptedTensor:
    """Values of a tensor, encrypted. Create with `ctx.encrypt(t)`; read with `ctx.decrypt(et)`.

    `ciphertext` is one Ciphertext, batched (B, 2, L, N) when the values span B > 1
    ciphertexts (`count`); `ciphertexts` lists them one by one (views).

    The operators (+, -, *, @, and add, sub, mul, neg, matmul) raise LevelError when a product
    has no level left, ScaleError for scales that cannot be matched, ContextError for another
    context's or device's operand, LayoutError and ShapeError for operands packed or shaped
    differently, EncodingError for NaN/inf or too large plaintext operands, MissingKeyError
    without the relinearisation key, UnsupportedOperationError for what has no encrypted form."""

    # numpy operands (ndarray + ex) return NotImplemented, so Python calls ex.__radd__ (NEP 13)
    __array_ufunc__ = None

    def __init__(self, ctx, ciphertext, shape, is_complex: bool = False, layout=None):
        self.ctx = ctx
        if isinstance(ciphertext, (list, tuple)):
            ciphertext = ciphertext[0] if len(ciphertext) == 1 else _stack(ciphertext)
        if ciphertext.data.dim() not in (3, 4):
            raise ShapeError(f"EncryptedTensor: ciphertext data must be (2, L, N) or (B, 2, L, N), got "
                             f"{tuple(ciphertext.data.shape)}")
        self.ciphertext = ciphertext
        self.shape = torch.Size(shape)
        self._complex = bool(is_complex)
        # None: the flat layout above; otherwise where a producer (fhetorch.nn, image layers)
        # put the values, e.g. a compiled model's feature-map layout; operands must agree on it.
        self.layout = layout

    # --- metadata ---------------------------------------------------------------------
    @property
    def count(self) -> int:
        """How many ciphertexts hold the values."""
        return self.ciphertext.data.shape[0] if self.ciphertext.data.dim() == 4 else 1

    @property
    def multi(self) -> bool:
        """True when the values span several ciphertexts."""
        return self.count > 1

    @property
    def ciphertexts(self) -> tuple:
        """The ciphertexts one by one (views of the batch)."""
        ct = self.ciphertext
        if ct.data.dim() == 3:
            return (ct,)
        return tuple(ct.replace(data=d) for d in ct.data.unbind(0))

    def single(self, what: str) -> Ciphertext:
        """The ciphertext of a one-ciphertext tensor.

        Raises ShapeError naming the operation `what` for a tensor spanning several."""
        if self.multi:
            raise ShapeError(f"{what}: needs the tensor in one ciphertext; it spans {self.count} ({self.numel()} "
                             f"values, {self.ctx.slots} slots each): element-wise arithmetic, sum, levels and "
                             "bootstrapping work on it, rotations and linear layers do not; split the tensor")
        return self.ciphertext

    @property
    def level(self) -> int:
        """Rescales left before the ciphertext is exhausted."""
        return self.ciphertext.level

    @property
    def scale(self) -> float:
        return float(self.ciphertext.scale)

    @property
    def device(self) -> torch.device:
        return self.ciphertext.device

    @property
    def dtype(self) -> torch.dtype:
        return torch.complex128 if self._complex else torch.float64

    @property
    def slots(self) -> int:
        """Slots of the packing (a power of two >= numel(); per ciphertext for several)."""
        return self.ciphertext.slots

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
        many = f", ciphertexts={self.count}" if self.multi else ""
        return (f"EncryptedTensor(shape={tuple(self.shape)}, dtype={self.dtype}, level={self.level}, "
                f"scale=2^{math.log2(self.scale):.2f}, device={self.device}{many})")

    def _like(self, ct: Ciphertext, is_complex=None, shape=None) -> "EncryptedTensor":
        return EncryptedTensor(self.ctx, ct, self.shape if shape is None else shape,
                               self._complex if is_complex is None else is_complex, self.layout)

    def with_layout(self, layout) -> "EncryptedTensor":
        """The same ciphertext(s) described by another layout (None: the flat packing).

        Raises nothing."""
        return EncryptedTensor(self.ctx, self.ciphertext, self.shape, self._complex, layout)

    def __getitem__(self, idx):
        """torch's indexing (ints, slices, None, ..., index tensors) of a flat-layout tensor: the
        selected values as a fresh tensor, one slot map (one level; none when nothing moves). On
        an image, x[..., ::s, ::s] is the option-A shortcut's subsampling (its layout keeps the
        grid); other selections of image layouts raise.

        Raises IndexError (torch's) for an index out of range, ShapeError for an empty
        selection or a tensor in several ciphertexts, UnsupportedOperationError for an image
        layout or a selection needing too many rotations (_linear.slot_map)."""
        key = idx if isinstance(idx, tuple) else (idx,)
        whole = slice(None)
        lead, tail = key[:-2], key[-2:]
        if (len(key) == self.dim() and len(tail) == 2 and all(isinstance(i, slice) and i == whole for i in lead)
                and isinstance(tail[0], slice) and tail[0] == tail[1] and tail[0].start in (None, 0)
                and tail[0].stop is None and self.dim() in (3, 4)):
            return _image.subsample(self, tail[0].step or 1)
        if self.layout is not None:
            raise UnsupportedOperationError("indexing an image-layout EncryptedTensor: only x[:, :, ::s, ::s] / "
                                            "x[:, ::s, ::s] (its slots are not row-major)")
        return self._gather(self._positions()[idx], "indexing")

    def _positions(self) -> torch.Tensor:
        """The slot of every value, in the tensor's shape (what a rearrangement of it rearranges)."""
        return torch.arange(self.numel()).reshape(self.shape)

    def _gather(self, src: torch.Tensor, what: str) -> "EncryptedTensor":
        """The values at slots `src` (any shape) as a fresh tensor of src's shape."""
        if src.numel() == 0:
            raise ShapeError(f"{what}: the selection is empty; an EncryptedTensor holds at least one value")
        if tuple(src.shape) == tuple(self.shape) and torch.equal(src.reshape(-1), torch.arange(self.numel())):
            return self  # nothing moves
        return _linear.slot_map(self, src, src.shape, what=what)

    def transpose(self, dim0: int, dim1: int) -> "EncryptedTensor":
        """torch.transpose as a fresh tensor: one slot map (one level; none for dim0 == dim1).

        Raises IndexError for a dimension out of range, and what indexing raises."""
        return self._gather(self._positions().transpose(dim0, dim1), "transpose")

    def permute(self, *dims) -> "EncryptedTensor":
        """torch.permute as a fresh tensor: one slot map (one level; none for the identity).

        Raises RuntimeError (torch's) for dims that are not a permutation, and what indexing raises."""
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)) else dims
        return self._gather(self._positions().permute(*dims), "permute")

    @property
    def T(self) -> "EncryptedTensor":
        """The dimensions reversed (x.permute(n - 1, ..., 0)), as torch's x.T."""
        return self.permute(*reversed(range(self.dim())))

    def t(self) -> "EncryptedTensor":
        """torch.t: the transpose of a tensor of at most 2 dimensions.

        Raises ShapeError for more dimensions, and what transpose raises."""
        if self.dim() > 2:
            raise ShapeError(f"t: expects a tensor of at most 2 dimensions, got shape {tuple(self.shape)}; use "
                             "transpose or permute")
        return self.transpose(0, 1) if self.dim() == 2 else self

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
        """A plaintext operand as a Python complex (scalar) or slot vectors: (slots,) for one
        ciphertext, (count, slots) for several (zero-padded)."""
        if self.layout is not None and not isinstance(x, (bool, int, float, complex)):
            raise LayoutError(f"{what}: this tensor is packed in {_layout_name(self.layout)}; a plaintext tensor "
                              "operand would be packed flat. Use a scalar, or combine inside the compiled model")
        if isinstance(x, bool):  # torch semantics: True acts as 1
            x = int(x)
        if isinstance(x, (int, float, complex)):
            c = complex(x)
            if not (math.isfinite(c.real) and math.isfinite(c.imag)):
                raise EncodingError(f"{what}: constant {x} is not finite")
            return c, isinstance(x, complex)
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
        padded = torch.zeros(self.count * self.slots, dtype=v.dtype)
        padded[: v.numel()] = v
        padded = padded.view(self.count, self.slots) if self.multi else padded
        return padded.to(self.device), is_c

    # --- arithmetic (the whole batch of ciphertexts at once) ---------------------------
    def _add(self, other, sign: int = 1) -> "EncryptedTensor":
        what = "add" if sign > 0 else "sub"
        if isinstance(other, EncryptedTensor):
            self._check_partner(other, what)
            f = ev.add if sign > 0 else ev.sub
            return self._like(f(self.ctx, self.ciphertext, other.ciphertext), self._complex or other._complex)
        p, is_c = self._plain(other, what)
        if isinstance(p, complex):
            ct = ev.add_scalar(self.ctx, self.ciphertext, sign * p, what)
        else:
            ct = ev.add_values(self.ctx, self.ciphertext, p, subtract=sign < 0)
        return self._like(ct, self._complex or is_c)

    def _sub(self, other) -> "EncryptedTensor":
        return self._add(other, -1)

    def _rsub(self, other) -> "EncryptedTensor":
        """other - self."""
        return (-self)._add(other)

    def _mul(self, other) -> "EncryptedTensor":
        if isinstance(other, EncryptedTensor):
            self._check_partner(other, "mul")
            return self._like(ev.mul(self.ctx, self.ciphertext, other.ciphertext), self._complex or other._complex)
        p, is_c = self._plain(other, "mul")
        if isinstance(p, complex):
            ct = ev.mul_scalar(self.ctx, self.ciphertext, p)
        else:
            ct = ev.mul_values(self.ctx, self.ciphertext, p)
        return self._like(ct, self._complex or is_c)

    def _div(self, other) -> "EncryptedTensor":
        """self / other for a plaintext other: the product with its reciprocal."""
        if isinstance(other, EncryptedTensor):
            other._no_division_by()
        return self._mul(_reciprocal(other))

    def _pow(self, k) -> "EncryptedTensor":
        """self ** k for an integer k >= 0: products of repeated squares, paired shallowest first,
        so the depth is ceil(log2 k) (k = 0: ones, no level)."""
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise UnsupportedOperationError(
                f"pow: only integer exponents >= 0 have an exact encrypted form, got {k!r}; approximate x ** a on "
                "x's range with fhe.ckks.polynomial.chebyshev(lambda t: t ** a, (lo, hi), degree)")
        if k == 0:
            return self._mul(0)._add(1)
        terms, sq, bit = [], self, 1
        while True:
            if k & bit:
                terms.append(sq)
            bit <<= 1
            if bit > k:
                break
            sq = sq.square()
        while len(terms) > 1:  # multiply the two with the most levels left (Huffman on depth)
            terms.sort(key=lambda t: t.level)
            terms.append(terms.pop()._mul(terms.pop()))
        return terms[0]

    def _no_encrypted_form(self, what: str, hint: str):
        raise UnsupportedOperationError(f"{what} has no exact encrypted form; {hint}")

    def __neg__(self):
        return self._like(ev.neg(self.ctx, self.ciphertext))

    def __pos__(self):
        return self

    def __truediv__(self, o):
        return self._div(o)

    def _no_division_by(self):
        self._no_encrypted_form("div: an encrypted divisor", "multiply by an approximation of 1 / y on y's "
                                "range, fhe.ckks.polynomial.chebyshev(lambda t: 1 / t, (a, b), degree)(ey)")

    def __rtruediv__(self, o):
        self._no_division_by()

    def __pow__(self, k):
        return self._pow(k)

    def __rpow__(self, o):
        self._no_encrypted_form("pow: an encrypted exponent", "approximate a ** y on y's range with "
                                "fhe.ckks.polynomial.chebyshev(lambda t: a ** t, (lo, hi), degree)")

    def __abs__(self):
        self._no_encrypted_form("abs of an EncryptedTensor", "approximate it on the values' range, "
                                "fhe.ckks.polynomial.chebyshev(torch.abs, (lo, hi), degree), or x * sign(x) with "
                                "fhe.ckks.polynomial.sign()")

    def _compare(self, op: str):
        self._no_encrypted_form(f"comparison {op} of an EncryptedTensor", "its result would be encrypted bits: take "
                                "fhe.ckks.polynomial.sign()(x - y) for values in [-1, 1] (-1 / +1), or decrypt first")

    def __lt__(self, o):
        self._compare("<")

    def __le__(self, o):
        self._compare("<=")

    def __gt__(self, o):
        self._compare(">")

    def __ge__(self, o):
        self._compare(">=")

    def __eq__(self, o):  # torch's == is element-wise: an identity test here would be a silent wrong answer
        self._compare("==")

    def __ne__(self, o):
        self._compare("!=")

    __hash__ = object.__hash__  # by identity, as torch.Tensor

    def __add__(self, o):
        return self._add(o)

    def __radd__(self, o):
        return self._add(o)

    def __sub__(self, o):
        return self._sub(o)

    def __rsub__(self, o):
        return self._rsub(o)

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

    def div(self, o, *, rounding_mode=None):
        """self / o for a plaintext o (a scalar or a tensor broadcasting to self.shape): the product
        with 1 / o, one level unless 1 / o is an integer.

        Raises EncodingError for a zero divisor, UnsupportedOperationError for an encrypted
        divisor or a rounding_mode, and what multiplication raises (LevelError, ...)."""
        if rounding_mode is not None:
            self._no_encrypted_form(f"div: rounding_mode={rounding_mode!r}", "rounding is not a polynomial; "
                                    "divide without it, or use TFHE (fhe.tfhe) for integer arithmetic")
        return self._div(o)

    def pow(self, k):
        """self ** k for an integer k >= 0 (a float equal to one too): ceil(log2 k) levels,
        k - 1 products at most (k = 0: ones without a level, as torch.pow).

        Raises UnsupportedOperationError for other exponents (a polynomial approximation of
        x ** a is the way), LevelError when the tensor has fewer levels than the depth."""
        return self._pow(k)

    def square(self):
        """self * self, relinearised and rescaled (one level).

        Raises LevelError at level 0, MissingKeyError without the relinearisation key."""
        return self._like(ev.square(self.ctx, self.ciphertext))

    def mul_i(self):
        """Multiply by the imaginary unit (exact, no level used).

        Raises nothing."""
        return self._like(ev.mul_i(self.ctx, self.ciphertext), True)

    def conj(self):
        """The complex conjugate (a real tensor is its own).

        Raises MissingKeyError without the conjugation key."""
        return self._like(ev.conj(self.ctx, self.ciphertext)) if self._complex else self

    # --- levels -----------------------------------------------------------------------
    def drop_level(self, levels: int = 1) -> "EncryptedTensor":
        """The same values `levels` levels lower, on the lower level's nominal scale.

        Raises LevelError for more levels than are left or a negative count, IntegerArgumentError
        for a count that is not an int, ScaleError for a scale the lower level cannot hold."""
        return self._like(ev.drop_level(self.ctx, self.ciphertext, levels))

    def rescale(self) -> "EncryptedTensor":
        """Divide the scale by the top prime(s) of the level, one level lower (products rescale
        themselves; this is for products made without).

        Raises LevelError at level 0, ScaleError when the result would fall far below the
        next level's nominal scale (a fresh ciphertext: use drop_level)."""
        return self._like(ev.rescale(self.ctx, self.ciphertext))

    def bootstrap(self) -> "EncryptedTensor":
        """A new EncryptedTensor with the same values and levels refreshed (a bootstrappable
        preset, keys from ctx.keygen(bootstrap=True)); see fhetorch/circuits/bootstrap.py.
        Several real ciphertexts travel in pairs, as a + i b, all pairs in one batched
        bootstrapping.

        Raises ParameterError for a preset that is not bootstrappable, MissingKeyError without
        the bootstrapping keys (ctx.keygen(bootstrap=True))."""
        ct = self.ciphertext
        if not self.multi or self._complex:
            return self._like(_bootstrap.bootstrap(self.ctx, ct))
        # real values: the first half of the batch travels with the second as a + i b, one
        # batched bootstrapping for all pairs; with an odd count the middle ciphertext goes in
        # both halves (one pair more, every result at the same scale)
        k, half = self.count, (self.count + 1) // 2
        ra, rb = _bootstrap.bootstrap_pair(self.ctx, ct.replace(data=ct.data[:half]),
                                           ct.replace(data=ct.data[k - half :]))
        return self._like(ra.replace(data=torch.cat([ra.data[: k - half], rb.data])))

    def lut(self, fn, interval=(-1.0, 1.0), bits: int | None = None):
        """fn of every value through TFHE lookup tables (CKKS -> TFHE -> CKKS, fhetorch/circuits/
        switching): the input is quantised to a grid of 2^bits points over `interval` (both ends
        on the grid; default bits: the most the switching keys' TFHE set holds at failure
        probability <= 2^-40 per value, ctx.switcher.max_bits), and the result is fn at that
        grid point. fn: a callable on float64 tensors (or floats), or a list / tuple of them
        (several functions of one input in one batched PBS: a tuple of tensors back). The
        result is fresh: it sits at EvalMod's output level (ctx.switcher.output_level).
        Values outside the interval wrap around (a wrong answer): keep them inside.

        Raises MissingKeyError without ctx.keygen(lut=True), EncodingError for a complex tensor,
        LevelError below ctx.switcher.levels levels, ParameterError for a bad interval, bits or
        function."""
        if self._complex:
            raise EncodingError("lut: the values must be real (a complex tensor's parts go through separately)")
        sw = self.ctx.switcher
        fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
        if not fns or not all(callable(f) for f in fns):
            raise ParameterError("lut: fn must be a callable or a non-empty list of callables")
        outs = [sw.lut(ct, fns, interval, bits) for ct in self.ciphertexts]  # [ciphertext][function]
        res = []
        for i in range(len(fns)):
            cts = [o[i] for o in outs]
            ct = cts[0] if len(cts) == 1 else cts[0].replace(data=torch.stack([c.data for c in cts]))
            res.append(self._like(ct))
        return tuple(res) if isinstance(fn, (list, tuple)) else res[0]

    def bootstrap_with(self, other: "EncryptedTensor") -> tuple:
        """(self, other) refreshed by one bootstrapping of self + i other (both real-valued).

        Raises EncodingError for a complex tensor, SlotError when they pack different slot
        counts, and what bootstrap() raises."""
        if self._complex or other._complex:
            raise EncodingError("bootstrap_with: both tensors must be real (they travel as real and imaginary parts)")
        u, v = _bootstrap.bootstrap_pair(self.ctx, self.ciphertext, other.ciphertext)
        return self._like(u), other._like(v)

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> "SortResult":
        """torch.sort of a 1-D tensor of n values (n a power of two, one ciphertext), values in
        [-1, 1]: a SortResult whose `values` (also `[0]`) is the sorted EncryptedTensor; the
        indices are not computed (they would need the permutation encrypted: a comparison matrix
        of n^2 signs), and asking for them raises. `stable` is accepted (values only: equal
        values are equal). fhetorch.ckks.sort(x, interval=..., degrees=..., eps=...) chooses the
        interval and the composite sign; docs/circuits.md, "Sorting".

        Raises ShapeError for a tensor that is not 1-D, whose length is not a power of two or
        that spans several ciphertexts, IndexError for a dim other than 0 / -1, EncodingError
        for a complex tensor, and what fhetorch.ckks.sort raises."""
        if as_int(dim, "sort", "dim") not in (0, -1):
            raise IndexError(f"sort: dimension {dim} out of range for a 1-d tensor")
        return SortResult(sort_values(self, descending=descending))

    # --- rotations ----------------------------------------------------------------------
    def rotate(self, k: int) -> "EncryptedTensor":
        """Raw left rotation of the slot vector: slot i takes slot i + k (cyclic over .slots).

        Raises MissingKeyError when no key (nor the +-2^i keys) makes step k at this level,
        IntegerArgumentError for a step that is not an int, ShapeError for a tensor spanning
        several ciphertexts."""
        ct = self.single("rotate")
        return self._like(ev.rotate(self.ctx, ct, as_int(k, "rotate", "the step")))

    def roll(self, shifts, dims=None) -> "EncryptedTensor":
        """torch.roll semantics on the logical tensor.

        Raises MissingKeyError for a missing rotation key, LevelError at level 0 when the roll
        needs masks, ShapeError when shifts and dims differ in length or for a tensor spanning
        several ciphertexts, IndexError for a dimension out of range, IntegerArgumentError for
        shifts or dims that are not ints, UnsupportedOperationError for several shifts without dims."""
        self.single("roll")
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

    def _mul_mask(self, mask: torch.Tensor) -> "EncryptedTensor":
        return self._like(ev.mul_values(self.ctx, self.ciphertext, mask.to(self.device)))

    # --- linear algebra (fhetorch/tensor/linear.py) --------------------------------------
    def __matmul__(self, w):
        return _matmul(self, w)

    def __rmatmul__(self, w):
        return _matmul(w, self)

    def matmul(self, w):
        return _matmul(self, w)

    def sum(self, dim=None, keepdim=False):
        """Sum over all dimensions, shape () (rotate-and-add; one level if some slots are
        padding, else none; several ciphertexts: added slot-wise first), or over `dim` (an int
        or a tuple; torch's shape and keepdim): one slot map, one level.

        Raises UnsupportedOperationError for an image layout (and what slot_map raises for a
        sum over some dimensions), ShapeError for a dim that is not one of the tensor's or a
        partial sum of a tensor in several ciphertexts, LevelError at level 0 when padding slots
        must be masked."""
        return self._sum(dim, keepdim, mean=False)

    def mean(self, dim=None, keepdim=False):
        """Mean over all dimensions (shape (): the sum with 1 / numel() folded into its padding
        mask, or one product before it) or over `dim` (one slot map); one level either way.

        Raises what sum raises, and LevelError at level 0."""
        return self._sum(dim, keepdim, mean=True)

    def _sum(self, dim, keepdim, mean: bool):
        if isinstance(self.layout, Layout):
            raise UnsupportedOperationError("sum of an image-layout tensor: its slots also hold values the layout "
                                            "ignores; use F.adaptive_avg_pool2d, flatten and F.linear, or decrypt")
        what = "mean" if mean else "sum"
        dims = range(self.dim()) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
        try:
            dims = sorted({d + self.dim() if d < 0 else d for d in dims})
            if any(not 0 <= d < max(1, self.dim()) for d in dims):
                raise IndexError
        except (TypeError, IndexError):
            raise ShapeError(f"{what}: dim {dim!r} is not a dimension of shape {tuple(self.shape)}") from None
        if len(dims) >= self.dim():  # all of them: rotate-and-add
            return _linear.sum_all(self, keepdim, 1.0 / self.numel() if mean else 1)
        count = math.prod(self.shape[d] for d in dims)
        base = self._positions()[tuple(slice(0, 1) if d in dims else slice(None) for d in range(self.dim()))]
        out = tuple(base.shape) if keepdim else tuple(n for d, n in enumerate(self.shape) if d not in dims)
        summed = _linear.sum_along(self, dims)  # each block's sum at its first position
        return _linear.slot_map(summed, base, out, 1.0 / count if mean else 1.0, what)

    def reshape(self, *shape) -> "EncryptedTensor":
        """The same values in another shape, in torch.reshape's row-major order (the flat packing
        keeps its slots: no work). `view` is the same.

        Raises ShapeError for a shape of another size, UnsupportedOperationError for an image or
        model layout (its slots are not row-major)."""
        if self.layout is not None:
            self._no_encrypted_form("reshape: an image- or model-layout tensor", "its slots are not in row-major "
                                    "order; use flatten after global pooling, or decrypt")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        return self._relabelled("reshape", lambda t: t.reshape(*shape))

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1) -> "EncryptedTensor":
        """torch.flatten: a flat-layout tensor is reshaped (no work); an image layout only after
        global pooling (C x 1 x 1 values, where the layout has them).

        Raises ShapeError for dimensions out of range, UnsupportedOperationError for an image
        that is not C x 1 x 1, LayoutError for a compiled model's layout."""
        if self.layout is not None:
            return _image.flatten(self, start_dim, end_dim)
        return self._relabelled("flatten", lambda t: t.flatten(start_dim, end_dim))

    def _relabelled(self, what: str, view) -> "EncryptedTensor":
        """The same slots under the shape `view` gives a tensor of this shape (torch's rules and
        errors, on a meta tensor: no data)."""
        try:
            new = view(torch.empty(self.shape, device="meta")).shape
        except (RuntimeError, TypeError, IndexError) as e:
            raise ShapeError(f"{what}: {e}; the encrypted shape is {tuple(self.shape)}") from None
        return self._like(self.ciphertext, shape=new)

    def clone(self) -> "EncryptedTensor":
        """A copy with its own ciphertext data (the same context and keys).

        Raises nothing."""
        return self.__deepcopy__({})

    # --- copies (pickling: fhetorch/tensor/serialization.py) -----------------------------
    def __copy__(self) -> "EncryptedTensor":
        return EncryptedTensor(self.ctx, self.ciphertext, self.shape, self._complex, self.layout)

    def __deepcopy__(self, memo) -> "EncryptedTensor":
        """New ciphertext data, the same context: copying a tensor never copies its keys."""
        ct = self.ciphertext
        return EncryptedTensor(self.ctx, ct.replace(data=ct.data.clone()), self.shape, self._complex, self.layout)

    # --- devices -----------------------------------------------------------------------
    def to(self, device) -> "EncryptedTensor":
        """The same values on `device` (with its context's copy there).

        Raises RuntimeError (torch's) for a device this build or machine lacks."""
        ctx = self.ctx.to(device)
        if ctx.device == self.device:
            return self
        return EncryptedTensor(ctx, self.ciphertext.to(ctx.device), self.shape, self._complex, self.layout)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    # --- torch function dispatch ---------------------------------------------------
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        handler = TORCH_FUNCTIONS.get(func)
        if handler is None:
            name = getattr(func, "__name__", str(func))
            raise UnsupportedOperationError(f"torch.{name} is not supported on EncryptedTensor (supported: "
                                      f"{', '.join(sorted(_SUPPORTED))}, the arithmetic operators and @, "
                                      "indexing)")
        return handler(*args, **(kwargs or {}))


# --- helpers of the methods: arguments, divisors, matrix products, sorting --------------
def _as_tuple(x) -> tuple:
    """roll's shifts / dims: one value or a sequence of them."""
    return tuple(x) if isinstance(x, (list, tuple, torch.Size)) else (x,)


def _scaled(x, alpha):
    if isinstance(x, EncryptedTensor):
        return x * alpha
    return torch.as_tensor(x) * alpha if not isinstance(x, (int, float, complex)) else x * alpha


def _matmul(a, b):
    """a @ b with one operand a 1-D EncryptedTensor and the other a plaintext matrix."""
    if isinstance(a, EncryptedTensor) and isinstance(b, EncryptedTensor):
        raise UnsupportedOperationError("matmul: both operands encrypted is not supported; one must be plaintext")
    return _linear.matmul(a, b) if isinstance(a, EncryptedTensor) else _linear.matmul(b, a, x_right=True)


def _reciprocal(x):
    """1 / x for a plaintext divisor (a number or a tensor), checked for zeros: what `_plain` then
    packs. A divisor of +-1 stays an integer (no level)."""
    if isinstance(x, (bool, int, float, complex)):
        if x == 0:
            raise EncodingError("div: division by zero; a zero divisor has no finite reciprocal to multiply by")
        return int(x) if x in (1, -1) else 1 / complex(x) if isinstance(x, complex) else 1 / float(x)
    t = torch.as_tensor(x)
    check_dense(t, "div")
    if bool((t == 0).any()):
        raise EncodingError("div: the divisor tensor has zeros; a zero has no finite reciprocal to multiply by")
    return 1 / t.to(torch.complex128 if t.is_complex() else torch.float64)


def sort_values(x: EncryptedTensor, *, descending: bool = False, interval=(-1.0, 1.0), degrees=None,
                eps: float | None = None) -> EncryptedTensor:
    """The values of a 1-D EncryptedTensor sorted by the bitonic circuit (fhetorch/circuits/sort.py).

    Raises ShapeError for a tensor that is not 1-D, whose length is not a power of two or that
    spans several ciphertexts, EncodingError for a complex tensor, and what circuits.sort raises."""
    if x.dim() != 1:
        raise ShapeError(f"sort: expected a 1-D tensor, got shape {tuple(x.shape)}; flatten it first")
    if x.is_complex():
        raise EncodingError("sort: the values must be real")
    _sort.check_slots(x.numel(), x.ctx.slots)
    ct = x.single("sort")
    return x._like(_sort.sort(x.ctx, ct, descending=descending, interval=interval, degrees=degrees, eps=eps))


class SortResult:
    """What torch.sort returns for an EncryptedTensor: `values` (also `result[0]`); the indices
    are not computed, so `indices`, `result[1]` and unpacking into (values, indices) raise
    UnsupportedOperationError naming fhetorch.ckks.sort."""

    def __init__(self, values: EncryptedTensor):
        self.values = values

    @property
    def indices(self):
        """Raises UnsupportedOperationError (the permutation is not computed)."""
        raise UnsupportedOperationError(
            "torch.sort on EncryptedTensor: the indices are not computed (the permutation of n encrypted values "
            "needs n^2 comparisons); take torch.sort(x).values, or fhetorch.ckks.sort(x) for the values")

    def __getitem__(self, i):
        if i in (0, -2):
            return self.values
        return self.indices

    def __iter__(self):
        yield self.values
        yield self.indices

    def __len__(self):
        return 2

    def __repr__(self):
        return f"SortResult(values={self.values!r}, indices=<not computed>)"


# torch callable -> handler, and the names an error lists: filled by fhetorch/tensor/dispatch.py
TORCH_FUNCTIONS: dict = {}
_SUPPORTED: set = set()
