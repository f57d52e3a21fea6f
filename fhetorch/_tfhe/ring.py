"""The GLWE ring of a TFHE parameter set: NTT tables of (q0, q1) at N, from fhetorch._ring."""
from __future__ import annotations

import torch

from .. import _ops
from .._ring import Ring
from .modular import Modulus


class TFHERing:
    """Z_q[X]/(X^N + 1), q = q0 * q1. psi, psi_inv (2, N), post (2,) as the tfhe_* ops take
    them; mod (2, 2) and r2 (2,) for the CKKS element-wise ops used by key generation."""

    def __init__(self, log_n: int, moduli, device="cpu"):
        self.ring = Ring(log_n, moduli, device)
        self.modulus = Modulus(moduli)
        self.moduli = self.modulus.moduli
        self.log_n, self.n = self.ring.log_n, self.ring.n
        self.mod, self.psi, self.psi_inv = self.ring.mod, self.ring.psi, self.ring.psi_inv
        self.post, self.r2 = self.ring.n_inv_mont, self.ring.r2
        self.device = self.ring.device

    def to_ntt(self, x: torch.Tensor) -> torch.Tensor:
        """(..., N) integers (any sign, |x| < 2^62) -> (..., 2, N) int32 NTT form, standard form."""
        r = torch.stack((torch.remainder(x, self.moduli[0]), torch.remainder(x, self.moduli[1])), -2)
        return _ops.ntt(r.to(torch.int32).contiguous(), self.mod, self.psi)

    def to_montgomery(self, x: torch.Tensor) -> torch.Tensor:
        """(..., 2, N) residues -> Montgomery form (x * 2^32 mod q_i)."""
        return _ops.mul_const(x.contiguous(), self.r2, self.mod)

    def mul(self, a: torch.Tensor, b_mont: torch.Tensor) -> torch.Tensor:
        """a * b per slot, standard form, for b in Montgomery form (b broadcast over a's leading dims)."""
        return _ops.mul(a.contiguous(), b_mont.contiguous(), self.mod)

    def sum_residues(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        """Sum of (..., 2, N) residues along `dim` (not the last two), reduced per prime, int32."""
        q = torch.tensor(self.moduli, dtype=torch.int64, device=x.device).view(2, 1)
        return (x.to(torch.int64).sum(dim) % q).to(torch.int32)
