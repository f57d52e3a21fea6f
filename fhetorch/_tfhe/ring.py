"""The GLWE ring of a TFHE parameter set: NTT tables of (q0, q1) at N, from fhetorch._ring."""
from __future__ import annotations

import torch

from .. import _ops
from .._ring import Ring
from .fft import fft_exponents, fft_roots, fft_twiddles
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
        self._monomial = None  # monomial_tables(), made on first use
        self._twiddles = None  # twiddles, made on first use
        self._fourier_monomial = None  # fourier_monomial_tables(), made on first use

    @property
    def twiddles(self) -> torch.Tensor:
        """(N/2,) complex128 slots, each a twiddle's (s, t) pair: the float64 FFT's twiddles at N
        (fft.fft_twiddles), on the ring's device; made on first use (a host computation: make it
        before a PBS is captured)."""
        if self._twiddles is None:
            self._twiddles = fft_twiddles(self.log_n, self.device)
        return self._twiddles

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

    def monomial_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The NTT of every monomial X^a (a in [0, 2N)), as the multi-bit blind rotation reads it:
        (exponents (2, N), powers (2, 2N)) int32 with NTT(X^a)[l, c] = powers[l, (exponents[l, c] a)
        mod 2N] / 2^32 mod q_l (powers in Montgomery form: w_l^j 2^32 mod q_l for w_l a primitive
        2N-th root mod q_l, the one at slot 0). Derived from the NTT of X (slot c holds the root
        the transform evaluates at, w_l^(exponents[l, c])); computed once. Raises nothing."""
        if self._monomial is None:
            two_n = 2 * self.n
            x = torch.zeros(self.n, dtype=torch.int64, device=self.device)
            x[1] = 1
            roots = self.to_ntt(x).cpu().tolist()  # (2, N) the evaluation points; key generation, not a hot path
            exps, pows = [], []
            for q, row in zip(self.moduli, roots):
                w, power, where = row[0], 1, {}
                table = []
                for j in range(two_n):
                    where[power] = j
                    table.append(power * (1 << 32) % q)
                    power = power * w % q
                exps.append([where[v] for v in row])
                pows.append(table)
            self._monomial = (torch.tensor(exps, dtype=torch.int32, device=self.device),
                              torch.tensor(pows, dtype=torch.int32, device=self.device))
        return self._monomial

    def fourier_monomial_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The FFT of every monomial X^a (a in [0, 2N)), as the Fourier multi-bit blind rotation
        reads it: (exponents (N/2,) int32, roots (2N,) complex128) with tfhe_fft(X^a)[k] =
        roots[(exponents[k] a) mod 2N] (fft.fft_exponents, fft.fft_roots); computed once (a host
        computation: make it before a PBS is captured). Raises nothing."""
        if self._fourier_monomial is None:
            exps = torch.tensor(fft_exponents(self.log_n), dtype=torch.int32, device=self.device)
            self._fourier_monomial = (exps, fft_roots(self.log_n, self.device))
        return self._fourier_monomial
