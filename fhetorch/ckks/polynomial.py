"""Public facade: polynomial evaluation on CKKS ciphertexts and EncryptedTensors.

`fhetorch.ckks.polynomial.chebyshev(fn, interval, degree)` and the rest live in
fhetorch/circuits/polynomial.py (circuits sits above ckks); this module re-exports them.
"""
from ..circuits.approximations import relu, sigmoid, sign
from ..circuits.chebyshev import Chebyshev, fit_least_squares, interpolate, remez_odd
from ..circuits.polynomial import (ChebyshevFunction, Composite, HEFunction, PolyCost, PowerBasis, chebyshev, cost,
                                   evaluate, from_coefficients, power_basis)

__all__ = ["Chebyshev", "ChebyshevFunction", "Composite", "HEFunction", "PolyCost", "PowerBasis", "chebyshev", "cost",
           "evaluate", "fit_least_squares", "from_coefficients", "interpolate", "power_basis", "relu", "remez_odd",
           "sigmoid", "sign"]
