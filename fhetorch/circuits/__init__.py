"""Circuits on CKKS ciphertexts: polynomial evaluation (Chebyshev basis, baby-step giant-step),
approximations built on it (sigmoid, composite minimax sign, ReLU).

Layer: above fhetorch.ckks, below fhetorch.tensor (EncryptedTensors are handled by duck
typing: anything with .ctx, .ciphertext and ._like(ct)). Public names are re-exported by the
fhetorch.ckks.polynomial facade.
"""
from .approximations import relu, sigmoid, sign
from .chebyshev import Chebyshev, fit_least_squares, interpolate, remez_odd
from .polynomial import (ChebyshevFunction, Composite, HEFunction, PolyCost, PowerBasis, chebyshev, cost, evaluate,
                         from_coefficients, power_basis)

__all__ = ["Chebyshev", "ChebyshevFunction", "Composite", "HEFunction", "PolyCost", "PowerBasis", "chebyshev", "cost",
           "evaluate", "fit_least_squares", "from_coefficients", "interpolate", "power_basis", "relu", "remez_odd",
           "sigmoid", "sign"]
