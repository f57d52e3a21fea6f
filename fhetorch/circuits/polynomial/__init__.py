"""Homomorphic evaluation of Chebyshev series on CKKS Ciphertexts.

The input x (one Ciphertext, slot values in [a, b]) is mapped to y = alpha x + beta in
[-1, 1]; the series sum_i c_i T_i(y) is evaluated by baby-step giant-step over a power basis.

- ops.py: CiphertextOps, the operations an evaluation runs, counting their cost;
- simulator.py: LevelSimulator, the same operations on levels only (planning, exact costs);
- power_basis.py: PowerBasis, T_i(y) computed on demand and shared between polynomials;
- evaluation.py: `evaluate(ctx, x, series)`, `cost(series)`, PolyCost;
- composite.py: chains of series (composite minimax sign, ReLU = x (1 + sign(x)) / 2).

Everything here takes and returns Ciphertexts; the callables that also take torch tensors and
EncryptedTensors (`fhetorch.ckks.polynomial.chebyshev`, sigmoid, sign, relu) live in the tensor
layer (fhetorch/tensor/functions.py).
"""
from .composite import composite_cost, evaluate_composite, plain_composite
from .evaluation import PolyCost, cost, evaluate
from .power_basis import PowerBasis

__all__ = ["PolyCost", "PowerBasis", "composite_cost", "cost", "evaluate", "evaluate_composite", "plain_composite"]
