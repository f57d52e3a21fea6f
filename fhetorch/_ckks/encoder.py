"""Canonical embedding: slot vectors <-> ring elements (float64 in and out).

Slot j of an N/2-slot vector is the evaluation at zeta^(5^j), zeta = exp(i*pi/N); the
conjugate slots sit at zeta^(-5^j). Evaluating at all odd powers of zeta is one length-N
FFT of (m_i * zeta^i), so encoding and decoding are O(N log N) in torch. A vector of n < N/2
slots (n a power of two) is encoded replicated N/(2n) times: the sparse packing, on which
a rotation by k rotates the n slots cyclically.
"""
from __future__ import annotations

import math

import torch

from ..errors import EncodingError, SlotError

MAX_COEFF = 2.0**62


class Encoder:
    def __init__(self, log_n: int):
        self.log_n = log_n
        self.n = 1 << log_n
        n, two_n = self.n, 2 * self.n
        pos, neg = [], []
        g = 1
        for _ in range(n // 2):
            pos.append((g - 1) // 2)
            neg.append((two_n - g - 1) // 2)
            g = g * 5 % two_n
        self._pos = torch.tensor(pos, dtype=torch.long)
        self._neg = torch.tensor(neg, dtype=torch.long)
        i = torch.arange(n, dtype=torch.float64)
        self._twist = torch.polar(torch.ones(n, dtype=torch.float64), math.pi * i / n)  # zeta^i
        self._cache = {}

    def _tables(self, device):
        t = self._cache.get(device)
        if t is None:
            t = (self._pos.to(device), self._neg.to(device), self._twist.to(device))
            self._cache[device] = t
        return t

    @property
    def tensors(self) -> list:
        """The encoder's tables, on every device used (for memory reports)."""
        return [self._pos, self._neg, self._twist] + [t for ts in self._cache.values() for t in ts]

    def check_slots(self, slots: int):
        if slots < 1 or slots > self.n // 2 or slots & (slots - 1):
            raise SlotError(f"encode: slots must be a power of two in [1, {self.n // 2}], got {slots}")

    def embed(self, values: torch.Tensor, slots: int, scale: float) -> torch.Tensor:
        """Complex or real (slots,) values -> int64 coefficients round(scale * m) (N,); a batch
        (D, slots) -> (D, N) in one pass (one check, one FFT)."""
        self.check_slots(slots)
        v = values.to(torch.complex128)
        v = v.reshape(-1) if v.numel() == slots else v
        if v.dim() > 2 or v.shape[-1] != slots:
            raise SlotError(f"encode: got {v.numel()} values for {slots} slots; pass one value per slot")
        if not bool(torch.isfinite(torch.view_as_real(v)).all()):
            raise EncodingError("encode: values contain NaN or inf; clean the input first")
        pos, neg, twist = self._tables(v.device)
        z = v.repeat(*([1] * (v.dim() - 1)), self.n // 2 // slots)
        ev = torch.zeros(*v.shape[:-1], self.n, dtype=torch.complex128, device=v.device)
        ev[..., pos] = z
        ev[..., neg] = z.conj()
        m = (torch.fft.fft(ev, dim=-1) / self.n * twist.conj()).real * scale
        if not bool((m.abs() < MAX_COEFF).all()):
            top = float(v.abs().max())
            raise EncodingError(f"encode: values up to {top:.3g} at scale 2^{math.log2(scale):.1f} overflow 62-bit "
                                "coefficients; use smaller values or a smaller scale")
        return torch.round(m).to(torch.int64)

    def unembed(self, coeffs: torch.Tensor, slots: int) -> torch.Tensor:
        """float64 coefficients (already divided by the scale) (..., N) -> complex (..., slots)."""
        pos, _, twist = self._tables(coeffs.device)
        ev = torch.fft.ifft(coeffs.to(torch.complex128) * twist, dim=-1) * self.n
        return ev[..., pos[:slots]]
