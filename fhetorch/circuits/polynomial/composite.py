"""Chains of Chebyshev series: stages[-1](... stages[0](x)), each stage's input the previous
output, optionally times the input (ReLU = x (1 + sign(x)) / 2 with a composite sign).
The first stage may share a PowerBasis of the input; the chain's cost is the stages' summed,
plus one product with the input.
"""
from __future__ import annotations

import torch

from ..._ckks import evaluator as ev
from ..chebyshev import Chebyshev
from .evaluation import PolyCost, cost, evaluate, level_error
from .power_basis import PowerBasis

INPUT_PRODUCT = PolyCost(depth=1, poly_depth=0, affine_depth=0, mults=1, basis_mults=0, rescales=0, drops=0, baby=0)


def composite_cost(stages: list[Chebyshev], *, times_input: bool = False, basis: PowerBasis | None = None) -> PolyCost:
    """Summed over the series `stages` (the first on `basis` when given), plus the product with x."""
    total = cost(stages[0], basis=basis)
    for s in stages[1:]:
        total = total + cost(s)
    return total + INPUT_PRODUCT if times_input else total


def evaluate_composite(ctx, x, stages: list[Chebyshev], *, times_input: bool = False, name: str | None = None):
    """stages[-1](... stages[0](x)) (times x with times_input) for a Ciphertext x or a PowerBasis of
    it; returns a Ciphertext. Raises LevelError before any work when x has too few levels."""
    basis = x if isinstance(x, PowerBasis) else PowerBasis(ctx, x, stages[0].interval)
    x = basis.x
    need = composite_cost(stages, times_input=times_input, basis=basis)
    if x.level < need.depth:
        raise level_error(name or "composite polynomial", need, x.level)
    y = basis
    for s in stages:
        y = evaluate(ctx, y, s)
    return ev.mul(ctx, x, y) if times_input else y


def plain_composite(x, stages: list[Chebyshev], *, times_input: bool = False) -> torch.Tensor:
    """The same chain on plaintext values, in float64 (complex128 for complex input)."""
    t = torch.as_tensor(x)
    t = t.to(torch.complex128 if t.is_complex() else torch.float64)
    y = t
    for s in stages:
        y = s(y)
    return t * y if times_input else y

