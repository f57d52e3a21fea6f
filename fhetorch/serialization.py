"""fhetorch.save / fhetorch.load for both schemes, one file format.

The envelope (torch.save'd plain data and int32 tensors, loaded with weights_only=True, a
SHA-256 digest) and the CKKS content are fhetorch/tensor/serialization.py's; the TFHE content
is fhetorch/_tfhe/serialization.py's. This module sits above both (tests/test_layers.py), so
neither scheme imports the other: it sends each object, and each file's kind, to its scheme.

    tctx = fhe.tfhe.Context("tfhe-4bit"); tctx.keygen()
    fhe.save(tctx.public(), "server.pt"); fhe.save(tctx.encrypt(x), "x.pt")
    server = fhe.load("server.pt"); ex = fhe.load("x.pt", server)
"""
from __future__ import annotations

from ._tfhe import serialization as _tfhe_files
from ._tfhe.context import TFHEContext
from .errors import SerializationError
from .tensor import serialization as _ckks_files


def save(obj, f, *, secret_key: bool = False):
    """Write a CKKS Params, Context, EncryptedTensor, PublicKey or SwitchingKey, or a TFHE
    TFHEParams, tfhe.Context or LWETensor to a path or file object. A context is written
    without its secret keys unless secret_key=True.

    Raises SerializationError for anything else (bare ciphertexts and secret keys included),
    secret_key=True on a context without one, or a tfhe.Context before keygen()."""
    if _tfhe_files.is_tfhe(obj):
        meta, tensors = _tfhe_files.encode(obj, secret_key)
        _ckks_files.write_payload(meta, tensors, f)
    else:
        _ckks_files.save(obj, f, secret_key=secret_key)


def load(f, ctx=None, *, device=None):
    """Read what `save` wrote. Ciphertexts and keys need the context they belong to (a
    fhetorch.Context for CKKS, a tfhe.Context for TFHE); a context is rebuilt on `device`
    (default: ctx's device, else CPU).

    Raises SerializationError for unreadable, truncated, corrupted, crafted or foreign data,
    other parameters or keys than ctx's, a ciphertext without its ctx or with the other
    scheme's context."""
    meta, tensors = _ckks_files.read_payload(f)
    kind = meta["kind"]
    if _tfhe_files.is_tfhe_kind(kind):
        return _tfhe_files.decode(meta, tensors, ctx, device)
    if isinstance(ctx, TFHEContext):
        raise SerializationError(f"load: this file holds CKKS content ({kind!r}), which needs a fhetorch.Context, "
                                 "not a tfhe.Context")
    return _ckks_files.decode(meta, tensors, ctx, device)
