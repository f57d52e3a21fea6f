"""Integers mod q = q0 * q1 on int64 tensors, through their residues (CRT).

q < 2^62, so a sum of two values fits int64 but a product does not: products run per prime
(residues below 2^31) and are joined by Garner's formula. Values are in [0, q).
"""
from __future__ import annotations

import torch


class Modulus:
    """q = q0 * q1 and the CRT constant; all functions take and return int64 tensors."""

    def __init__(self, moduli):
        self.moduli = tuple(int(m) for m in moduli)
        self.q0, self.q1 = self.moduli
        self.q = self.q0 * self.q1
        self.q0_inv = pow(self.q0, -1, self.q1)

    def residues(self, x: torch.Tensor) -> torch.Tensor:
        """(...) int64 (any sign) -> (..., 2) residues in [0, q_i)."""
        return torch.stack((torch.remainder(x, self.q0), torch.remainder(x, self.q1)), -1)

    def compose(self, r0: torch.Tensor, r1: torch.Tensor) -> torch.Tensor:
        """Residues r0 mod q0, r1 mod q1 (canonical, int64) -> x in [0, q)."""
        t = torch.remainder(r1 - torch.remainder(r0, self.q1), self.q1) * self.q0_inv % self.q1
        return r0 + self.q0 * t

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Any int64 whose magnitude is below 2^62 -> [0, q)."""
        return torch.remainder(x, self.q)

    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.remainder(a + b, self.q)

    def sub(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.remainder(a - b, self.q)

    def neg(self, a: torch.Tensor) -> torch.Tensor:
        return torch.remainder(-a, self.q)

    def mul_small(self, a: torch.Tensor, c) -> torch.Tensor:
        """a * c mod q for integers |c| < 2^31 (a Python int or an int64 tensor broadcasting with a)."""
        if isinstance(c, int):  # a Python constant stays on the host: no copy to the device
            c0, c1 = c % self.q0, c % self.q1
        else:
            c0 = torch.remainder(torch.as_tensor(c, dtype=torch.int64, device=a.device), self.q0)
            c1 = torch.remainder(torch.as_tensor(c, dtype=torch.int64, device=a.device), self.q1)
        return self.compose(a % self.q0 * c0 % self.q0, a % self.q1 * c1 % self.q1)

    def dot_small(self, a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """sum_i a[..., i] * s[i] mod q for a secret s of small integers (|s| <= 1): per prime, the
        sums stay below n * 2^31 (n < 2^31)."""
        r0 = (a % self.q0 * s).sum(-1) % self.q0
        r1 = (a % self.q1 * s).sum(-1) % self.q1
        return self.compose(r0, r1)

    def constant(self, c: int) -> int:
        return int(c) % self.q
