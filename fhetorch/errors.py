"""Errors and warnings of fhetorch. Every message starts with the operation and says what to change."""
import os
import sys
import warnings


class FHEError(Exception):
    """Base class of fhetorch's errors."""


class ParameterError(FHEError, ValueError):
    """Invalid or insecure encryption parameters."""


class LevelError(FHEError):
    """Not enough levels (rescales) left for an operation."""


class ScaleError(FHEError):
    """Operands' scales do not match and cannot be matched automatically."""


class KeyError_(FHEError, KeyError):
    """A key needed by an operation was not generated (e.g. a rotation key)."""

    def __str__(self):  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ContextError(FHEError):
    """Operands from different contexts, or a secret key where there is none."""


class EncodingError(FHEError, ValueError):
    """Values that cannot be encoded: too many, NaN/inf, or too large for the scale."""


class SerializationError(FHEError):
    """Data that cannot be loaded: wrong parameters, truncated or corrupted."""


class LayoutError(FHEError, ValueError):
    """Operands packed in different slot layouts (e.g. a compiled model's feature-map layout)."""


class ShapeError(FHEError, ValueError):
    """A shape or size that does not fit the operation (an input, a weight, a stride or padding,
    a plaintext that does not broadcast)."""


class IntegerArgumentError(FHEError, TypeError):
    """A level, a number of levels or a rotation step given as a bool, a float or another non-integer."""


class EncryptedValueError(FHEError, TypeError):
    """Python asked for the plain value of an encrypted tensor (bool(ex), if ex:, float(ex)): decrypt it first."""


class InsecureParametersWarning(UserWarning):
    """Parameters below 128-bit security (toy presets, allow_insecure=True)."""


MissingKeyError = KeyError_


def warn(message: str, category=None) -> None:
    """warnings.warn attributed to the first caller outside fhetorch: the user's line, whichever
    public function of the package it went through."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category or InsecureParametersWarning, stacklevel=level)
