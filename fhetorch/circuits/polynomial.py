"""Homomorphic evaluation of Chebyshev series on CKKS ciphertexts.

The input x (one Ciphertext, any slot values in [a, b]) is mapped to y = alpha x + beta in
[-1, 1]; the series sum_i c_i T_i(y) is evaluated with

- a power basis T_1 .. T_(2^l) (the baby steps) and the giant steps T_(2^k), computed lazily on
  demand by doubling (T_2k = 2 T_k^2 - 1) and products (T_(m+n) = 2 T_m T_n - T_(m-n)),
  each T_i at depth ceil(log2 i) below y; a `PowerBasis` caches them (at every level they were
  needed at), so several polynomials of one input share them;
- a recursion that divides by giant steps (p = q T_(2^k) + r, 2^k the largest power of two
  <= deg p, Chebyshev division) down to leaves of degree < 2^l, which are linear combinations
  of the baby steps with scalar coefficients (one rescale per leaf). A leaf that would need one
  level more than its budget is divided further instead (the "lead" case of Bossuat et al.
  2021 and Lattigo), so a degree-d series costs exactly ceil(log2(d + 1)) levels below y;
- l chosen to minimise the number of ciphertext-ciphertext multiplications (found by running
  the evaluation on a level-only simulator for each l; ties: fewer rescales).

Levels and scales: every value stays on its level's nominal scale (_ckks/evaluator.py), so
additions never lose a level to scale matching: products of nominal operands are nominal,
integer constants (the 2 in 2 T_m T_n, an integer alpha) multiply without a level, real
constants are folded into one rescale per linear combination, and `drop_level` lands on the
nominal scale. The affine map costs 0 levels when alpha = 2 / (b - a) is an integer and the
input is at its nominal scale (e.g. [-1, 1], [0, 1], [-0.5, 0.5]), else exactly 1 level.

Costs (depth, multiplications) come from the same code run on a simulator (`_SymOps`), so
`cost()` is exact, and evaluation raises LevelError before doing any work when the input has
too few levels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import _ops
from .._ckks import evaluator as ev
from ..errors import LevelError
from .chebyshev import Chebyshev, interpolate

INT_LIMIT = 2**31  # integer constants below this multiply without a level (evaluator.mul_scalar)


def _is_int(c: float) -> bool:
    return float(c).is_integer() and abs(c) < INT_LIMIT


def _ceil_log2(i: int) -> int:
    return (int(i) - 1).bit_length() if i > 0 else 0


# --- the two backends: ciphertexts, and a simulator that tracks only levels -----------------
class _CtOps:
    """Operations on Ciphertexts of one CKKSContext, counting what they cost."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.mults = 0  # ciphertext-ciphertext multiplications (relinearised, rescaled)
        self.rescales = 0  # rescales of scalar linear combinations
        self.drops = 0  # levels dropped to match operands

    @staticmethod
    def level(a) -> int:
        return a.level

    def nominal(self, a) -> bool:
        return ev.same_scale(a.scale, self.ctx.nominal_scale(a.level))

    def multiply(self, a, b):
        self.mults += 1
        self.drops += abs(a.level - b.level)
        return ev.multiply(self.ctx, a, b)

    def add(self, a, b):
        self.drops += abs(a.level - b.level)
        return ev.add(self.ctx, a, b)

    def sub(self, a, b):
        self.drops += abs(a.level - b.level)
        return ev.sub(self.ctx, a, b)

    def add_const(self, a, c: float):
        return a if c == 0 else ev.add_scalar(self.ctx, a, float(c))

    def drop(self, a, level: int):
        if a.level == level:
            return a
        self.drops += a.level - level
        return ev.drop_level(self.ctx, a, a.level - level)

    def lincomb(self, terms, c0: float):
        """sum c_i a_i + c0, all a_i at one level. Integer c_i (nominal a_i): no level; else one rescale."""
        ctx = self.ctx
        level = terms[0][1].level
        assert all(a.level == level for _, a in terms)
        terms = [(c, ev.relinearize(ctx, a)) for c, a in terms]
        b = ctx.basis(level)
        if all(_is_int(c) for c, _ in terms) and all(self.nominal(a) for _, a in terms):
            acc = None
            for c, a in terms:  # one pass per term: acc = a * c + acc
                k = b.scalar(int(c))
                acc = _ops.mul_const(a.data, k, b.mod) if acc is None else _ops.axpby(a.data, k, acc, b.one, b.mod)
            return self.add_const(terms[0][1].replace(data=acc), c0)
        if level < 1:
            raise LevelError("polynomial: a scalar multiplication needs a level but the operand is at level 0")
        # each term's constant at the scale that puts c_i a_i, rescaled, on level-1's nominal scale
        acc, scale = None, None
        for c, a in terms:
            s = ev._target_scale_factor(ctx, a)
            k = b.scalar(ev._round_scaled(c, s, "polynomial"))
            acc = _ops.mul_const(a.data, k, b.mod) if acc is None else _ops.axpby(a.data, k, acc, b.one, b.mod)
            scale = a.scale * s if scale is None else scale
        self.rescales += 1
        out = ev.rescale(ctx, terms[0][1].replace(data=acc, scale=scale))
        return self.add_const(out, c0)


@dataclass
class _Sym:
    level: int
    nominal: bool = True


class _SymOps:
    """The same operations on levels only; levels may go negative (the caller checks)."""

    def __init__(self):
        self.mults = self.rescales = self.drops = 0
        self.min_level = math.inf

    def _new(self, level):
        self.min_level = min(self.min_level, level)
        return _Sym(level)

    @staticmethod
    def level(a) -> int:
        return a.level

    @staticmethod
    def nominal(a) -> bool:
        return a.nominal

    def multiply(self, a, b):
        self.mults += 1
        self.drops += abs(a.level - b.level)
        return self._new(min(a.level, b.level) - 1)

    def add(self, a, b):
        self.drops += abs(a.level - b.level)
        return self._new(min(a.level, b.level))

    sub = add

    @staticmethod
    def add_const(a, c):
        return a

    def drop(self, a, level):
        self.drops += a.level - level
        return self._new(level) if a.level != level else a

    def lincomb(self, terms, c0):
        level = terms[0][1].level
        if all(_is_int(c) for c, _ in terms) and all(a.nominal for _, a in terms):
            return self._new(level)
        self.rescales += 1
        return self._new(level - 1)


# --- the power basis ----------------------------------------------------------------------------
def _affine(interval) -> tuple:
    a, b = (float(v) for v in interval)
    return 2.0 / (b - a), -(a + b) / (b - a)


class PowerBasis:
    """T_i(y) of one input, y = the input mapped from `interval` onto [-1, 1], computed on demand.

        basis = PowerBasis(ctx, ct, interval=(-8, 8))
        p1.evaluate(ctx, basis); p2.evaluate(ctx, basis)  # T_i computed once, shared

    `T(i, level)` returns T_i dropped to `level` (cached too). For an EncryptedTensor input use
    `power_basis(et, interval)`, whose results the polynomials return as EncryptedTensors.
    """

    def __init__(self, ctx, ct, interval=(-1.0, 1.0), *, wrap=None, _ops_backend=None):
        self.ctx = ctx
        self.ops = _ops_backend if _ops_backend is not None else _CtOps(ctx)
        self.interval = tuple(float(v) for v in interval)
        if not self.interval[0] < self.interval[1]:
            raise ValueError(f"PowerBasis: interval must have a < b, got {interval}")
        self.wrap = wrap  # ciphertext -> user object (EncryptedTensor._like), or None
        self.x = ct if _ops_backend is not None else ev.relinearize(ctx, ct)
        self._T: dict = {}  # i -> {level: value}

    # level bookkeeping (no work)
    @property
    def affine_levels(self) -> int:
        """Levels the map of the interval onto [-1, 1] costs: 0 or 1."""
        alpha, _ = _affine(self.interval)
        return 0 if _is_int(alpha) and self.ops.nominal(self.x) else 1

    def level(self, i: int) -> int:
        """Level at which T_i is (or will be) first computed."""
        if i in self._T:
            return max(self._T[i])
        return self.ops.level(self.x) - self.affine_levels - _ceil_log2(i)

    def T(self, i: int, level: int | None = None):
        if i < 1:
            raise ValueError(f"PowerBasis.T: index must be >= 1, got {i}")
        if i not in self._T:
            self._T[i] = {}
            v = self._compute(i)
            self._T[i][self.ops.level(v)] = v
        versions = self._T[i]
        if level is None:
            return versions[max(versions)]
        v = versions.get(level)
        if v is None:
            src = min(lv for lv in versions if lv > level) if any(lv > level for lv in versions) else None
            if src is None:
                raise LevelError(f"PowerBasis.T: T_{i} is at level {max(versions)}, cannot raise it to {level}")
            v = self.ops.drop(versions[src], level)
            versions[level] = v
        return v

    def _compute(self, i: int):
        ops = self.ops
        if i == 1:
            alpha, beta = _affine(self.interval)
            if alpha == 1.0 and beta == 0.0 and ops.nominal(self.x):
                return self.x
            return ops.lincomb([(alpha, self.x)], beta)
        if i & (i - 1) == 0:  # T_2k = 2 T_k^2 - 1
            t = self.T(i // 2)
            return ops.lincomb([(2, ops.multiply(t, t))], -1.0)
        a = 1 << (_ceil_log2(i) - 1)  # T_i = 2 T_a T_b - T_(a-b), a the largest power of two < i
        b = i - a
        ta = self.T(a)
        lv = ops.level(ta)
        prod = ops.multiply(ta, self.T(b, min(lv, self.level(b))))
        twice = ops.lincomb([(2, prod)], 0.0)
        return ops.sub(twice, self.T(a - b, ops.level(twice)))

    def _simulated(self) -> "PowerBasis":
        """A copy on the level simulator, with what this basis has computed so far."""
        sym = _SymOps()
        x = _Sym(self.ops.level(self.x), bool(self.ops.nominal(self.x)))
        c = PowerBasis(self.ctx, x, self.interval, _ops_backend=sym)
        c._T = {i: {lv: _Sym(lv) for lv in v} for i, v in self._T.items()}
        return c


def power_basis(x, interval=(-1.0, 1.0)) -> PowerBasis:
    """The power basis of an EncryptedTensor (anything with .ctx, .ciphertext and ._like(ct))."""
    if not _is_encrypted_tensor(x):
        raise TypeError(f"power_basis: expected an EncryptedTensor, got {type(x).__name__}; "
                        "for a Ciphertext use PowerBasis(ctx, ct, interval)")
    return PowerBasis(x.ctx, x.ciphertext, interval, wrap=x._like)


def _is_encrypted_tensor(x) -> bool:
    return hasattr(x, "ctx") and hasattr(x, "ciphertext") and hasattr(x, "_like")


# --- evaluation of one series ---------------------------------------------------------------------
def _divide(c: np.ndarray, n: int):
    """p = q T_n + r for deg p < 2n (T_i = 2 T_n T_(i-n) - T_(2n-i) for n < i < 2n)."""
    d = c.size - 1
    q = np.zeros(d - n + 1)
    r = c[:n].copy()
    q[0] = c[n]
    for i in range(n + 1, d + 1):
        q[i - n] += 2.0 * c[i]
        r[2 * n - i] -= c[i]
    return _trim(q), _trim(r)


def _trim(c: np.ndarray) -> np.ndarray:
    nz = np.flatnonzero(c)
    return c[: nz[-1] + 1] if nz.size else c[:1]


def _recurse(basis: PowerBasis, c: np.ndarray, out_min: int, baby: int):
    """Value of sum c_i T_i at a level >= out_min, or a float when the series is a constant."""
    ops = basis.ops
    d = c.size - 1
    if d == 0:
        return float(c[0])
    used = [i for i in range(1, d + 1) if c[i] != 0]
    if d < baby:  # a leaf: one linear combination, if it fits the level budget (T_i are nominal)
        lv = basis.level(d)
        if lv - (0 if all(_is_int(c[i]) for i in used) else 1) >= out_min:
            return ops.lincomb([(float(c[i]), basis.T(i, lv)) for i in used], float(c[0]))
    n = 1 << (d.bit_length() - 1)  # largest power of two <= d
    q, r = _divide(c, n)
    qv = _recurse(basis, q, out_min + 1, baby)
    if isinstance(qv, float):
        prod = ops.lincomb([(qv, basis.T(n))], 0.0)
    else:
        lv = min(ops.level(qv), basis.level(n))
        prod = ops.multiply(ops.drop(qv, lv), basis.T(n, lv))
    rv = _recurse(basis, r, out_min, baby)
    if isinstance(rv, float):
        return ops.add_const(prod, rv)
    return ops.add(prod, rv)


@dataclass(frozen=True)
class PolyCost:
    """What evaluating a series costs, from the level simulator.

    depth: levels from the input to the result (poly_depth + affine_depth);
    poly_depth: levels below y (ceil(log2(d + 1)) for a series of degree d with generic coefficients);
    affine_depth: 0 or 1, the map of the interval onto [-1, 1];
    mults: ciphertext-ciphertext multiplications (relinearisation + rescale each), of which
    basis_mults build the power basis; rescales: scalar linear combinations (one rescale each);
    drops: levels dropped to match operands; baby: size of the baby-step basis (2^l).
    """

    depth: int
    poly_depth: int
    affine_depth: int
    mults: int
    basis_mults: int
    rescales: int
    drops: int
    baby: int

    def __add__(self, o: "PolyCost") -> "PolyCost":
        return PolyCost(self.depth + o.depth, self.poly_depth + o.poly_depth, self.affine_depth + o.affine_depth,
                        self.mults + o.mults, self.basis_mults + o.basis_mults, self.rescales + o.rescales,
                        self.drops + o.drops, max(self.baby, o.baby))


def _simulate(basis: PowerBasis, series: Chebyshev, baby: int):
    sim = basis._simulated()
    c = np.asarray(series.coeffs, dtype=np.float64)
    start = sim.ops.level(sim.x)
    y_level = sim.level(1)
    d = c.size - 1
    out_min = y_level - _ceil_log2(d + 1)
    v = _recurse(sim, c, out_min, baby)
    if isinstance(v, float):  # a constant: x * 0 + c, no level
        v = sim.ops.lincomb([(0, sim.T(1))], v)
    basis_mults = sum(1 for i in sim._T if i > 1 and i not in basis._T)  # one multiplication per new T_i
    out = sim.ops.level(v)
    return PolyCost(depth=start - out, poly_depth=y_level - out, affine_depth=start - y_level, mults=sim.ops.mults,
                    basis_mults=basis_mults, rescales=sim.ops.rescales, drops=sim.ops.drops, baby=baby), sim.ops


def _plan(basis: PowerBasis, series: Chebyshev, baby: int | None = None):
    """(PolyCost, simulator) of the cheapest baby-step size (or of the given one)."""
    d = series.degree
    if baby is not None:
        if baby < 2 or baby & (baby - 1):
            raise ValueError(f"polynomial: baby must be a power of two >= 2, got {baby}")
        return _simulate(basis, series, baby)
    best = None
    for l in range(1, max(1, _ceil_log2(d + 1)) + 1):
        c, ops = _simulate(basis, series, 1 << l)
        key = (c.depth, c.mults, c.rescales + c.drops, l)
        if best is None or key < best[0]:
            best = (key, c, ops)
    return best[1], best[2]


def _check_series(series: Chebyshev, basis: PowerBasis):
    if tuple(series.interval) != tuple(basis.interval):
        raise ValueError(f"polynomial: the series is on {series.interval} but the power basis on {basis.interval}; "
                         "use one basis per interval")


def _level_error(what: str, cost: PolyCost, level: int):
    aff = f" + {cost.affine_depth} for the map of the interval onto [-1, 1]" if cost.affine_depth else ""
    return LevelError(f"{what}: needs {cost.depth} level(s) ({cost.poly_depth} for the polynomial{aff}) but the "
                      f"input is at level {level}; encrypt at a higher level, use a preset with more levels, "
                      "or bootstrap first")


def evaluate(ctx, x, series: Chebyshev, *, baby: int | None = None):
    """series(x) for a Ciphertext x (or a PowerBasis of it); returns a Ciphertext.

    Raises LevelError before any work when x has fewer levels than `cost(series, ...)`.depth.
    """
    basis = x if isinstance(x, PowerBasis) else PowerBasis(ctx, x, series.interval)
    _check_series(series, basis)
    cost, sim = _plan(basis, series, baby)
    if sim.min_level < 0:
        raise _level_error(f"polynomial (degree {series.degree} on {list(series.interval)})", cost,
                           basis.ops.level(basis.x))
    c = np.asarray(series.coeffs, dtype=np.float64)
    out_min = basis.level(1) - _ceil_log2(c.size)
    v = _recurse(basis, c, out_min, cost.baby)
    if isinstance(v, float):
        v = basis.ops.lincomb([(0, basis.T(1))], v)
    return v


def cost(series: Chebyshev, *, level: int | None = None, basis: PowerBasis | None = None,
         baby: int | None = None) -> PolyCost:
    """Depth and multiplications of evaluating `series` (on a fresh nominal input, or on `basis`)."""
    if basis is None:
        sim = PowerBasis(None, _Sym(1000 if level is None else level), series.interval, _ops_backend=_SymOps())
        return _plan(sim, series, baby)[0]
    _check_series(series, basis)
    return _plan(basis, series, baby)[0]


# --- the user-facing callables ------------------------------------------------------------------------
class HEFunction:
    """A function evaluated the same way on plaintext and encrypted inputs.

    f(t) for a torch tensor (or number): float64 (complex128) plaintext result of the polynomial
    approximation; f(et) for an EncryptedTensor: an EncryptedTensor; f.evaluate(ctx, ct) for a
    ckks Ciphertext; f(basis) for a PowerBasis (results wrapped like the basis' input).
    """

    def plain(self, x):
        raise NotImplementedError

    def evaluate(self, ctx, x):
        raise NotImplementedError

    def cost(self, level: int | None = None) -> PolyCost:
        raise NotImplementedError

    @property
    def depth(self) -> int:
        """Levels consumed on a nominal-scale input."""
        return self.cost().depth

    def __call__(self, x):
        if isinstance(x, PowerBasis):
            ct = self.evaluate(x.ctx, x)
            return x.wrap(ct) if x.wrap is not None else ct
        if _is_encrypted_tensor(x):
            return x._like(self.evaluate(x.ctx, x.ciphertext))
        if type(x).__name__ == "Ciphertext":
            raise TypeError(f"{type(self).__name__}: for a Ciphertext call .evaluate(ctx, ct)")
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
        return self.series(x)

    def evaluate(self, ctx, x, *, baby: int | None = None):
        return evaluate(ctx, x, self.series, baby=baby)

    def cost(self, level: int | None = None, *, basis: PowerBasis | None = None) -> PolyCost:
        return cost(self.series, level=level, basis=basis)

    def __repr__(self):
        c = self.cost()
        return (f"ChebyshevFunction({self.name + ', ' if self.name else ''}degree={self.degree}, "
                f"interval={self.interval}, depth={c.depth}, mults={c.mults})")


def chebyshev(fn, interval=(-1.0, 1.0), degree: int = 15) -> ChebyshevFunction:
    """The Chebyshev interpolant of fn on `interval` at `degree`, callable on tensors and EncryptedTensors.

        sig = fhetorch.ckks.polynomial.chebyshev(torch.sigmoid, (-8, 8), 15)
        sig(torch.linspace(-8, 8, 5))            # float64 values of the interpolant
        ctx.decrypt(sig(ctx.encrypt(x)))         # the same, encrypted

    Inputs outside the interval are the caller's mistake: the interpolant diverges there and
    the encrypted evaluation cannot detect it.
    """
    return ChebyshevFunction(interpolate(fn, interval, degree), name=getattr(fn, "__name__", None))


def from_coefficients(coeffs, interval=(-1.0, 1.0)) -> ChebyshevFunction:
    """sum_i coeffs[i] T_i(y), y the input mapped from `interval` onto [-1, 1]."""
    return ChebyshevFunction(Chebyshev(np.asarray(coeffs, dtype=np.float64), interval))


@dataclass
class Composite(HEFunction):
    """stages[-1](... stages[0](x)): each stage a ChebyshevFunction whose input is the previous output.

    With `times_input`, the result is x * (scale * composite(x) + offset) (one more level): ReLU =
    x (1 + sign(x)) / 2 is Composite(sign stages, times_input=True, scale=0.5, offset=0.5) - the
    scale and offset are folded into the last stage's coefficients, at no cost."""

    stages: list
    times_input: bool = False
    scale: float = 1.0
    offset: float = 0.0
    name: str | None = None
    _last: ChebyshevFunction = field(init=False, repr=False)

    def __post_init__(self):
        last = self.stages[-1].series.scaled(self.scale, self.offset)
        self._last = ChebyshevFunction(last)

    def _series(self):
        return [s.series for s in self.stages[:-1]] + [self._last.series]

    def plain(self, x):
        t = torch.as_tensor(x)
        t = t.to(torch.complex128 if t.is_complex() else torch.float64)
        y = t
        for s in self._series():
            y = s(y)
        return t * y if self.times_input else y

    def cost(self, level: int | None = None, *, basis: PowerBasis | None = None) -> PolyCost:
        """Summed over the stages (the first on `basis` when given), plus the final product with x."""
        series = self._series()
        total = cost(series[0], basis=basis)
        for s in series[1:]:
            total = total + cost(s)
        if self.times_input:
            total = total + PolyCost(1, 0, 0, 1, 0, 0, 0, 0)
        return total

    def evaluate(self, ctx, x):
        basis = x if isinstance(x, PowerBasis) else PowerBasis(ctx, x, self.stages[0].interval)
        x = basis.x
        need = self.cost(basis=basis)
        if x.level < need.depth:
            raise _level_error(self.name or "composite polynomial", need, x.level)
        y = basis
        for s in self._series():
            y = evaluate(ctx, y, s)
        if self.times_input:
            y = ev.multiply(ctx, x, y)
        return y
