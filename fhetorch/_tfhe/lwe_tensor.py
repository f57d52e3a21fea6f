"""LWETensor: a batch of TFHE LWE ciphertexts shaped like the integer tensor it encrypts.

data (..., d + 1) int64 in [0, q) under the context's big (extracted GLWE) key, d = k N. Each
tensor tracks two bounds, so an LWE linear operation that could go wrong raises instead:
`degree`, the largest value any element may hold (values must stay below the message space
2^(message_bits + carry_bits): the padding bit stays clear), and `noise_level`, the sum of
squared integer weights since the last PBS or encryption (at most max_noise_level^2).
"""
from __future__ import annotations

import torch

from ..errors import IntegerArgumentError, MessageOverflowError, ShapeError, UnsupportedOperationError


class LWETensor:
    def __init__(self, context, data: torch.Tensor, degree: int, noise_level: int = 1):
        self.context = context
        self.data = data
        self.degree = int(degree)
        self.noise_level = int(noise_level)

    # --- metadata ------------------------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return self.data.shape[:-1]

    @property
    def device(self) -> torch.device:
        return self.data.device

    def numel(self) -> int:
        return self.shape.numel()

    def __len__(self) -> int:
        """Raises TypeError for a 0-d tensor (as torch)."""
        if self.ndim == 0:
            raise TypeError("len() of a 0-d LWETensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"LWETensor(shape={tuple(self.shape)}, degree={self.degree}, noise_level={self.noise_level})"

    @property
    def ndim(self) -> int:
        return self.data.dim() - 1

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    # --- shape operations (torch semantics on the batch dimensions; the ciphertext dimension is
    # --- always last and never touched; degree and noise level are kept) --------------------------
    def _like(self, data: torch.Tensor) -> "LWETensor":
        return LWETensor(self.context, data, self.degree, self.noise_level)

    def _dim(self, op: str, dim: int, ndim: int | None = None) -> int:
        """A batch dimension (negative counts from the last batch dimension) as a data dimension."""
        ndim = self.ndim if ndim is None else ndim
        if isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"LWETensor.{op}: dimension {dim!r} out of range for {ndim} batch dimension(s)")
        return dim % max(ndim, 1)

    def __getitem__(self, index) -> "LWETensor":
        """Indexing over the batch dimensions (the ciphertext dimension is kept).

        Raises IndexError for an index out of range (as torch)."""
        if not isinstance(index, tuple):
            index = (index,)
        return self._like(self.data[(*index, slice(None))])

    def reshape(self, *shape) -> "LWETensor":
        """Raises RuntimeError (torch's) for a shape of another size."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        return self._like(self.data.reshape(*shape, self.data.shape[-1]))

    def view(self, *shape) -> "LWETensor":
        """Raises RuntimeError (torch's) for a shape of another size or a non-viewable layout."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        return self._like(self.data.view(*shape, self.data.shape[-1]))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "LWETensor":
        """Raises IndexError for a dimension out of range."""
        if self.ndim == 0:
            return self.reshape(1)
        return self._like(self.data.flatten(self._dim("flatten", start_dim), self._dim("flatten", end_dim)))

    def unsqueeze(self, dim: int) -> "LWETensor":
        """Raises IndexError for a dimension out of range."""
        return self._like(self.data.unsqueeze(self._dim("unsqueeze", dim, self.ndim + 1)))

    def squeeze(self, dim: int | None = None) -> "LWETensor":
        """Raises IndexError for a dimension out of range."""
        if dim is None:
            return self.reshape([s for s in self.shape if s != 1])
        return self._like(self.data.squeeze(self._dim("squeeze", dim)) if self.ndim else self.data)

    def transpose(self, dim0: int, dim1: int) -> "LWETensor":
        """Raises IndexError for a dimension out of range."""
        return self._like(self.data.transpose(self._dim("transpose", dim0), self._dim("transpose", dim1)))

    def permute(self, *dims) -> "LWETensor":
        """Raises IndexError for a dimension out of range, RuntimeError (torch's) for a non-permutation."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list, torch.Size)):
            dims = tuple(dims[0])
        return self._like(self.data.permute(*(self._dim("permute", d) for d in dims), self.ndim))

    def sum(self, dim=None, keepdim: bool = False) -> "LWETensor":
        """The sum over batch dimension(s) dim (None: all): a sum of m terms has m times the
        degree and m times the noise level.

        Raises IndexError for a dimension out of range, MessageOverflowError if the sum could
        leave the message space or noise budget."""
        dims = range(self.ndim) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        dims = sorted({self._dim("sum", d) for d in dims})
        m = 1
        for d in dims:
            m *= self.data.shape[d]
        data = self.data
        if dims:
            # every value < q < 2^62: sum 31-bit halves (exact in int64 for < 2^32 terms), then join mod q
            mq = self.context.modulus
            hi = mq.reduce((data >> 31).sum(dims, keepdim=keepdim))
            lo = mq.reduce((data & ((1 << 31) - 1)).sum(dims, keepdim=keepdim))
            half = mq.mul_small(hi, 1 << 30)
            data = mq.add(mq.add(half, half), lo)
        return self._checked("sum", data, self.degree * m, self.noise_level * m)

    @staticmethod
    def stack(tensors, dim: int = 0) -> "LWETensor":
        """torch.stack of LWETensors of one context: the degree and noise level are the largest.

        Raises ContextError for tensors of several contexts, ShapeError for an empty sequence,
        IndexError for a dimension out of range, RuntimeError (torch's) for unequal shapes."""
        first = LWETensor._first("stack", tensors)
        d = first._dim("stack", dim, first.ndim + 1)
        return LWETensor._joined(first, tensors, torch.stack([t.data for t in tensors], d))

    @staticmethod
    def cat(tensors, dim: int = 0) -> "LWETensor":
        """torch.cat of LWETensors of one context (see stack).

        Raises ContextError, ShapeError, IndexError, RuntimeError as stack."""
        first = LWETensor._first("cat", tensors)
        d = first._dim("cat", dim)
        return LWETensor._joined(first, tensors, torch.cat([t.data for t in tensors], d))

    @staticmethod
    def _first(op: str, tensors) -> "LWETensor":
        tensors = list(tensors)
        if not tensors:
            raise ShapeError(f"LWETensor.{op}: expected a non-empty sequence of LWETensors")
        first = tensors[0]
        if not isinstance(first, LWETensor):
            raise UnsupportedOperationError(f"torch.{op}: expected LWETensors, got {type(first).__name__}")
        for t in tensors[1:]:
            first.context._check_tensor(op, t)
        return first

    @staticmethod
    def _joined(first, tensors, data) -> "LWETensor":
        return LWETensor(first.context, data, max(t.degree for t in tensors), max(t.noise_level for t in tensors))

    # --- copies (pickling: fhetorch/_tfhe/serialization.py) ------------------------------------
    def __copy__(self) -> "LWETensor":
        return LWETensor(self.context, self.data, self.degree, self.noise_level)

    def __deepcopy__(self, memo) -> "LWETensor":
        """New ciphertext data, the same context: copying a tensor never copies its keys."""
        return LWETensor(self.context, self.data.clone(), self.degree, self.noise_level)

    # --- checks ----------------------------------------------------------------------------------
    def _checked(self, op: str, data: torch.Tensor, degree: int, noise_level: int) -> "LWETensor":
        p = self.context.params
        if degree >= p.message_space:
            raise MessageOverflowError(
                f"LWETensor.{op}: the result could reach {degree}, beyond the message space [0, {p.message_space}) "
                f"of {p.name} ({p.message_bits} message + {p.carry_bits} carry bits); apply a LUT (PBS) first to "
                "bring values back into range, or use a preset with carry bits")
        if noise_level > p.max_noise_level ** 2:
            raise MessageOverflowError(
                f"LWETensor.{op}: the sum of squared weights since the last PBS would be {noise_level}, above "
                f"max_noise_level^2 = {p.max_noise_level ** 2} of {p.name}; apply a LUT (PBS) first")
        return LWETensor(self.context, data, degree, noise_level)

    def _other(self, op: str, other) -> "LWETensor":
        self.context._check_tensor(op, other)
        return other

    # --- LWE linear operations -----------------------------------------------------------------
    def add(self, other) -> "LWETensor":
        """self + other (an LWETensor of the same context, or a Python int constant).

        Raises MessageOverflowError if the result could leave the message space or noise budget,
        ContextError for another context's tensor, IntegerArgumentError for a non-integer constant."""
        mq = self.context.modulus
        if isinstance(other, LWETensor):
            self._other("add", other)
            data = mq.add(self.data, other.data)
            return self._checked("add", data, self.degree + other.degree, self.noise_level + other.noise_level)
        c = self._constant("add", other)
        mm = self.context.params.message_modulus
        c %= mm  # constants act modulo the message modulus, kept non-negative (padding bit clear)
        body = mq.add(self.data[..., -1], torch.full_like(self.data[..., -1], c * self.context.params.delta % mq.q))
        data = torch.cat((self.data[..., :-1], body.unsqueeze(-1)), -1)
        return self._checked("add", data, self.degree + c, self.noise_level)

    def neg(self) -> "LWETensor":
        """-self modulo the message modulus, as z - self with z the smallest multiple of it that is
        at least the degree (values stay non-negative; TFHE-rs's rule).

        Raises MessageOverflowError if z leaves the message space (no carry bits)."""
        mm = self.context.params.message_modulus
        z = max(mm, -(-self.degree // mm) * mm)
        mq = self.context.modulus
        data = mq.neg(self.data)
        data[..., -1] = mq.add(data[..., -1], torch.full_like(data[..., -1], z * self.context.params.delta % mq.q))
        return self._checked("neg", data, z, self.noise_level)

    def sub(self, other) -> "LWETensor":
        """self - other = self + (-other) (see neg).

        Raises MessageOverflowError, ContextError, IntegerArgumentError as add and neg."""
        if isinstance(other, LWETensor):
            return self.add(other.neg())
        return self.add(-self._constant("sub", other))

    def mul(self, c) -> "LWETensor":
        """self * c for a Python int c (c < 0: -(self * |c|)).

        Raises MessageOverflowError if the result could overflow, IntegerArgumentError for a
        non-integer, UnsupportedOperationError for an LWETensor (a product of two ciphertexts
        needs a PBS: use a bivariate LUT)."""
        if isinstance(c, LWETensor):
            raise UnsupportedOperationError("LWETensor.mul: the product of two LWE ciphertexts needs a PBS; "
                                            "multiply by a Python int, or build a LUT of both inputs")
        c = self._constant("mul", c)
        if c < 0:
            return self.mul(-c).neg()
        data = self.context.modulus.mul_small(self.data, c)
        return self._checked("mul", data, self.degree * c, self.noise_level * c * c)

    @staticmethod
    def _constant(op: str, c) -> int:
        if isinstance(c, bool) or not isinstance(c, int):
            raise IntegerArgumentError(f"LWETensor.{op}: constants must be Python ints, got {type(c).__name__}")
        if abs(c) >= 1 << 31:
            raise IntegerArgumentError(f"LWETensor.{op}: constant {c} is too large (|c| < 2^31)")
        return c

    __add__ = add
    __radd__ = add
    __sub__ = sub
    __mul__ = mul
    __rmul__ = mul
    __neg__ = neg

    def __rsub__(self, other) -> "LWETensor":
        return self.neg().add(other)

    def __bool__(self):
        raise UnsupportedOperationError("LWETensor: the truth value of an encrypted tensor is unknown; decrypt it")

    # torch functions with an encrypted form: name -> method (stack and cat take a sequence)
    _TORCH = {"add": "add", "sub": "sub", "neg": "neg", "mul": "mul", "__add__": "add", "__sub__": "sub",
              "__mul__": "mul", "__neg__": "neg", "__getitem__": "__getitem__", "reshape": "reshape",
              "view": "view", "flatten": "flatten", "unsqueeze": "unsqueeze", "squeeze": "squeeze",
              "transpose": "transpose", "permute": "permute", "sum": "sum", "numel": "numel", "stack": "stack",
              "cat": "cat", "concat": "cat", "concatenate": "cat"}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch.add/sub/mul/neg, torch.stack/cat, torch.sum and the shape functions on LWETensors.

        Raises UnsupportedOperationError naming any other torch function."""
        if not all(issubclass(t, (LWETensor, torch.Tensor)) for t in types):
            return NotImplemented
        name = getattr(func, "__name__", str(func))
        method = cls._TORCH.get(name)
        if method is None:
            raise UnsupportedOperationError(f"torch.{name} has no encrypted form for an LWETensor "
                                            "(supported: add, sub, neg, mul by an int, sum, stack, cat, shape "
                                            "functions, LUTs)")
        kwargs = kwargs or {}
        if method in ("stack", "cat"):
            return getattr(LWETensor, method)(*args, **kwargs)
        first, *rest = args
        if not isinstance(first, LWETensor):
            first, rest = rest[0], [first]
            if method == "sub":
                return first.neg().add(*rest)
        return getattr(first, method)(*rest, **kwargs)
