"""Public facade: polynomial evaluation on CKKS ciphertexts and EncryptedTensors.

`fhetorch.ckks.polynomial.chebyshev(fn, interval, degree)` and the callables (sigmoid, sign,
relu) live in fhetorch/tensor/functions.py; the series, power basis and evaluation on
Ciphertexts in fhetorch/circuits. This module only re-exports them.
"""
from ..circuits.chebyshev import Chebyshev, fit_least_squares, interpolate, remez_odd
from ..circuits.polynomial import PolyCost, PowerBasis, cost, evaluate
from ..tensor.functions import (ChebyshevFunction, Composite, EncryptedPowerBasis, HEFunction, chebyshev,
                                from_coefficients, power_basis, relu, sigmoid, sign)

__all__ = ["Chebyshev", "ChebyshevFunction", "Composite", "EncryptedPowerBasis", "HEFunction", "PolyCost",
           "PowerBasis", "chebyshev", "cost", "evaluate", "fit_least_squares", "from_coefficients", "interpolate",
           "power_basis", "relu", "remez_odd", "sigmoid", "sign"]
