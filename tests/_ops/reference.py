"""Independent big-integer helpers shared by the kernel tests (built without fhetorch._ring)."""
import torch

R = 1 << 32  # the Montgomery radix


def s32(x: int) -> int:
    """x modulo 2^32 as a signed 32-bit integer."""
    x &= 0xFFFFFFFF
    return x - R if x >= 1 << 31 else x


def mod_table(primes) -> torch.Tensor:
    """(L, 2) [q, q^-1 mod 2^32]: the kernels' `mod` argument."""
    return torch.tensor([[q, s32(pow(q, -1, R))] for q in primes], dtype=torch.int32)


def brev(k: int, bits: int) -> int:
    """k with its `bits` low bits reversed."""
    return int(format(k, f"0{bits}b")[::-1], 2) if bits else 0
