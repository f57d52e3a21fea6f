"""Polynomial approximations of common non-polynomial functions, as Chebyshev series (the
callables built on them, `fhetorch.ckks.polynomial.sigmoid / sign / relu`, live in
fhetorch/tensor/functions.py).

- `sigmoid_series(degree)`: the least-squares polynomial of degree 3, 5 or 7 on [-8, 8] (uniform
  weight), as in HELR (Han et al. 2019; Kim et al. 2018 give the same fit). Our fit reproduces
  their coefficients: degree 3 is 0.5 + 0.15012 x - 0.0015930 x^3. Max error on [-8, 8]:
  0.114 (degree 3), 0.0614 (5), 0.0322 (7); depth 3, 4, 4 (the map of [-8, 8] onto [-1, 1]
  costs a level).
- `composite_sign_series(degrees, eps)`: composite minimax approximation of sign on [-1, -eps] U [eps, 1]
  (Lee et al. 2022): each stage is the minimax odd polynomial (Remez) of sign on the image of
  the previous stage, normalised so that its output stays in [-1, 1]. Degrees {15, 15, 27}
  with eps = 2^-9 (the "alpha = 13" setting): max |p - sign| = 2^-13.3 on |x| >= 2^-9.
- ReLU: x (1 + sign(x)) / 2 with that composite; max error on [-1, 1]:
  2^-13.08 for {15, 15, 27}, eps = 2^-9. Depth 4 + 4 + 5 + 1 = 14 levels.

Inputs outside the stated interval are the caller's mistake (the encrypted evaluation cannot
see them); scale them into it first.
"""
from __future__ import annotations

import functools

import torch

from ..errors import ApproximationError
from .chebyshev import Chebyshev, fit_least_squares, remez_odd
from .polynomial import plain_composite

SIGMOID_INTERVAL = (-8.0, 8.0)
LEE_DEGREES = (15, 15, 27)  # Lee et al. 2022, alpha = 13
LEE_EPS = 2.0**-9


@functools.lru_cache(maxsize=None)
def sigmoid_series(degree: int = 3) -> Chebyshev:
    """HELR's least-squares sigmoid on [-8, 8], degree 3, 5 or 7.

    Raises ApproximationError for another degree."""
    if degree not in (3, 5, 7):
        raise ApproximationError(f"sigmoid: degree must be 3, 5 or 7 (HELR's least-squares fits), got {degree}; "
                                 "for another degree use chebyshev(torch.sigmoid, (-8, 8), degree)")
    return fit_least_squares(torch.sigmoid, SIGMOID_INTERVAL, degree, parity="odd")


@functools.lru_cache(maxsize=None)
def composite_sign_series(degrees=LEE_DEGREES, eps: float = LEE_EPS):
    """(stages, error): the Chebyshev series of the composite minimax sign and its max error on [eps, 1].

    Raises ApproximationError for even or non-positive degrees, or eps outside (0, 1)."""
    degrees = tuple(int(d) for d in degrees)
    if not degrees or any(d % 2 == 0 or d < 1 for d in degrees):
        raise ApproximationError(f"sign: degrees must be odd and positive, got {degrees}")
    if not 0 < eps < 1:
        raise ApproximationError(f"sign: eps must be in (0, 1), got {eps}")
    lo, stages, err = float(eps), [], None
    grid = torch.linspace(0.0, 1.0, 20001, dtype=torch.float64)
    for k, d in enumerate(degrees):
        p, err = remez_odd(d, lo)
        if k < len(degrees) - 1:  # normalise the output to [-1, 1]; the next stage sees [lo', 1]
            top = max(float(p(grid).abs().max()), 1.0 + err)
            p = p.scaled(1.0 / top)
            lo = (1.0 - err) / top
        stages.append(p)
    return tuple(stages), err


def relu_series(degrees=LEE_DEGREES, eps: float = LEE_EPS) -> tuple:
    """(stages, sign error): ReLU(x) = x * stages[-1](... stages[0](x)), the composite sign's last
    stage scaled to (1 + sign) / 2 (evaluate with times_input=True)."""
    stages, err = composite_sign_series(tuple(degrees), float(eps))
    return stages[:-1] + (stages[-1].scaled(0.5, 0.5),), err


def measured_errors(degrees=LEE_DEGREES, eps: float = LEE_EPS, points: int = 400001) -> dict:
    """Plaintext max errors of sign (on eps <= |x| <= 1) and relu (on [-1, 1]) on a uniform grid."""
    x = torch.linspace(-1.0, 1.0, points, dtype=torch.float64)
    s = plain_composite(x, composite_sign_series(tuple(degrees), float(eps))[0])
    r = plain_composite(x, relu_series(degrees, eps)[0], times_input=True)
    mask = x.abs() >= eps
    return {"sign": float((s - torch.sign(x))[mask].abs().max()), "relu": float((r - torch.relu(x)).abs().max()),
            "sign_max": float(s.abs().max())}


__all__ = ["LEE_DEGREES", "LEE_EPS", "SIGMOID_INTERVAL", "composite_sign_series", "measured_errors", "relu_series",
           "sigmoid_series"]
