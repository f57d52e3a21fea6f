"""Encryption of plaintexts: with the secret key on the client, with the public key elsewhere."""
from __future__ import annotations

import torch

from .. import _ops
from ..errors import MissingKeyError
from .._rlwe import small_poly
from .ciphertext import Ciphertext, Plaintext


class Encryptor:
    """Encrypts for a context: under its secret key when it holds one (smaller noise), else
    under its public key; fresh ChaCha20 randomness from the context's sampler each time."""

    def __init__(self, ctx):
        self.ctx = ctx

    def encrypt(self, pt: Plaintext) -> Ciphertext:
        """A Ciphertext of pt at pt's level and scale. Raises MissingKeyError without keys."""
        ctx = self.ctx
        limbs = ctx.params.limbs(pt.level)
        b = ctx.basis(pt.level)
        if ctx.secret_key is not None:
            a = ctx.sampler.uniform(b, 1, ctx.n)[0]
            s = ctx.secret_key.s.narrow(0, limbs.start, len(limbs))
            e = small_poly(ctx.ring, ctx.sampler, limbs)
            c0 = _ops.add(_ops.sub(e, _ops.mul(a, s, b.mod), b.mod), pt.data, b.mod)
            data = torch.stack([c0, a])
        elif ctx.public_key is not None:
            pk = ctx.public_key.data.narrow(1, limbs.start, len(limbs)).contiguous()
            v = small_poly(ctx.ring, ctx.sampler, limbs, kind="ternary")
            e = torch.stack([small_poly(ctx.ring, ctx.sampler, limbs), small_poly(ctx.ring, ctx.sampler, limbs)])
            data = _ops.add(_ops.mul(pk, v, b.mod), e, b.mod)
            data[0] = _ops.add(data[0].contiguous(), pt.data, b.mod)
        else:
            raise MissingKeyError("encrypt: no public key; call ctx.keygen() first")
        return Ciphertext(data, pt.level, pt.scale, pt.slots)
