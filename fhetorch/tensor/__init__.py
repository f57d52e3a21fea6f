"""EncryptedTensor and the user-facing context that makes them."""
from . import dispatch  # noqa: F401  (fills EncryptedTensor's torch-function table)
from .context import Context
from .encrypted_tensor import EncryptedTensor

__all__ = ["Context", "EncryptedTensor"]
