"""Encrypted models: `fhetorch.nn.compile` traces a trained torch model, folds batch norm,
calibrates value ranges, approximates ReLU by polynomials and plans levels and bootstraps
(compiler.py, graph.py, plan.py)."""
from ..errors import UnsupportedLayerError
from .compiler import CompiledModel, RangeReport, compile, relu_approximation
from .plan import Plan

__all__ = ["CompiledModel", "Plan", "RangeReport", "UnsupportedLayerError", "compile", "relu_approximation"]
