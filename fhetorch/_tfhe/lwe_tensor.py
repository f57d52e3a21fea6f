"""LWETensor: a batch of TFHE LWE ciphertexts shaped like the integer tensor it encrypts.

data (..., d + 1) int64 in [0, q) under the context's big (extracted GLWE) key, d = k N. Each
tensor tracks two bounds, so an LWE linear operation that could go wrong raises instead:
`degree`, the largest value any element may hold (values must stay below the message space
2^(message_bits + carry_bits): the padding bit stays clear), and `noise_level`, the sum of
squared integer weights since the last PBS or encryption (at most max_noise_level^2).
"""
from __future__ import annotations

import torch

from ..errors import IntegerArgumentError, MessageOverflowError, UnsupportedOperationError


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
        return self.shape[0]

    def __repr__(self) -> str:
        return f"LWETensor(shape={tuple(self.shape)}, degree={self.degree}, noise_level={self.noise_level})"

    def __getitem__(self, index) -> "LWETensor":
        """Indexing over the batch dimensions (the ciphertext dimension is kept).

        Raises IndexError for an index out of range (as torch)."""
        if not isinstance(index, tuple):
            index = (index,)
        return LWETensor(self.context, self.data[(*index, slice(None))], self.degree, self.noise_level)

    def reshape(self, *shape) -> "LWETensor":
        """Raises RuntimeError (torch's) for a shape of another size."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        return LWETensor(self.context, self.data.reshape(*shape, self.data.shape[-1]), self.degree, self.noise_level)

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

    _TORCH = {"add": "add", "sub": "sub", "neg": "neg", "mul": "mul", "__add__": "add", "__sub__": "sub",
              "__mul__": "mul", "__neg__": "neg"}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        method = cls._TORCH.get(name)
        if method is None or kwargs:
            raise UnsupportedOperationError(f"torch.{name} has no encrypted form for an LWETensor "
                                            "(supported: add, sub, neg, mul by an int, LUTs)")
        first, *rest = args
        if not isinstance(first, LWETensor):
            first, rest = rest[0], [first]
            if method == "sub":
                return first.neg().add(*rest)
        return getattr(first, method)(*rest)
