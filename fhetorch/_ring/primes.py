"""NTT-friendly primes below 2^31 and the number theory their tables need."""
from __future__ import annotations

from ..errors import ParameterError


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin, exact for n < 3.3e24 (bases are the first 12 primes)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def ntt_prime_candidates(log_n: int, bits: float, exclude=()):
    """Primes q = 1 mod 2N below 2^31, ordered by distance from 2^bits (nearest first)."""
    two_n = 2 << log_n
    target = 2.0 ** bits
    k0 = int(target // two_n)
    exclude = set(exclude)
    lo, hi = k0, k0 + 1
    while lo > 0 or hi * two_n + 1 < 2**31:
        cands = []
        if lo > 0:
            cands.append(lo * two_n + 1)
        if hi * two_n + 1 < 2**31:
            cands.append(hi * two_n + 1)
        cands.sort(key=lambda q: abs(q - target))
        for q in cands:
            if q not in exclude and is_prime(q):
                yield q
        lo -= 1
        hi += 1


def ntt_primes(log_n: int, bits: float, count: int, exclude=()) -> list[int]:
    """`count` distinct NTT-friendly primes nearest to 2^bits (all below 2^31)."""
    out = []
    for q in ntt_prime_candidates(log_n, bits, exclude):
        out.append(q)
        if len(out) == count:
            return out
    raise ParameterError(f"ntt_primes: only {len(out)} NTT-friendly primes below 2^31 for N=2^{log_n} near "
                         f"2^{bits}; ask for fewer primes or other sizes")


def largest_ntt_primes(log_n: int, count: int, exclude=()) -> list[int]:
    """The `count` largest NTT-friendly primes below 2^31 (special primes for key switching)."""
    two_n = 2 << log_n
    out, k = [], (2**31 - 2) // two_n
    exclude = set(exclude)
    while len(out) < count and k > 0:
        q = k * two_n + 1
        if q < 2**31 and q not in exclude and is_prime(q):
            out.append(q)
        k -= 1
    if len(out) < count:
        raise ParameterError(f"ntt_primes: not enough NTT-friendly primes below 2^31 for N=2^{log_n}; ask for fewer")
    return out


def primitive_root_2n(q: int, log_n: int) -> int:
    """The smallest-generator primitive 2N-th root of unity mod q (psi^N = -1)."""
    two_n = 2 << log_n
    assert (q - 1) % two_n == 0
    for g in range(2, q):
        psi = pow(g, (q - 1) // two_n, q)
        if pow(psi, two_n // 2, q) == q - 1:
            return psi
    raise ParameterError(f"primitive_root_2n: no primitive 2N-th root mod {q}; q must be 1 mod 2N")
