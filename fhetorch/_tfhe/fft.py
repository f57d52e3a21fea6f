"""The float64 FFT of Z_{2^64}[X]/(X^N + 1) (ops tfhe_fft, tfhe_ifft, tfhe_fft_product;
csrc/tfhe_fft.h): its twiddle table, the evaluation point of each slot, and the error model of a
product (docs/tfhe.md, "Ring product on the 2^64 torus by f64 FFT").

A polynomial a of N = 2M coefficients is folded into z_j = a_j + i a_(j+M) and reduced modulo
X^M - i by splitting X^(2m) - w^2 = (X^m - w)(X^m + w) down to degree one: heap node 1 is
X^M - zeta^M (zeta = exp(i pi / N), so zeta^M = i), node h = X^m - zeta^e(h) has children
2h = X^(m/2) - zeta^(e(h)/2) and 2h + 1 = X^(m/2) + zeta^(e(h)/2) = X^(m/2) - zeta^(e(h)/2 + N),
and the butterfly of node h uses zeta^e(2h). Value x is leaf M + x, a(zeta^e(M + x)); the outputs
are stored transposed (fft_value): slot k holds value ((k mod M/8) 8 + k div (M/8)), the order in
which the CUDA rotation's threads read the key (csrc/tfhe_fft.h, tfhe_fft_order).
"""
from __future__ import annotations

import functools
import math

import torch

from ..errors import ParameterError

_U = 2.0 ** -53  # the unit roundoff of float64


def _heap_exponents(log_n: int) -> list[int]:
    """e(h) for the heap nodes h in [1, N) (index 0 unused), in units of zeta = exp(i pi / N)."""
    n = 1 << log_n
    m = n // 2
    e = [0] * n
    e[1] = m
    for h in range(1, m):
        e[2 * h] = e[h] // 2
        e[2 * h + 1] = e[h] // 2 + n
    return e


def _unit_root(e: int, two_n: int) -> complex:
    """exp(2 pi i e / two_n), from cos and sin of an angle in [0, pi/4] and the octant symmetries
    (so symmetric roots are exact negations or swaps of each other)."""
    e %= two_n
    eighth = two_n // 8
    octant, r = divmod(e, eighth)
    if octant % 2 == 0:
        a = 2.0 * math.pi * r / two_n
        c, s = math.cos(a), math.sin(a)
        quarter = octant // 2
    else:  # (octant + 1) pi/4 - a'
        a = 2.0 * math.pi * (eighth - r) / two_n
        c, s = math.sin(a), math.cos(a)  # cos(pi/2 - a'), sin(pi/2 - a')
        quarter = (octant - 1) // 2
    for _ in range(quarter):
        c, s = -s, c
    return complex(c, s)


def fft_exponents(log_n: int) -> list[int]:
    """e_k for the N/2 slots: slot k of tfhe_fft(a) is a(zeta^e_k), zeta = exp(i pi / N) (odd e_k,
    one of each conjugate pair of the 2N-th roots of -1)."""
    e = _heap_exponents(log_n)
    m = 1 << (log_n - 1)
    return [e[m + fft_value(k, log_n)] for k in range(m)]


def fft_value(k: int, log_n: int) -> int:
    """The value (leaf M + value) that slot k of tfhe_fft's output holds: the slots store the M = N/2
    values as the transpose of an 8 x M/8 matrix (csrc/tfhe_fft.h, tfhe_fft_value)."""
    eighth = 1 << (log_n - 4)
    return (k % eighth) * 8 + k // eighth


@functools.lru_cache(maxsize=None)
def _twiddles_cpu(log_n: int) -> torch.Tensor:
    e = _heap_exponents(log_n)
    m = 1 << (log_n - 1)
    two_n = 2 << log_n
    tw = [complex(1.0, 0.0)] + [_unit_root(e[2 * h], two_n) for h in range(1, m)]
    return torch.tensor(tw, dtype=torch.complex128)


def fft_twiddles(log_n: int, device="cpu") -> torch.Tensor:
    """(N/2,) complex128: entry h in [1, N/2) is zeta^e(2h), the twiddle of heap node h (entry 0 is
    not read). Computed once per N on the host; the same table serves both devices. Raises
    ParameterError unless 4 <= log_n <= 16 (the ops' range)."""
    if not 4 <= log_n <= 16:
        raise ParameterError(f"fft_twiddles: log_n must be in [4, 16], got {log_n}")
    return _twiddles_cpu(log_n).to(device)


# ---- the error of tfhe_fft_product (docs/tfhe.md, "Ring product on the 2^64 torus by f64 FFT") --
KAPPA = 0.213        # E[rounding error^2] / E[value^2] of one float64 rounding of a Gaussian value, / u^2
KAPPA_TWIDDLE = 0.125  # E|twiddle error|^2 / u^2 (each part within half an ulp of a value in [-1, 1])
KEY_CONVERSION = 1.0 / 7.0  # E[conversion error^2] / E[k^2] / u^2 for k uniform on the 2^64 torus


def fft_product_rho(log_n: int, rows: int) -> float:
    """The relative error variance of tfhe_fft_product: Var(error of a coefficient) =
    rho * rows * N * E[d^2] * E[k^2] for independent digits d and uniform torus keys k. First
    order: each of the three transforms (the digits', the key's, the inverse) adds
    (1.75 KAPPA + KAPPA_TWIDDLE / 2) u^2 per radix-2 stage (log2(N/2) stages), the key's conversion
    KEY_CONVERSION u^2, the multiply-accumulate KAPPA (rows + 1/2) u^2."""
    stages = log_n - 1
    per_stage = 1.75 * KAPPA + KAPPA_TWIDDLE / 2
    return _U ** 2 * (3 * stages * per_stage + KEY_CONVERSION + KAPPA * (rows + 0.5))


def fft_product_variance(log_n: int, rows: int, digit_variance: float, key_variance: float = 2.0 ** 126 / 3) -> float:
    """Var of the rounding error of one output coefficient of tfhe_fft_product (digits with
    E[d^2] = digit_variance, keys uniform on the torus: E[k^2] = 2^126 / 3), in torus units^2."""
    return fft_product_rho(log_n, rows) * rows * (1 << log_n) * digit_variance * key_variance


def fft_product_error_bound(log_n: int, rows: int, digit_bound: float) -> float:
    """A worst-case bound on |error| of every output coefficient of tfhe_fft_product, for
    |d| <= digit_bound and any int64 keys (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., Thm 24.2, per transform; 2-norm bounds the max): rows N^1.5 digit_bound
    (2^63 (3 eps_F + sqrt(2) gamma_(2 rows)) + 2^9), eps_F = L eta / (1 - L eta) with
    eta = mu + gamma_4 (sqrt(2) + mu), mu = 4u (the twiddles' error), and 2^9 the key's
    conversion error. Far above the typical error (fft_product_variance): a bound, not a model."""
    u = _U
    gamma = lambda k: k * u / (1 - k * u)  # noqa: E731
    mu = 4 * u
    eta = mu + gamma(4) * (math.sqrt(2) + mu)
    stages = log_n - 1
    eps_f = stages * eta / (1 - stages * eta)
    n = 1 << log_n
    return 1.01 * rows * n ** 1.5 * digit_bound * (2.0 ** 63 * (3 * eps_f + math.sqrt(2) * gamma(2 * rows)) + 2.0 ** 9)
