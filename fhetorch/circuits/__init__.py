"""Circuits on CKKS Ciphertexts: polynomial evaluation (Chebyshev basis, baby-step giant-step;
fhetorch/circuits/polynomial/), approximations built on it (sigmoid, composite minimax sign,
ReLU), linear transforms (plaintext matrix times encrypted vector), the DFTs and bootstrapping.

Layer: above fhetorch._ckks, below fhetorch.tensor. Circuits take and return Ciphertexts
(with their CKKSContext); the tensor layer wraps them for EncryptedTensors
(fhetorch/tensor/functions.py), and the fhetorch.ckks facade re-exports those wrappers.
"""
from .approximations import composite_sign_series, relu_series, sigmoid_series
from .chebyshev import Chebyshev, fit_least_squares, interpolate, remez_odd
from .linear import LinearTransform
from .polynomial import PolyCost, PowerBasis, composite_cost, cost, evaluate, evaluate_composite, plain_composite

__all__ = ["Chebyshev", "LinearTransform", "PolyCost", "PowerBasis", "composite_cost", "composite_sign_series", "cost",
           "evaluate", "evaluate_composite", "fit_least_squares", "interpolate", "plain_composite", "relu_series",
           "remez_odd", "sigmoid_series"]
