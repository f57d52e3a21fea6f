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


# ---- the twiddle table ---------------------------------------------------------------------------
# Every twiddle w = exp(i phi) is stored as the pair (s, t), w = s (1 + i t) (Linzer and Feig): s the
# double nearest cos phi, t the double nearest sin phi / s (so that s t is as close to sin phi as the
# pair allows), t = +-1 exactly where tan phi = +-1. The forward butterfly x +- w y is then
# y' = (1 + i t) y (two fmas) and x +- s y' (four): six roundings where a complex product and the adds
# took eight; the inverse's conj(w) d is s (1 - i t) d (csrc/tfhe_fft.h). The angles are computed in
# fixed point (_CIRCLE_BITS fraction bits), each value then rounded once.
_CIRCLE_BITS = 192
_GUARD_BITS = 40


def _pi_fixed(bits: int) -> int:
    """pi times 2^bits, truncated (Machin: 16 atan(1/5) - 4 atan(1/239)), within a few units."""
    def atan_inv(x: int) -> int:
        total, term, k = 0, (1 << bits) // x, 1
        while term:
            total += term // k if k % 4 == 1 else -(term // k)
            term //= x * x
            k += 2
        return total
    return 16 * atan_inv(5) - 4 * atan_inv(239)


@functools.lru_cache(maxsize=None)
def _first_octant(log_n: int) -> list[tuple[int, int]]:
    """(cos, sin) of pi k / N for k in [0, N/4], as integers times 2^-_CIRCLE_BITS, within about
    2^-180: Taylor series for pi / N, then N/4 complex products with guard bits."""
    bits = _CIRCLE_BITS + _GUARD_BITS
    one = 1 << bits
    x = _pi_fixed(bits) >> log_n
    c = s = 0
    term, k = one, 0
    while term:
        sign = -1 if (k // 2) % 2 else 1
        if k % 2 == 0:
            c += sign * term
        else:
            s += sign * term
        k += 1
        term = term * x // (one * k)
    out, ck, sk = [(one, 0)], one, 0
    for _ in range(1 << (log_n - 2)):
        ck, sk = (ck * c - sk * s) >> bits, (sk * c + ck * s) >> bits
        out.append((ck, sk))
    return [(a >> _GUARD_BITS, b >> _GUARD_BITS) for a, b in out]


def _circle_point(k: int, log_n: int) -> tuple[int, int]:
    """(cos, sin) of pi k / N in fixed point, from the first octant by its symmetries (so that
    symmetric angles give exact negations or swaps)."""
    eighth = 1 << (log_n - 2)
    octant, r = divmod(k % (2 << log_n), eighth)
    table = _first_octant(log_n)
    if octant % 2 == 0:
        c, s = table[r]
    else:  # (octant + 1) pi/4 - a'
        s, c = table[eighth - r]
    for _ in range(octant // 2):
        c, s = -s, c
    return c, s


def _lf_pair(k: int, log_n: int) -> tuple[float, float]:
    """(s, t) of w = exp(i pi k / N) = s (1 + i t) (the table's rule above); cos phi is not 0 at any
    angle the table holds (fft_twiddles)."""
    c, s = _circle_point(k, log_n)
    sd = math.ldexp(float(c), -_CIRCLE_BITS)  # int -> float rounds to nearest (ties to even)
    eighth = 1 << (log_n - 2)  # pi/4 in units of pi / N
    if k % eighth == 0 and (k // eighth) % 2 == 1:  # phi an odd multiple of pi/4: tan phi = +-1 exactly
        t = 1.0 if (s > 0) == (c > 0) else -1.0
    else:
        num, den = sd.as_integer_ratio()
        t = (s * den) / (num << _CIRCLE_BITS)  # int / int: rounded to nearest
    return sd, t


@functools.lru_cache(maxsize=None)
def _twiddles_cpu(log_n: int) -> torch.Tensor:
    e = _heap_exponents(log_n)
    m = 1 << (log_n - 1)
    rows = [(1.0, 0.0)] + [_lf_pair(e[2 * h], log_n) for h in range(1, m)]
    return torch.view_as_complex(torch.tensor(rows, dtype=torch.float64)).contiguous()


def fft_twiddles(log_n: int, device="cpu") -> torch.Tensor:
    """(N/2,) complex128 slots, each a pair of doubles (s, t), not a complex number: slot h in
    [1, N/2) holds the twiddle zeta^e(2h) of heap node h as zeta^e(2h) = s (1 + i t) (s ~ cos, t ~ tan
    of its angle; Linzer and Feig's form, csrc/tfhe_fft.h), slot 0 is not read. The forward and the
    inverse transform both read it, slot 1 and the even slots only: an odd node h >= 3's twiddle is i
    times slot h - 1's (zeta^(N/2) = i), applied exactly (csrc/tfhe_fft.h, tfhe_fft_stages), so the
    odd slots are not read either. Computed once per N on the host; the same table serves both
    devices. Raises ParameterError unless 4 <= log_n <= 16 (the ops' range)."""
    if not 4 <= log_n <= 16:
        raise ParameterError(f"fft_twiddles: log_n must be in [4, 16], got {log_n}")
    return _twiddles_cpu(log_n).to(device)


@functools.lru_cache(maxsize=None)
def _roots_cpu(log_n: int) -> torch.Tensor:
    pts = [_circle_point(j, log_n) for j in range(2 << log_n)]
    rows = [(math.ldexp(float(c), -_CIRCLE_BITS), math.ldexp(float(s), -_CIRCLE_BITS)) for c, s in pts]
    return torch.view_as_complex(torch.tensor(rows, dtype=torch.float64)).contiguous()


def fft_roots(log_n: int, device="cpu") -> torch.Tensor:
    """(2N,) complex128: zeta^j = exp(i pi j / N) for j in [0, 2N), each part the double nearest it
    (from the same fixed-point circle as the twiddles, so symmetric roots are exact negations or
    swaps). Slot k of tfhe_fft(X^a p) is slot k of tfhe_fft(p) times zeta^(e_k a) (fft_exponents):
    the multi-bit blind rotation's monomials. Raises ParameterError unless 4 <= log_n <= 16."""
    if not 4 <= log_n <= 16:
        raise ParameterError(f"fft_roots: log_n must be in [4, 16], got {log_n}")
    return _roots_cpu(log_n).to(device)


# ---- the error of tfhe_fft_product (docs/tfhe.md, "Ring product on the 2^64 torus by f64 FFT") --
KAPPA = 0.213        # E[rounding error^2] / E[value^2] of one float64 rounding of a Gaussian value, / u^2
KAPPA_TWIDDLE = 0.14  # E|w~ - w|^2 / u^2 of the table's twiddles s (1 + i t) (0.13-0.15 at N 2^10-2^13)
FORWARD_STAGE = 0.38  # the relative error variance / u^2 one six-fma forward stage adds: fitted (docs)
KEY_CONVERSION = 1.0 / 7.0  # E[conversion error^2] / E[k^2] / u^2 for k uniform on the 2^64 torus


def fft_product_rho(log_n: int, rows: int) -> float:
    """The relative error variance of tfhe_fft_product: Var(error of a coefficient) =
    rho * rows * N * E[d^2] * E[k^2] for independent digits d and uniform torus keys k. First
    order, in u^2, per radix-2 stage (log2(N/2) stages per transform): each of the two forward
    transforms (the digits', the key's; six-fma butterflies) adds FORWARD_STAGE, fitted to the
    product's error with the inverse's term below (docs/tfhe.md); the inverse (four adds, then
    s (1 - i t) d) adds 1.75 KAPPA + KAPPA_TWIDDLE / 2; plus the key's conversion KEY_CONVERSION and
    the multiply-accumulate KAPPA (rows + 1/2)."""
    stages = log_n - 1
    inverse_stage = 1.75 * KAPPA + KAPPA_TWIDDLE / 2
    return _U ** 2 * (stages * (2 * FORWARD_STAGE + inverse_stage) + KEY_CONVERSION + KAPPA * (rows + 0.5))


def fft_product_variance(log_n: int, rows: int, digit_variance: float, key_variance: float = 2.0 ** 126 / 3) -> float:
    """Var of the rounding error of one output coefficient of tfhe_fft_product (digits with
    E[d^2] = digit_variance, keys uniform on the torus: E[k^2] = 2^126 / 3), in torus units^2."""
    return fft_product_rho(log_n, rows) * rows * (1 << log_n) * digit_variance * key_variance


def fft_bundle_rho(grouping: int) -> float:
    """The relative error variance of a multi-bit key bundle's slot, G_0 + sum_(S >= 1) zeta^(e a_S)
    G_S (csrc/tfhe_fft.h, TfheFourierBundle), against one key's E|G|^2, in units the product's rho
    uses: each of the 2^g - 1 complex fma steps rounds both parts twice at the partial sum's size
    (S + 1 keys after step S: KAPPA each), and each looked-up root errs by KAPPA_TWIDDLE."""
    s = (1 << grouping) - 1
    return _U ** 2 * (KAPPA * s * (s + 3) + KAPPA_TWIDDLE * s)


def fft_product_error_bound(log_n: int, rows: int, digit_bound: float) -> float:
    """A worst-case bound on |error| of every output coefficient of tfhe_fft_product, for
    |d| <= digit_bound and any int64 keys (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., Thm 24.2, per transform; 2-norm bounds the max): rows N^1.5 digit_bound
    (2^63 (3 eps_F + sqrt(2) gamma_(2 rows)) + 2^9), eps_F = L eta / (1 - L eta) with
    eta = mu + gamma_4 (sqrt(2) + mu), mu = 4u (the twiddles' error), and 2^9 the key's
    conversion error. Derived for a butterfly by complex product and adds; the six-fma forward
    butterfly errs by at most about mu + sqrt(5) u per stage and the inverse's s (1 - i t) d by no
    more than the complex product did, so it still bounds them. Far above the typical error
    (fft_product_variance): a bound, not a model."""
    u = _U
    gamma = lambda k: k * u / (1 - k * u)  # noqa: E731
    mu = 4 * u
    eta = mu + gamma(4) * (math.sqrt(2) + mu)
    stages = log_n - 1
    eps_f = stages * eta / (1 - stages * eta)
    n = 1 << log_n
    return 1.01 * rows * n ** 1.5 * digit_bound * (2.0 ** 63 * (3 * eps_f + math.sqrt(2) * gamma(2 * rows)) + 2.0 ** 9)
