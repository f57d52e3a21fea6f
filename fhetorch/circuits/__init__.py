"""Circuits on CKKS ciphertexts: polynomial evaluation (Chebyshev basis, baby-step giant-step),
approximations built on it (sigmoid, composite minimax sign, ReLU); linear transforms
(plaintext matrix times encrypted vector, fhetorch/circuits/linear.py).

Layer: above fhetorch.ckks, below fhetorch.tensor (EncryptedTensors are handled by duck
typing: anything with .ctx, .ciphertext and ._like(ct)). Public names are re-exported by the
fhetorch.ckks.polynomial facade.
"""
from .approximations import relu, sigmoid, sign
from .linear import LinearTransform
from .chebyshev import Chebyshev, fit_least_squares, interpolate, remez_odd
from .polynomial import (ChebyshevFunction, Composite, HEFunction, PolyCost, PowerBasis, chebyshev, cost, evaluate,
                         from_coefficients, power_basis)

__all__ = ["Chebyshev", "ChebyshevFunction", "LinearTransform", "Composite", "HEFunction", "PolyCost", "PowerBasis", "chebyshev", "cost",
           "evaluate", "fit_least_squares", "from_coefficients", "interpolate", "power_basis", "relu", "remez_odd",
           "sigmoid", "sign"]
