"""Decryption, the client's role: needs the context's secret key."""
from __future__ import annotations

import math

import torch

from .. import _ops
from ..errors import ContextError, ScaleError
from .ciphertext import Ciphertext


def check_ciphertext_scale(ct: Ciphertext, what: str):
    """A ciphertext's scale label is a finite number >= 1, or its values are lost (ScaleError)."""
    s = ct.scale
    if not (math.isfinite(s) and s >= 1):
        raise ScaleError(f"{what}: the ciphertext's scale {s!r} is not a finite number >= 1, so its values are lost "
                         "(rounded away, or the scale label was altered); encrypt the values again")


class Decryptor:
    """Decrypts a context's ciphertexts with its secret key."""

    def __init__(self, ctx):
        self.ctx = ctx

    def decrypt(self, ct: Ciphertext) -> torch.Tensor:
        """Complex128 (slots,) values of a ciphertext. Raises ContextError on a context without
        the secret key, ScaleError for a ciphertext whose scale label is not >= 1."""
        ctx = self.ctx
        if ctx.secret_key is None:
            raise ContextError("decrypt: this context has no secret key (a public/server context); "
                               "decrypt on the client")
        check_ciphertext_scale(ct, "decrypt")
        limbs = ctx.params.limbs(ct.level)
        b = ctx.basis(ct.level)
        s = ctx.secret_key.s.narrow(0, limbs.start, len(limbs)).contiguous()
        m = ct.data[ct.size - 1]
        for i in range(ct.size - 2, -1, -1):  # Horner: c0 + s (c1 + s c2)
            m = _ops.add(ct.data[i], _ops.mul(m, s, b.mod), b.mod)
        coeffs = ctx.ring.to_float(m, b, ct.scale)
        return ctx.encoder.unembed(coeffs, ct.slots)
