"""EncryptedTensor and the user-facing context that makes them."""
from .context import Context
from .encrypted_tensor import EncryptedTensor

__all__ = ["Context", "EncryptedTensor"]
