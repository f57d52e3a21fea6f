"""Evaluation of one Chebyshev series sum_i c_i T_i(y) on a Ciphertext (or its PowerBasis).

The series is divided by giant steps (p = q T_(2^k) + r, 2^k the largest power of two <= deg p,
Chebyshev division) down to leaves of degree < 2^l, which are linear combinations of the baby
steps T_1 .. T_(2^l - 1) with scalar coefficients (one rescale per leaf). A leaf that would need
one level more than its budget is divided further instead (the "lead" case of Bossuat et al.
2021 and Lattigo), so a degree-d series costs exactly ceil(log2(d + 1)) levels below y. The
baby-step size 2^l minimises the ciphertext-ciphertext multiplications, found by running the
evaluation on the level simulator for each l (ties: fewer rescales).

Costs (depth, multiplications) come from the same code run on the simulator, so `cost()` is
exact, and `evaluate` raises LevelError before doing any work when the input has too few levels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ApproximationError, LevelError
from ..chebyshev import Chebyshev
from .ops import ceil_log2, is_free_constant
from .power_basis import PowerBasis


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


@dataclass(frozen=True)
class _Leaf:
    """A leaf sum_(i < baby) c_i T_i not evaluated yet: the caller picks the level it is wanted at
    (one modulus switch takes it there from its terms' level, instead of a rescale and a drop)."""

    c: np.ndarray
    level: int  # where it lands on its own: its terms' level, or one below with real coefficients


def _leaf(basis: PowerBasis, c: np.ndarray, out_min: int):
    """_Leaf of sum c_i T_i (deg < baby), or None when it would land below out_min."""
    d = c.size - 1
    lv = basis.level(d)
    level = lv - (0 if all(is_free_constant(c[i]) for i in range(1, d + 1) if c[i] != 0) else 1)
    return _Leaf(c, level) if level >= out_min else None


def _value(basis: PowerBasis, v, level: int | None = None):
    """v (a _Leaf or a ciphertext) at `level` (default: where it lands on its own)."""
    if isinstance(v, _Leaf):
        c = v.c
        d = c.size - 1
        lv = basis.level(d)
        terms = [(float(c[i]), basis.T(i, lv)) for i in range(1, d + 1) if c[i] != 0]
        return basis.ops.lincomb(terms, float(c[0]), level)
    return v if level is None else basis.ops.drop(v, level)


def _level(ops, v) -> int:
    return v.level if isinstance(v, _Leaf) else ops.level(v)


def _recurse(basis: PowerBasis, c: np.ndarray, out_min: int, baby: int):
    """Value of sum c_i T_i at a level >= out_min: a ciphertext, a _Leaf, or a float when the
    series is a constant.

    The remainders of successive divisions form a spine p = q_1 T_(n_1) + q_2 T_(n_2) + ... + leaf,
    whose products all land at out_min: they are summed as tensor products and relinearised once
    (ops.mul_sum, lazy relinearisation), one key switch per spine instead of one per product.
    Leaves are evaluated at the level they are used at (one modulus switch each)."""
    ops = basis.ops
    pairs, terms, leaf, const = [], [], None, 0.0  # products (q_k, n_k); other values; the leaf; constant
    while True:
        d = c.size - 1
        if d == 0:
            const = float(c[0])
            break
        if d < baby:  # a leaf, if it fits the level budget (T_i are nominal)
            leaf = _leaf(basis, c, out_min)
            if leaf is not None:
                break
        n = 1 << (d.bit_length() - 1)  # largest power of two <= d
        q, c = _divide(c, n)
        qv = _recurse(basis, q, out_min + 1, baby)
        if isinstance(qv, float):
            terms.append(ops.lincomb([(qv, basis.T(n))], 0.0))
        else:
            pairs.append((qv, n))
    if pairs:  # every operand at the spine's lowest product level
        lv = min(min(_level(ops, qv), basis.level(n)) for qv, n in pairs)
        products = [(_value(basis, qv, lv), basis.T(n, lv)) for qv, n in pairs]
        if leaf is not None and not terms and leaf.level >= lv - 1:
            # the leaf, made at the products' level, is added by their key switch's last pass
            return ops.add_const(ops.mul_sum(products, _value(basis, leaf, lv - 1)), const)
        terms.insert(0, ops.mul_sum(products))
    if leaf is not None:
        if not terms:
            return leaf
        terms.append(_value(basis, leaf, min(leaf.level, min(ops.level(t) for t in terms))))
    if not terms:
        return const
    v = terms[0]
    for t in terms[1:]:
        v = ops.add(v, t)
    return ops.add_const(v, const)


def _run(basis: PowerBasis, series: Chebyshev, baby: int):
    """The value of `series` on `basis` (a constant series becomes x * 0 + c, no level)."""
    c = np.asarray(series.coeffs, dtype=np.float64)
    out_min = basis.level(1) - ceil_log2(c.size)
    v = _recurse(basis, c, out_min, baby)
    if isinstance(v, _Leaf):
        v = _value(basis, v)
    if isinstance(v, float):
        v = basis.ops.lincomb([(0, basis.T(1))], v)
    return v


def _simulate(basis: PowerBasis, series: Chebyshev, baby: int):
    """(PolyCost, simulator) of evaluating `series` on `basis` with baby-step size `baby`."""
    sim = basis.simulated()
    start = sim.ops.level(sim.x)
    y_level = sim.level(1)
    out = sim.ops.level(_run(sim, series, baby))
    basis_mults = len({i for i in sim.computed() if i > 1} - basis.computed())  # one product per new T_i
    return PolyCost(depth=start - out, poly_depth=y_level - out, affine_depth=start - y_level, mults=sim.ops.mults,
                    basis_mults=basis_mults, rescales=sim.ops.rescales, drops=sim.ops.drops, baby=baby), sim.ops


def _cheapest(basis: PowerBasis, series: Chebyshev, baby: int | None = None):
    """(PolyCost, simulator) of the cheapest baby-step size (or of the given one)."""
    if baby is not None:
        if baby < 2 or baby & (baby - 1):
            raise ApproximationError(f"polynomial: baby must be a power of two >= 2, got {baby}")
        return _simulate(basis, series, baby)
    best = None
    for l in range(1, max(1, ceil_log2(series.degree + 1)) + 1):
        c, ops = _simulate(basis, series, 1 << l)
        key = (c.depth, c.mults, c.rescales + c.drops, l)
        if best is None or key < best[0]:
            best = (key, c, ops)
    return best[1], best[2]


def check_interval(series: Chebyshev, basis: PowerBasis):
    """Raises ApproximationError unless `series` is on the interval of `basis`."""
    if tuple(series.interval) != tuple(basis.interval):
        raise ApproximationError(f"polynomial: the series is on {series.interval} but the power basis on "
                                 f"{basis.interval}; use one basis per interval")


def level_error(what: str, cost: PolyCost, level: int) -> LevelError:
    """The LevelError of an input at `level` too low for `cost`."""
    aff = f" + {cost.affine_depth} for the map of the interval onto [-1, 1]" if cost.affine_depth else ""
    return LevelError(f"{what}: needs {cost.depth} level(s) ({cost.poly_depth} for the polynomial{aff}) but the "
                      f"input is at level {level}; encrypt at a higher level, use a preset with more levels, "
                      "or bootstrap first")


def evaluate(ctx, x, series: Chebyshev, *, baby: int | None = None):
    """series(x) for a Ciphertext x (or a PowerBasis of it); returns a Ciphertext.

    Raises LevelError before any work when x has fewer levels than `cost(series, ...)`.depth;
    ApproximationError when x is a PowerBasis of another interval or baby is not a power of two.
    """
    basis = x if isinstance(x, PowerBasis) else PowerBasis(ctx, x, series.interval)
    check_interval(series, basis)
    cost, sim = _cheapest(basis, series, baby)
    if sim.min_level < 0:
        raise level_error(f"polynomial (degree {series.degree} on {list(series.interval)})", cost,
                          basis.ops.level(basis.x))
    return _run(basis, series, cost.baby)


def cost(series: Chebyshev, *, level: int | None = None, basis: PowerBasis | None = None,
         baby: int | None = None) -> PolyCost:
    """Depth and multiplications of evaluating `series` (on a fresh nominal input, or on `basis`).

    Raises ApproximationError when `basis` is of another interval or baby is not a power of two.
    """
    if basis is None:
        return _cheapest(PowerBasis.fresh(series.interval, 1000 if level is None else level), series, baby)[0]
    check_interval(series, basis)
    return _cheapest(basis, series, baby)[0]
