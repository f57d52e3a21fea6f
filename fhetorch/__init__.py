"""fhetorch: fully homomorphic encryption (CKKS) for PyTorch, on NVIDIA GPUs and CPUs.

    import torch, fhetorch as fhe
    ctx = fhe.Context("toy-n12", "cpu")
    ctx.keygen()
    ex = ctx.encrypt(torch.rand(1000, dtype=torch.float64))
    print(ctx.decrypt(ex * ex + 0.5 * ex - 1.0))

The public surface is this facade: `Context`, `EncryptedTensor`, `save`, `load`, the errors,
`fhetorch.ckks` (presets, parameters, bootstrapping, polynomials), `fhetorch.tfhe`,
`fhetorch.distributed` (several GPUs through torch.distributed) and `fhetorch.nn` (the model
compiler, loaded on first use). Everything else (`_ops`, `_ring`, `_rlwe`, `_ckks`,
`circuits`, `tensor`) is implementation (docs/architecture.md).
"""
import importlib

import torch  # noqa: F401  (fhetorch._C links against torch)

from . import ckks, distributed, tfhe
from .errors import (ApproximationError, ContextError, DistributedError, EncodingError, EncryptedValueError, FHEError,
                     InsecureParametersWarning, IntegerArgumentError, InternalError, LayoutError, LevelError,
                     MessageOverflowError, MissingKeyError, ParameterError, ScaleError, SecurityError, SerializationError, ShapeError,
                     SlotError, UnsupportedLayerError, UnsupportedOperationError)
from .tensor import Context, EncryptedTensor
from .tensor.functions import lut
from .serialization import load, save

__version__ = "0.1.0"

__all__ = ["ApproximationError", "Context", "ContextError", "DistributedError", "EncodingError", "EncryptedTensor",
           "EncryptedValueError", "FHEError", "InsecureParametersWarning", "IntegerArgumentError", "InternalError",
           "LayoutError", "LevelError", "MessageOverflowError", "MissingKeyError", "ParameterError", "ScaleError", "SecurityError",
           "SerializationError", "ShapeError", "SlotError", "UnsupportedLayerError", "UnsupportedOperationError",
           "ckks", "distributed", "load", "lut", "nn", "save", "tfhe"]


def __getattr__(name):
    # fhetorch.nn (the compiler: torch.fx tracing, planning) loads when first used, so
    # `import fhetorch` stays light for code that only computes on tensors.
    if name == "nn":
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'fhetorch' has no attribute {name!r}")
