"""User-facing polynomial functions and bootstrapping, on torch tensors, EncryptedTensors and
Ciphertexts: thin wrappers of the circuits (fhetorch/circuits), which work on Ciphertexts.

    sig = fhetorch.ckks.polynomial.chebyshev(torch.sigmoid, (-8, 8), 15)
    sig(torch.linspace(-8, 8, 5))            # float64 values of the interpolant
    ctx.decrypt(sig(ctx.encrypt(x)))         # the same, encrypted
    fhetorch.ckks.bootstrap(ex)              # = ex.bootstrap()

The fhetorch.ckks facade re-exports these names.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from .._ckks.ciphertext import Ciphertext
from ..circuits import approximations
from ..circuits import bootstrap as _bootstrap
from ..circuits.approximations import LEE_DEGREES, LEE_EPS
from ..circuits.chebyshev import Chebyshev, interpolate
from ..circuits.polynomial import (PolyCost, PowerBasis, composite_cost, cost, evaluate, evaluate_composite,
                                   plain_composite)
from ..errors import ContextError
from .encrypted_tensor import EncryptedTensor, sort_values


class EncryptedPowerBasis(PowerBasis):
    """The power basis of an EncryptedTensor: polynomials evaluated on it return EncryptedTensors
    like `tensor` (make it with `power_basis(et, interval)`)."""

    def __init__(self, tensor: EncryptedTensor, interval=(-1.0, 1.0)):
        super().__init__(tensor.ctx, tensor.ciphertext, interval)
        self.tensor = tensor


def power_basis(x: EncryptedTensor, interval=(-1.0, 1.0)) -> EncryptedPowerBasis:
    """The power basis of an EncryptedTensor, shared by polynomials on `interval`:

        basis = power_basis(ex, (-4, 4)); f(basis), g(basis)   # T_i computed once

    Raises TypeError for anything but an EncryptedTensor (for a Ciphertext use
    PowerBasis(ctx, ct, interval)), ApproximationError for an empty interval."""
    if not isinstance(x, EncryptedTensor):
        raise TypeError(f"power_basis: expected an EncryptedTensor, got {type(x).__name__}; "
                        "for a Ciphertext use PowerBasis(ctx, ct, interval)")
    return EncryptedPowerBasis(x, interval)


class HEFunction(ABC):
    """A function evaluated the same way on plaintext and encrypted inputs.

    f(t) for a torch tensor (or number): the float64 (complex128) plaintext result of the
    polynomial approximation; f(et) for an EncryptedTensor: an EncryptedTensor; f(basis) for a
    power basis: an EncryptedTensor for power_basis(et), a Ciphertext for PowerBasis(ctx, ct);
    f.evaluate(ctx, ct) for a Ciphertext.

    Raises (when called) LevelError when the input has fewer levels than f.depth (before any
    work), ApproximationError for a power basis of another interval, ContextError for a bare
    Ciphertext (use f.evaluate(ctx, ct)).
    """

    @abstractmethod
    def plain(self, x):
        """The approximation on plaintext values, float64 (complex128 for complex input). Raises nothing."""

    @abstractmethod
    def evaluate(self, ctx, x):
        """The approximation on a Ciphertext (or a PowerBasis of one); a Ciphertext.

        Raises LevelError (before any work) when x has fewer levels than the depth,
        ApproximationError for a power basis of another interval."""

    @abstractmethod
    def cost(self, level: int | None = None) -> PolyCost:
        """Depth and multiplications on a fresh nominal-scale input. Raises nothing."""

    @property
    def depth(self) -> int:
        """Levels consumed on a nominal-scale input."""
        return self.cost().depth

    def __call__(self, x):
        """f(x) for a tensor or number (plaintext), an EncryptedTensor or a power basis.

        Raises LevelError when x has fewer levels than f.depth (before any work),
        ApproximationError for a power basis of another interval, ContextError for a bare
        Ciphertext, UnsupportedOperationError for a tensor spanning several ciphertexts."""
        if isinstance(x, EncryptedTensor):
            return x._like(self.evaluate(x.ctx, x.ciphertext))
        if isinstance(x, EncryptedPowerBasis):
            return x.tensor._like(self.evaluate(x.ctx, x))
        if isinstance(x, PowerBasis):
            return self.evaluate(x.ctx, x)
        if isinstance(x, Ciphertext):
            raise ContextError(f"{type(self).__name__}: a Ciphertext needs its context; call .evaluate(ctx, ct)")
        return self.plain(x)


class ChebyshevFunction(HEFunction):
    """A Chebyshev series on an interval, as an HEFunction (see `chebyshev()`)."""

    def __init__(self, series: Chebyshev, *, name: str | None = None):
        self.series = series
        self.name = name

    @property
    def interval(self) -> tuple:
        return self.series.interval

    @property
    def degree(self) -> int:
        return self.series.degree

    @property
    def coeffs(self) -> np.ndarray:
        return self.series.coeffs

    def plain(self, x):
        """The series on plaintext values (Chebyshev.__call__). Raises nothing."""
        return self.series(x)

    def evaluate(self, ctx, x, *, baby: int | None = None):
        """The series on a Ciphertext (or a PowerBasis); a Ciphertext. Raises LevelError when x has
        too few levels, ApproximationError for a basis of another interval."""
        return evaluate(ctx, x, self.series, baby=baby)

    def cost(self, level: int | None = None, *, basis: PowerBasis | None = None) -> PolyCost:
        """Depth and multiplications (on a fresh input, or on what `basis` already holds).

        Raises ApproximationError for a basis of another interval."""
        return cost(self.series, level=level, basis=basis)

    def __repr__(self):
        c = self.cost()
        return (f"ChebyshevFunction({self.name + ', ' if self.name else ''}degree={self.degree}, "
                f"interval={self.interval}, depth={c.depth}, mults={c.mults})")


@dataclass
class Composite(HEFunction):
    """stages[-1](... stages[0](x)): each stage a ChebyshevFunction whose input is the previous output.

    With `times_input`, the result is x * (scale * composite(x) + offset) (one more level): ReLU =
    x (1 + sign(x)) / 2 is Composite(sign stages, times_input=True, scale=0.5, offset=0.5) - the
    scale and offset are folded into the last stage's coefficients, at no cost. sign_error and
    eps: the composite sign's max error on eps <= |x| <= 1 (sign() and relu())."""

    stages: list
    times_input: bool = False
    scale: float = 1.0
    offset: float = 0.0
    name: str | None = None
    sign_error: float | None = None
    eps: float | None = None
    stage_series: tuple = field(init=False, repr=False)

    def __post_init__(self):
        last = self.stages[-1].series.scaled(self.scale, self.offset)
        self.stage_series = tuple(s.series for s in self.stages[:-1]) + (last,)

    def plain(self, x):
        """The chain on plaintext values, float64 (complex128). Raises nothing."""
        return plain_composite(x, self.stage_series, times_input=self.times_input)

    def cost(self, level: int | None = None, *, basis: PowerBasis | None = None) -> PolyCost:
        """Summed over the stages (the first on `basis` when given), plus the final product with x.

        Raises ApproximationError for a basis of another interval than the first stage's."""
        return composite_cost(self.stage_series, times_input=self.times_input, basis=basis)

    def evaluate(self, ctx, x):
        """The chain on a Ciphertext (or a PowerBasis); a Ciphertext. Raises LevelError before any
        work when x has too few levels."""
        return evaluate_composite(ctx, x, self.stage_series, times_input=self.times_input, name=self.name)


def chebyshev(fn, interval=(-1.0, 1.0), degree: int = 15) -> ChebyshevFunction:
    """The Chebyshev interpolant of fn on `interval` at `degree`, callable on tensors and EncryptedTensors.

        sig = fhetorch.ckks.polynomial.chebyshev(torch.sigmoid, (-8, 8), 15)
        sig(torch.linspace(-8, 8, 5))            # float64 values of the interpolant
        ctx.decrypt(sig(ctx.encrypt(x)))         # the same, encrypted

    Inputs outside the interval are the caller's mistake: the interpolant diverges there and
    the encrypted evaluation cannot detect it.

    Raises ApproximationError for an empty interval, a negative degree, or fn not finite and
    real at the interpolation nodes.
    """
    return ChebyshevFunction(interpolate(fn, interval, degree), name=getattr(fn, "__name__", None))


def from_coefficients(coeffs, interval=(-1.0, 1.0)) -> ChebyshevFunction:
    """sum_i coeffs[i] T_i(y), y the input mapped from `interval` onto [-1, 1].

    Raises ApproximationError for empty or non-finite coefficients or an empty interval."""
    return ChebyshevFunction(Chebyshev(np.asarray(coeffs, dtype=np.float64), interval))


def sigmoid(degree: int = 3) -> ChebyshevFunction:
    """HELR's least-squares sigmoid on [-8, 8], degree 3, 5 or 7 (circuits/approximations.py).

    Raises ApproximationError for another degree."""
    return ChebyshevFunction(approximations.sigmoid_series(degree), name=f"sigmoid{degree}")


def sign(degrees=LEE_DEGREES, eps: float = LEE_EPS) -> Composite:
    """Composite minimax sign on [-1, -eps] U [eps, 1] (odd stages of the given degrees).

    Raises ApproximationError for even or non-positive degrees, or eps outside (0, 1)."""
    stages, err = approximations.composite_sign_series(tuple(degrees), float(eps))
    return Composite([ChebyshevFunction(s) for s in stages], name=f"sign{list(degrees)}", sign_error=err, eps=eps)


def relu(degrees=LEE_DEGREES, eps: float = LEE_EPS) -> Composite:
    """ReLU(x) = x (1 + sign(x)) / 2 on [-1, 1] with the composite minimax sign.

    Raises ApproximationError for even or non-positive degrees, or eps outside (0, 1)."""
    stages, err = approximations.composite_sign_series(tuple(degrees), float(eps))
    return Composite([ChebyshevFunction(s) for s in stages], times_input=True, scale=0.5, offset=0.5,
                     name=f"relu{list(degrees)}", sign_error=err, eps=eps)


def bootstrap(x, ctx=None):
    """A refreshed copy of an EncryptedTensor (= x.bootstrap()) or of a Ciphertext (give its ctx),
    at level `user_levels` of a bootstrappable preset. Keys: ctx.keygen(bootstrap=True).

    Raises ContextError for a Ciphertext without ctx, ParameterError for a preset that is not
    bootstrappable, MissingKeyError without the bootstrapping keys."""
    if isinstance(x, EncryptedTensor):
        return x.bootstrap()
    return _bootstrap.bootstrap(_context(ctx, "bootstrap"), x)


def bootstrap_pair(x, y, ctx=None) -> tuple:
    """Two real-valued EncryptedTensors (= x.bootstrap_with(y)) or Ciphertexts (give their ctx)
    refreshed by one bootstrapping of x + i y.

    Raises ContextError for Ciphertexts without ctx, SlotError when they pack different slot
    counts, EncodingError for complex tensors, and what bootstrap() raises."""
    if isinstance(x, EncryptedTensor):
        return x.bootstrap_with(y)
    return _bootstrap.bootstrap_pair(_context(ctx, "bootstrap_pair"), x, y)


def lut(x: EncryptedTensor, fn, interval=(-1.0, 1.0), bits: int | None = None):
    """= x.lut(fn, interval, bits): fn of x's values through TFHE lookup tables (CKKS <-> TFHE
    switching). Raises what EncryptedTensor.lut raises, ContextError for anything but an
    EncryptedTensor."""
    if not isinstance(x, EncryptedTensor):
        raise ContextError(f"lut: expected an EncryptedTensor, got {type(x).__name__}")
    return x.lut(fn, interval, bits)


def sort(x: EncryptedTensor, *, descending: bool = False, interval=(-1.0, 1.0), degrees=None,
         eps: float | None = None) -> EncryptedTensor:
    """The values of a 1-D EncryptedTensor (n a power of two, one ciphertext) sorted ascending
    (descending=True: descending) by a bitonic network of composite-sign comparisons
    (fhetorch/circuits/sort.py; docs/circuits.md, "Sorting"). Values must lie in `interval`;
    degrees and eps choose the composite sign (default: the preset's, >= 12 bits at 2^14 values in the
    plaintext simulation; circuits.sort.SORT_SIGN). Keys: the
    default +-2^i rotations and ctx.keygen(bootstrap=True) when the levels run out.

    Raises ContextError for anything but an EncryptedTensor, ShapeError for a tensor that is not
    1-D, whose length is not a power of two or that spans several ciphertexts, EncodingError for
    a complex tensor, ApproximationError for bad degrees, eps or interval, MissingKeyError
    without the rotation or bootstrapping keys, LevelError when the levels run out on a preset
    without bootstrapping."""
    if not isinstance(x, EncryptedTensor):
        raise ContextError(f"sort: expected an EncryptedTensor, got {type(x).__name__} (torch.sort sorts tensors)")
    return sort_values(x, descending=descending, interval=interval, degrees=degrees, eps=eps)


def _context(ctx, what: str):
    if ctx is None:
        raise ContextError(f"{what}: a Ciphertext needs its context: {what}(ct, ..., ctx=ctx); an EncryptedTensor "
                           "carries its own")
    return ctx


__all__ = ["ChebyshevFunction", "Composite", "EncryptedPowerBasis", "HEFunction", "bootstrap", "bootstrap_pair",
           "chebyshev", "from_coefficients", "lut", "power_basis", "relu", "sign", "sigmoid", "sort"]
