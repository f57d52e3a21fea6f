"""Chebyshev series on an interval [a, b]: interpolation, least-squares fits, plaintext evaluation.

A `Chebyshev` is p(x) = sum_i c_i T_i(y) with y = (2x - (a + b)) / (b - a), the affine map of
[a, b] onto [-1, 1]. Coefficients are float64 numpy arrays. Evaluating one on plaintext
(`series(t)`, Clenshaw's recurrence in float64/complex128) is the reference the encrypted
evaluation (fhetorch/circuits/polynomial/) is tested against.

- `interpolate(fn, interval, degree)`: the interpolant at the degree + 1 Chebyshev nodes of
  the first kind, coefficients by the DCT-II of the samples (exact for polynomials of degree
  <= `degree`; near-minimax for smooth functions).
- `fit_least_squares(fn, interval, degree)`: the least-squares polynomial for the uniform
  weight on [a, b] (Gauss-Legendre quadrature), as HELR fits the sigmoid.
- `remez_odd(degree, lo, hi)`: the minimax odd polynomial approximating sign on
  [-hi, -lo] U [lo, hi] (the building block of composite sign, Lee et al. 2022).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ApproximationError

PARITY_RTOL = 1e-13  # an odd/even function sampled at symmetric nodes: the other parity is roundoff


def _interval(interval) -> tuple:
    a, b = (float(v) for v in interval)
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ApproximationError(f"chebyshev: interval must be finite with a < b, got {interval}")
    return a, b


def nodes(n: int, interval=(-1.0, 1.0)) -> np.ndarray:
    """The n Chebyshev nodes of the first kind on [a, b], x_k = cos(pi (k + 1/2) / n) mapped (decreasing)."""
    a, b = _interval(interval)
    y = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    return 0.5 * (b - a) * y + 0.5 * (a + b)


def _call(fn, x: np.ndarray) -> np.ndarray:
    """fn on float64 points: tried on a torch tensor, then a numpy array, then point by point."""
    for arg in (torch.from_numpy(x.copy()), x):
        try:
            out = fn(arg)
        except Exception:  # noqa: BLE001  (fn may only take scalars)
            continue
        out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        if out.shape == x.shape:
            return out.astype(np.complex128 if np.iscomplexobj(out) else np.float64)
    vals = [fn(float(v)) for v in x]
    if any(isinstance(v, complex) for v in vals):
        return np.array([complex(v) for v in vals])
    return np.array([float(v) for v in vals])


@dataclass(frozen=True, eq=False)
class Chebyshev:
    """p(x) = sum_i coeffs[i] T_i((2x - a - b) / (b - a)), a polynomial on `interval` = (a, b).

    Raises ApproximationError for empty or non-finite coefficients, or an empty interval."""

    coeffs: np.ndarray
    interval: tuple = (-1.0, 1.0)

    def __post_init__(self):
        c = np.atleast_1d(np.asarray(self.coeffs, dtype=np.float64)).copy()
        if c.ndim != 1 or c.size == 0 or not np.isfinite(c).all():
            raise ApproximationError("chebyshev: coefficients must be a non-empty 1-d array of finite reals")
        nz = np.flatnonzero(c)
        c = c[: (nz[-1] + 1 if nz.size else 1)]  # drop exact trailing zeros
        c.setflags(write=False)
        object.__setattr__(self, "coeffs", c)
        object.__setattr__(self, "interval", _interval(self.interval))

    @property
    def degree(self) -> int:
        return self.coeffs.size - 1

    @property
    def parity(self):
        """'odd', 'even' or None (exact zeros in the coefficients of the other parity)."""
        c = self.coeffs
        if not c[0::2].any() and c.size > 1:
            return "odd"
        if not c[1::2].any():
            return "even"
        return None

    def to_unit(self, x):
        """The affine map of [a, b] onto [-1, 1]. Raises nothing."""
        a, b = self.interval
        if (a, b) == (-1.0, 1.0):
            return x
        return (2.0 * x - (a + b)) / (b - a)

    def __call__(self, x):
        """Clenshaw's recurrence on a torch tensor (or number): float64 (complex128 for complex input).

        Raises nothing for numbers and tensors (values outside the interval are extrapolated)."""
        t = torch.as_tensor(x)
        t = t.to(torch.complex128 if t.is_complex() else torch.float64)
        y = self.to_unit(t)
        c = self.coeffs
        b1 = torch.zeros_like(y)
        b2 = torch.zeros_like(y)
        for k in range(c.size - 1, 0, -1):
            b1, b2 = 2.0 * y * b1 - b2 + float(c[k]), b1
        return y * b1 - b2 + float(c[0])

    def scaled(self, factor: float, offset: float = 0.0) -> "Chebyshev":
        """factor * p + offset (exact in the coefficients). Raises ApproximationError for non-finite
        results."""
        c = self.coeffs * float(factor)
        c[0] += float(offset)
        return Chebyshev(c, self.interval)

    def __repr__(self):
        return f"Chebyshev(degree={self.degree}, interval={self.interval})"


def interpolate(fn, interval, degree: int) -> Chebyshev:
    """Interpolant of fn at the degree + 1 Chebyshev nodes of the first kind on `interval`.

    c_j = (2 - [j = 0]) / n * sum_k f(x_k) cos(pi j (k + 1/2) / n), n = degree + 1 (the DCT-II of
    the samples). When [a, b] is symmetric about 0 and the samples are odd (or even) to
    roundoff, the coefficients of the other parity are set to exactly 0 (they are roundoff),
    so the encrypted evaluation skips them.

    Raises ApproximationError for an empty or infinite interval, a negative degree, or fn not
    real and finite at the nodes.
    """
    degree = int(degree)
    if degree < 0:
        raise ApproximationError(f"chebyshev: degree must be >= 0, got {degree}")
    a, b = _interval(interval)
    n = degree + 1
    x = nodes(n, (a, b))
    f = _call(fn, x)
    if np.iscomplexobj(f):
        raise ApproximationError("chebyshev: fn must be real-valued on the interval")
    if not np.isfinite(f).all():
        raise ApproximationError(f"chebyshev: fn is not finite at some node of {interval}")
    j = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    c = (2.0 / n) * (np.cos(np.pi * j * (k + 0.5) / n) @ f)
    c[0] *= 0.5
    if a == -b and n > 1:
        top = max(np.abs(f).max(), np.finfo(float).tiny)
        fr = f[::-1]  # f at -x_k
        if np.abs(f + fr).max() <= PARITY_RTOL * top:
            c[0::2] = 0.0
        elif np.abs(f - fr).max() <= PARITY_RTOL * top:
            c[1::2] = 0.0
    return Chebyshev(c, (a, b))


def _basis_matrix(y: np.ndarray, degree: int) -> np.ndarray:
    """T_0(y) .. T_degree(y) as columns."""
    m = np.empty((y.size, degree + 1))
    m[:, 0] = 1.0
    if degree >= 1:
        m[:, 1] = y
    for i in range(2, degree + 1):
        m[:, i] = 2.0 * y * m[:, i - 1] - m[:, i - 2]
    return m


def fit_least_squares(fn, interval, degree: int, *, parity: str | None = None, points: int = 512,
                      weight=None) -> Chebyshev:
    """argmin_p of integral_a^b weight(x) (fn - p)^2 dx over polynomials of `degree` (Gauss-Legendre
    quadrature with `points` nodes; weight None: 1, else a function of x >= 0, e.g. to favour
    where the inputs mostly are). parity='odd' fits fn(x) - fn(center) with odd T_i plus that
    constant (for odd-symmetric functions such as the sigmoid - 1/2); 'even' only even T_i.

    Raises ApproximationError for an empty interval, another parity, fn or weight not finite."""
    a, b = _interval(interval)
    t, w = np.polynomial.legendre.leggauss(points)
    x = 0.5 * (b - a) * t + 0.5 * (a + b)
    if weight is not None:
        wx = _call(weight, x)
        if not (np.all(np.isfinite(wx)) and np.all(wx >= 0) and np.any(wx > 0)):
            raise ApproximationError("fit_least_squares: weight must be finite, >= 0 and not all 0 on the interval")
        w = w * wx
    f = _call(fn, x)
    m = _basis_matrix(t, degree)
    cols = np.arange(degree + 1)
    if parity == "odd":
        cols = cols[cols % 2 == 1]
        f0 = float(_call(fn, np.array([0.5 * (a + b)]))[0])
        f = f - f0
    elif parity == "even":
        cols = cols[cols % 2 == 0]
    elif parity is not None:
        raise ApproximationError(f"fit_least_squares: parity must be 'odd', 'even' or None, got {parity!r}")
    sw = np.sqrt(w)
    sol, *_ = np.linalg.lstsq(m[:, cols] * sw[:, None], f * sw, rcond=None)
    c = np.zeros(degree + 1)
    c[cols] = sol
    if parity == "odd":
        c[0] = f0
    return Chebyshev(c, (a, b))


def max_error(series: Chebyshev, fn, interval=None, points: int = 20001) -> float:
    """max |series - fn| on a uniform grid of `interval` (default: the series' interval)."""
    a, b = series.interval if interval is None else _interval(interval)
    x = np.linspace(a, b, points)
    return float(np.abs(series(torch.from_numpy(x)).numpy() - _call(fn, x)).max())


# --- minimax (Remez) --------------------------------------------------------------------------
def _alternating_extrema(e: np.ndarray, want: int) -> np.ndarray:
    """Indices of `want` points where e alternates in sign with locally maximal |e| (grid exchange)."""
    n = e.size
    idx = [0]
    for i in range(1, n - 1):
        if (e[i] >= e[i - 1] and e[i] >= e[i + 1]) or (e[i] <= e[i - 1] and e[i] <= e[i + 1]):
            idx.append(i)
    idx.append(n - 1)
    # merge runs of one sign, keeping the largest |e|
    out = []
    for i in idx:
        if out and np.sign(e[out[-1]]) == np.sign(e[i]):
            if abs(e[i]) > abs(e[out[-1]]):
                out[-1] = i
        else:
            out.append(i)
    while len(out) > want:  # drop the smaller end
        if abs(e[out[0]]) < abs(e[out[-1]]):
            out.pop(0)
        else:
            out.pop()
    return np.array(out)


def _single_exchange(ref: np.ndarray, e: np.ndarray, j: int) -> np.ndarray:
    """Put grid point j (the largest |e|) into the reference, keeping the signs of e alternating."""
    ref = list(ref)
    sj = np.sign(e[j])
    k = int(np.searchsorted(ref, j))
    if k == 0:
        if np.sign(e[ref[0]]) == sj:
            ref[0] = j
        else:
            ref = [j] + ref[:-1]
    elif k == len(ref):
        if np.sign(e[ref[-1]]) == sj:
            ref[-1] = j
        else:
            ref = ref[1:] + [j]
    else:
        ref[k - 1 if np.sign(e[ref[k - 1]]) == sj else k] = j
    return np.array(sorted(ref))


def remez_odd(degree: int, lo: float, hi: float = 1.0, *, grid: int = 20000, iterations: int = 100,
              tol: float = 1e-10):
    """Minimax odd polynomial of `degree` (odd) for sign(x) on [-hi, -lo] U [lo, hi].

    Returns (series on [-hi, hi], error): a Chebyshev series with only odd T_i and its minimax
    error max |p - 1| on [lo, hi] (measured on the grid). Discrete Remez exchange (all local
    extrema at once, one point at a time when that fails) on a grid that is Chebyshev-spaced in
    x^2 (an odd p(x) = x q(x^2) approximating 1 is q approximating 1/sqrt(t)) and geometric near lo.

    Raises ApproximationError for an even degree, not 0 < lo < hi, or a grid too coarse.
    """
    degree = int(degree)
    if degree % 2 != 1:
        raise ApproximationError(f"remez_odd: degree must be odd, got {degree}")
    if not 0 < lo < hi:
        raise ApproximationError(f"remez_odd: need 0 < lo < hi, got {lo}, {hi}")
    n = (degree + 1) // 2  # unknown coefficients of T_1, T_3, ..., T_degree

    def cheb_sq(m):  # Chebyshev points of t = x^2 on [lo^2, hi^2], as x
        t = lo * lo + (hi * hi - lo * lo) * 0.5 * (1 - np.cos(np.pi * np.arange(m) / (m - 1)))
        return np.sqrt(t)

    x = np.unique(np.concatenate([cheb_sq(grid // 2), np.geomspace(lo, hi, grid // 2), [lo, hi]]))
    basis = _basis_matrix(x / hi, degree)[:, 1::2]  # (grid, n)
    ref = np.unique(np.searchsorted(x, cheb_sq(n + 1)).clip(0, x.size - 1))
    if ref.size < n + 1:
        raise ApproximationError(f"remez_odd: grid too coarse for degree {degree}")
    signs = (-1.0) ** np.arange(n + 1)
    best = (math.inf, None)
    for _ in range(iterations):
        sol = np.linalg.solve(np.hstack([basis[ref], signs[:, None]]), np.ones(n + 1))
        coef, level = sol[:n], abs(sol[n])
        e = basis @ coef - 1.0
        err = float(np.abs(e).max())
        if err < best[0]:
            best = (err, coef)
        if err - level <= tol * err:
            break
        new = _alternating_extrema(e, n + 1)
        ref = new if new.size == n + 1 else _single_exchange(ref, e, int(np.argmax(np.abs(e))))
    err, coef = best
    c = np.zeros(degree + 1)
    c[1::2] = coef
    return Chebyshev(c, (-hi, hi)), err
