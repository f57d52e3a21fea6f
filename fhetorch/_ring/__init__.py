"""RNS ring on tensors: primes, NTT tables, limb-subset bases, samplers."""
from .primes import is_prime, largest_ntt_primes, ntt_primes, primitive_root_2n
from .ring import Basis, Ring, bit_reverse_indices, mont
from .sampler import Sampler


class RingTables:
    """Flat tables of a prime list (for kernel tests): .mod, .psi, .psi_inv, .n_inv_mont, .n_inv, .r2."""

    def __init__(self, log_n, primes, device="cpu"):
        self.ring = Ring(log_n, primes, device)
        b = self.ring.basis()
        self.primes = b.primes
        self.mod, self.psi, self.psi_inv = b.mod, b.psi, b.psi_inv
        self.n_inv_mont, self.n_inv, self.r2 = b.n_inv_mont, b.n_inv, b.r2


__all__ = ["Basis", "Ring", "RingTables", "Sampler", "bit_reverse_indices", "is_prime", "largest_ntt_primes",
           "mont", "ntt_primes", "primitive_root_2n"]
