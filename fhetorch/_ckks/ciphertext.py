"""CKKS ciphertexts: residue tensors plus the level, scale and slot count they carry."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class Ciphertext:
    """(..., k, L, N) int32 NTT-domain residues (k = 2, or 3 before relinearisation) at `level`,
    encrypting slot values times `scale` in a `slots`-slot (sparse when < N/2) packing.

    Leading dimensions batch: a (B, 2, L, N) Ciphertext is B ciphertexts that share level,
    scale and slot count, and every evaluator operation acts on all of them at once."""

    data: torch.Tensor
    level: int
    scale: float
    slots: int

    def replace(self, **kw) -> "Ciphertext":
        return replace(self, **kw)

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def size(self) -> int:
        """Components: 2, or 3 between a tensor product and relinearisation."""
        return self.data.shape[-3]

    @property
    def batch_shape(self) -> torch.Size:
        """The leading (batch) dimensions; () for one ciphertext."""
        return self.data.shape[:-3]

    def component(self, i: int) -> torch.Tensor:
        """Component i, (..., L, N) (a view)."""
        return self.data.select(-3, i)

    def to(self, device) -> "Ciphertext":
        return self.replace(data=self.data.to(device))


@dataclass(frozen=True)
class Plaintext:
    data: torch.Tensor  # (..., L, N) NTT-domain residues
    level: int
    scale: float
    slots: int
