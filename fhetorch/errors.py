"""Errors and warnings of fhetorch: one class per condition, all deriving from FHEError.

Every message starts with the operation and says what to change. Where a builtin exception
is the natural Python reading of a condition, the class derives from it too (ShapeError is a
ValueError, UnsupportedOperationError a NotImplementedError), so generic handlers keep working.

    FHEError
    +-- ParameterError (ValueError)      invalid encryption parameters, unknown preset
    |   +-- SecurityError                parameters below 128-bit security without allow_insecure
    +-- LevelError                       not enough levels left
    +-- ScaleError                       scales that do not match or make no sense
    +-- EncodingError (ValueError)       values that cannot be encoded: NaN/inf, too large, complex
    |   +-- SlotError                    slot counts: too many values, packings that differ
    +-- MissingKeyError                  a key that was not generated
    +-- ContextError                     another context's operands, no secret key, no context
    +-- LayoutError (ValueError)         operands packed in different layouts
    +-- ShapeError (ValueError)          shapes and sizes that do not fit
    +-- ApproximationError (ValueError)  polynomial approximations that cannot be built
    +-- UnsupportedOperationError (NotImplementedError)   no encrypted form
    |   +-- UnsupportedLayerError        a model layer nn.compile cannot run encrypted
    +-- SerializationError               data that cannot be loaded
    +-- IntegerArgumentError (TypeError) a level, count or step that is not an int
    +-- EncryptedValueError (TypeError)  Python asked for the plain value of an encrypted tensor
    +-- InternalError (RuntimeError)     an internal invariant failed: a bug, please report it
    +-- MessageOverflowError (ArithmeticError)  a TFHE result that could leave its message space
    +-- DistributedError                 ranks of a process group that disagree, or no process group
    InsecureParametersWarning (UserWarning)
"""
import os
import sys
import warnings



class FHEError(Exception):
    """Base class of fhetorch's errors."""


class ParameterError(FHEError, ValueError):
    """Invalid encryption parameters: an unknown preset or chain, a ring size, dnum or level count
    out of range, primes that do not exist, parameters that are not bootstrappable."""


class SecurityError(ParameterError):
    """Parameters below 128-bit security (the HE-standard bound on log2 PQ, sparse secrets) asked
    for without allow_insecure=True. A ParameterError: they are invalid unless asked for."""


class LevelError(FHEError):
    """Not enough levels (rescales) left for an operation, or a level out of range."""


class ScaleError(FHEError):
    """Operands' scales that do not match and cannot be matched, or a scale that makes no sense."""


class EncodingError(FHEError, ValueError):
    """Values that cannot be encoded: NaN/inf, too large for the scale, complex where the
    operation packs real values, meta or sparse tensors."""


class SlotError(EncodingError):
    """A slot count that does not fit: more values than a ciphertext's slots, a slot count not a
    power of two, operands or a transform packed for different slot counts."""


class MissingKeyError(FHEError):
    """A key needed by an operation was not generated (a rotation, relinearisation or
    bootstrapping key, or a compiled model before cm.keygen()). Not a builtin KeyError: nothing
    was looked up by the caller."""


class ContextError(FHEError):
    """Operands from different contexts or devices, a secret key where there is none, or a
    ciphertext given without its context."""


class LayoutError(FHEError, ValueError):
    """Operands packed in different slot layouts (e.g. a compiled model's feature-map layout)."""


class ShapeError(FHEError, ValueError):
    """A shape or size that does not fit the operation (an input, a weight, a stride or padding,
    a plaintext that does not broadcast)."""


class ApproximationError(FHEError, ValueError):
    """A polynomial approximation that cannot be built or does not apply: an empty interval, a
    degree that is not available, a function not finite on the interval, a series evaluated on
    another interval's power basis, a value bound below the calibrated values."""


class UnsupportedOperationError(FHEError, NotImplementedError):
    """An operation that has no encrypted form (yet): torch functions, indexing, options."""


class UnsupportedLayerError(UnsupportedOperationError):
    """A model layer that fhetorch.nn.compile cannot run encrypted (the message names the layer
    and what to use instead)."""


class SerializationError(FHEError):
    """Data that cannot be loaded: wrong parameters, truncated or corrupted."""


class IntegerArgumentError(FHEError, TypeError):
    """A level, a number of levels or a rotation step given as a bool, a float or another non-integer."""


class EncryptedValueError(FHEError, TypeError):
    """Python asked for the plain value of an encrypted tensor (bool(ex), if ex:, float(ex)): decrypt it first."""


class MessageOverflowError(FHEError, ArithmeticError):
    """A TFHE (LWE) operation whose result could leave the message space or exceed the noise
    budget before the next programmable bootstrap: apply a LUT (PBS) first, or use a preset with
    carry bits."""


class DistributedError(FHEError):
    """Work spread over a torch.distributed process group that cannot run as asked: no process
    group initialised, ranks that call with different operands, plans or keys, fewer items than
    the work needs per rank."""


class InternalError(FHEError, RuntimeError):
    """An internal invariant failed (the level plan and the execution disagree, a sampler out of
    words): a bug in fhetorch, please report it with the message."""


class InsecureParametersWarning(UserWarning):
    """Parameters below 128-bit security (toy presets, allow_insecure=True)."""


__all__ = ["ApproximationError", "ContextError", "DistributedError", "EncodingError", "EncryptedValueError", "FHEError",
           "InsecureParametersWarning", "IntegerArgumentError", "InternalError", "LayoutError", "LevelError",
           "MessageOverflowError", "MissingKeyError", "ParameterError", "ScaleError", "SecurityError", "SerializationError", "ShapeError",
           "SlotError", "UnsupportedLayerError", "UnsupportedOperationError"]


def warn(message: str, category=None) -> None:
    """warnings.warn attributed to the first caller outside fhetorch: the user's line, whichever
    public function of the package it went through."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category or InsecureParametersWarning, stacklevel=level)
