"""fhetorch: fully homomorphic encryption (CKKS) for PyTorch, on NVIDIA GPUs and CPUs.

    import torch, fhetorch as fhe
    ctx = fhe.ckks.Context(preset="toy-n12", device="cpu")
    ctx.keygen()
    ex = ctx.encrypt(torch.rand(1000, dtype=torch.float64))
    print(ctx.decrypt(ex * ex + 0.5 * ex - 1.0))
"""
import torch  # noqa: F401  (fhetorch._C links against torch)

from . import _ops, ckks, ring, rlwe
from .errors import (ContextError, EncodingError, EncryptedValueError, FHEError, InsecureParametersWarning, IntegerArgumentError,
                     LayoutError, LevelError, MissingKeyError, ParameterError, ScaleError, SerializationError, ShapeError)
from .serialization import load, save
from .tensor import Context, EncryptedTensor
from . import nn  # noqa: E402  (above tensor and circuits)

__version__ = "0.1.0"

__all__ = ["Context", "ContextError", "EncodingError", "EncryptedTensor", "EncryptedValueError", "FHEError",
           "InsecureParametersWarning", "IntegerArgumentError", "LayoutError", "LevelError",
           "MissingKeyError", "ParameterError", "ScaleError", "SerializationError", "ShapeError", "ckks",
           "load", "nn", "ring", "rlwe", "save"]
