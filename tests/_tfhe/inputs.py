"""Random inputs of the TFHE kernel tests (torch.Generator-seeded), in kernel formats."""
from __future__ import annotations

import torch

from fhetorch._tfhe.params import tfhe_primes
from fhetorch._tfhe.ring import TFHERing

MODULI = tfhe_primes()
Q = MODULI[0] * MODULI[1]


def rand_mod_q(gen: torch.Generator, *shape) -> torch.Tensor:
    """Uniform-ish int64 in [0, q) (two 31-bit halves)."""
    hi = torch.randint(0, 1 << 31, shape, generator=gen, dtype=torch.int64)
    lo = torch.randint(0, 1 << 31, shape, generator=gen, dtype=torch.int64)
    return ((hi << 31) + lo) % Q


def ggsw_kernel_form(ring: TFHERing, ggsw: torch.Tensor) -> torch.Tensor:
    """Coefficient-form GGSW (..., k1, level, k1, N) int64 mod q -> the kernels' (..., 2, N) NTT Montgomery."""
    return ring.to_montgomery(ring.to_ntt(ggsw)).contiguous()


def ksk_kernel_form(ksk: torch.Tensor) -> torch.Tensor:
    """(n_in, level, n_out + 1) int64 mod q -> (n_in, level, 2, n_out + 1) int32 residues."""
    return torch.stack((ksk % MODULI[0], ksk % MODULI[1]), -2).to(torch.int32).contiguous()
