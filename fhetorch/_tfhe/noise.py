"""The TFHE noise model: the variance of a ciphertext's error after each step, and the failure
probability of a programmable bootstrap (PBS) that follows from it.

Units. Every variance here is RELATIVE to q^2 (the error divided by q, squared: TFHE-rs's torus
convention), unless the function name ends in `_abs` (absolute: integers mod q). A relative
variance v means an error of standard deviation sqrt(v) * q in Z_q.

Conventions the formulas rely on (the core implements them; docs/tfhe.md):
- q = q1 * q2 is odd; values are taken as their centred representatives in (-q/2, q/2).
- Noise: the sum of 4 independent uniform integers in [-W, W] (variance 4 W (W+1) / 3).
- Secrets: binary (E[s^2] = 1/2) or ternary uniform in {-1, 0, 1} (E[s^2] = 2/3).
- Gadget decomposition with base B = 2^beta and l levels (the core's, docs/tfhe.md):
  x = round(a B^l / q) mod B^l in balanced digits d_j in [-B/2, B/2), gadget g_j = round(q / B^j),
  j = 1..l. The error a - sum_j d_j g_j is (a B^l mod q, centred) / B^l - sum_j d_j delta_j with
  delta_j = round(q/B^j) - q/B^j: for a uniform a (q odd, so a B^l mod q runs over all centred
  residues) its variance is (q^2 - 1) / (12 B^2l) + sum_j delta_j^2 (B^2+2)/12, mean zero;
  a digit's second moment is E[d^2] = (B^2 + 2)/12 (uniform on B consecutive values about 0).
- Classical blind rotation: n CMuxes ACC <- ACC + BSK_i [x] (X^{a_i} ACC - ACC); a ternary secret
  s = s+ - s- (two binary secrets) takes 2n, one per bit of (s+_0, s-_0, s+_1, ...) rotating by
  (a_0, -a_0, a_1, ...), at most one of each pair a 1 (docs/tfhe.md, "Ternary secrets").
  Multi-bit (grouping g): n/g steps ACC <- (sum over the 2^g subsets S of X^{a_S} GGSW(f_S)) [x] ACC.
- Modulus switch to 2N: a' = round(2N a / q) per coefficient; multi-bit: per subset sum a_S mod q.
  "centered" (classical only; TFHE-rs's CenteredMeanNoiseReduction): before the switch the body gets
  round(E[s] sum_i t_i) - round(q / 4N), t_i = round(a'_i q / 2N) - a_i the known rounding of each
  mask coefficient (docs/parameters.md, "TFHE", derives it).

The formulas (Chillotti, Gama, Georgieva, Izabachene, "TFHE: fast fully homomorphic encryption over
the torus", J. Cryptology 33, 2020, Lemmas on external product, key switching and bootstrapping;
Bergerat, Boudi, Bourgerie, Chillotti, Ligier, Orfila, Tap, "Parameter optimization and larger
precision for (T)FHE", J. Cryptology 36, 2023, noise formulas of the atomic pattern, which TFHE-rs's
parameter sets are optimised with), restated for an odd modulus q and the gadget above:

  fresh LWE / GLWE          v = 4 W (W+1) / 3 / q^2
  linear combination        v = sum_i w_i^2 v_i
  decomposition (a, B, l)   v_dec = ((q^2 - 1)/(12 B^2l) + sum_j delta_j^2 (B^2+2)/12) / q^2
  external product          v_ep = (k+1) l N (B^2+2)/12 * v_bsk  +  (1 + k N E[s^2]) v_dec   (+ v_in)
  blind rotation            v_br = n v_ep (classical, binary);  2n v_key + n v_dec' (classical, ternary: 2n
                            CMuxes pay the key term, at most n of them the decomposition term
                            v_dec' = (1 + kN E[s^2]) v_dec);
                            (n/g) (2^g (k+1) l N (B^2+2)/12 v_bsk + (1 + kN E[s^2]) v_dec)  (multi-bit);
                            "fft" adds each step's float64 rounding (fourier_product_variance; multi-bit:
                            with the bundle as the key, fft.fft_bundle_rho)
  sample extraction         adds nothing (one coefficient of the GLWE error)
  key switch (kN -> n)      v_ks = kN E[s^2] v_dec(ks) + kN l_ks (B_ks^2+2)/12 * v_lwe
  modulus switch (q -> 2N)  v_ms = (1 + n E[s^2]) (1 - 1/q^2) / (12 (2N)^2)  (classical, standard)
                            v_ms = (1 + n Var(s)) (1 - 1/q^2) / (12 (2N)^2)  (classical, centered)
                            v_ms = (1 + (n/g)(1 - 2^-g)) (1 - 1/q^2) / (12 (2N)^2)  (multi-bit, sums switched)
  decision (KS-PBS)         v = nu^2 v_pbs + v_ks + v_ms
  p_fail                    (erfc((g - o) / sqrt(2 v)) + erfc((g + o) / sqrt(2 v))) / 2,
                            g = 2^-(p+2), p = message + carry bits, o the window offset:
                            1/(4N) for the standard switch, 0 for the centered one

The offset: the test polynomial gives value v the integer coefficients [v box - box/2, v box + box/2),
a window whose centre lies half a step of the 2N torus (1/(4N) of q) below v box, where the
standard switch's (mean-zero) error is centred: one tail is half a step nearer than g, the other half
a step further. The centered switch subtracts that half step from the body, so both tails are at g.

Why g = 2^-(p+2): with one padding bit the plaintext modulus is 2^(p+1); each of the 2^p messages owns
a box of 1/2^(p+1) of the torus (N/2^p coefficients of the test polynomial, centred on the message
after the half-box rotation); the PBS returns the wrong value when the error leaves the box: |e| >
half a box. The Gaussian tail is the model (the decision error is a sum of thousands of independent
terms; TFHE-rs states its p_fail the same way).

Model caveats, stated rather than hidden: error means are taken as zero (exact for the modulus switch
with odd q; the decomposition's tie rule leaves a bias below 1/2 per coefficient, i.e. below 2^-52 of
q after the key products, far below every standard deviation here; the centered switch's own roundings,
at most n/2 + 1 in units of 1 mod q, are 2^-40 of a 2N step); the encoding error of the rounded
delta (at most 2^p/2 absolute) is neglected; the worst message bit (1) is taken in every CMux that
can hold one (every CMux of a binary key; one of each pair of a ternary key's, as s+_i s-_i = 0).
"""
from __future__ import annotations

import math
from fractions import Fraction

from ..errors import ParameterError
from .fft import fft_bundle_rho, fft_product_variance

NOISE_TERMS = 4  # uniform integers summed per noise sample (Irwin-Hall)
MODULUS_SWITCH_TYPES = ("standard", "centered")


# ----------------------------------------------------------------------------- sampler widths


def uniform_sum_variance(width: int, terms: int = NOISE_TERMS) -> Fraction:
    """Exact variance (absolute) of the sum of `terms` independent uniform integers in
    [-width, width]: terms * width * (width + 1) / 3, as a Fraction. Raises ParameterError for a
    negative width."""
    if width < 0:
        raise ParameterError(f"uniform_sum_variance: width must be >= 0, got {width}")
    return Fraction(terms * width * (width + 1), 3)


def noise_width(params_or_std, q: int | None = None, *, which: str = "lwe") -> int:
    """The sampler width W for a relative standard deviation: the smallest W >= 0 whose variance
    4 W (W+1) / 3 is >= (std * q)^2 (rounded up: never less noise than asked, so never less
    security). `noise_width(params)` gives the LWE width (which="glwe": the GLWE one);
    `noise_width(std, q)` a relative std at modulus q. Raises ParameterError for a negative or
    non-finite std, or a std without q."""
    if hasattr(params_or_std, "lwe_noise_std"):
        p = params_or_std
        std = p.lwe_noise_std if which == "lwe" else p.glwe_noise_std
        q = p.q if q is None else q
    else:
        std = params_or_std
        if q is None:
            raise ParameterError("noise_width: give q with a bare standard deviation")
    std = float(std)
    if not math.isfinite(std) or std < 0:
        raise ParameterError(f"noise_width: the noise standard deviation must be finite and >= 0, got {std}")
    if std == 0:
        return 0
    target = (std * q) ** 2  # absolute variance
    # 4 W (W+1) / 3 >= target  <=>  W >= (-1 + sqrt(1 + 3 target)) / 2
    w = max(1, int(math.floor((-1.0 + math.sqrt(1.0 + 3.0 * target)) / 2.0)) - 1)
    while 4 * w * (w + 1) < 3 * target:
        w += 1
    return w


def secret_second_moment(secret_distribution: str) -> float:
    """E[s^2] of a secret coefficient: 1/2 (binary), 2/3 (ternary uniform in {-1, 0, 1})."""
    return {"binary": 0.5, "ternary": 2.0 / 3.0}[secret_distribution]


def _e_s2(params) -> float:
    """E[s^2] of a secret coefficient of the parameters' distribution."""
    return secret_second_moment(getattr(params, "secret_distribution", "binary"))


def blind_rotation_cmuxes(params) -> int:
    """CMuxes of one classical blind rotation: n for a binary secret, 2n for a ternary one (a
    CMux per bit of s+ and of s-, s = s+ - s-); the multi-bit PBS's steps are n / g."""
    if params.grouping_factor > 1:
        return params.lwe_dimension // params.grouping_factor
    return 2 * params.lwe_dimension if getattr(params, "secret_distribution", "binary") == "ternary" \
        else params.lwe_dimension


def secret_mean(secret_distribution: str) -> float:
    """E[s] of a secret coefficient: 1/2 (binary), 0 (ternary, symmetric)."""
    return {"binary": 0.5, "ternary": 0.0}[secret_distribution]


def _is_centered(params) -> bool:
    return getattr(params, "modulus_switch_type", "standard") == "centered"


def _digit_second_moment(base_log: int) -> float:
    b = 1 << base_log
    return (b * b + 2) / 12.0


# ----------------------------------------------------------------------------- step variances


def fresh_lwe_variance(params) -> float:
    """Relative variance of a fresh LWE encryption under the n-dimensional key (and of every
    key-switching-key entry): 4 W (W+1) / 3 / q^2 with W = params.lwe_noise_width."""
    return float(uniform_sum_variance(params.lwe_noise_width) / params.q ** 2)


def fresh_glwe_variance(params) -> float:
    """Relative variance of a fresh GLWE encryption (every bootstrapping-key entry, and a fresh LWE
    encryption under the kN-dimensional extracted key)."""
    return float(uniform_sum_variance(params.glwe_noise_width) / params.q ** 2)


def linear_variance(variances, weights) -> float:
    """Variance of sum_i w_i c_i for independent errors: sum_i w_i^2 v_i (sums, differences,
    multiplication by a small integer; adding a constant adds nothing)."""
    return float(sum(float(w) ** 2 * v for v, w in zip(variances, weights, strict=True)))


def decomposition_error_variance(q: int, base_log: int, level: int) -> float:
    """Relative variance of the gadget-decomposition error a - sum_j d_j g_j for a uniform a in
    Z_q (g_j = round(q / B^j), digits of round(a B^l / q)): ((q^2 - 1) / (12 B^2l)
    + sum_j delta_j^2 (B^2+2)/12) / q^2, delta_j = round(q/B^j) - q/B^j."""
    b = 1 << base_log
    v = (q * q - 1) / (12.0 * float(b) ** (2 * level))
    for j in range(1, level + 1):
        bj = b ** j
        delta = ((2 * q + bj) // (2 * bj)) - q / bj  # round(q / B^j) - q / B^j
        v += delta * delta * _digit_second_moment(base_log)
    return v / float(q) ** 2


def keyswitch_variance(params) -> float:
    """Variance the LWE key switch (kN -> n) adds: kN E[s^2] v_dec + kN l (B^2+2)/12 v_lwe."""
    kn = params.glwe_dimension * params.polynomial_size
    v_dec = decomposition_error_variance(params.q, params.ks_base_log, params.ks_level)
    v_key = kn * params.ks_level * _digit_second_moment(params.ks_base_log) * fresh_lwe_variance(params)
    return kn * _e_s2(params) * v_dec + v_key


def modulus_switch_variance(params) -> float:
    """Variance (relative, i.e. in units of the 2N torus) the switch from q to 2N adds:
    (1 + n E[s^2]) (1 - 1/q^2) / (12 (2N)^2): n + 1 rounding errors, each uniform on the centred
    residues (q odd, 2N a mod q runs over all of them for a uniform a), the body's with weight 1.
    Centered switch (params.modulus_switch_type == "centered"): the known part E[s] sum_i e_i of
    the mask's term sum_i s_i e_i is removed through the body, leaving sum_i (s_i - E[s]) e_i:
    (1 + n Var(s)) (1 - 1/q^2) / (12 (2N)^2), Var(s) = E[s^2] - E[s]^2 (binary: 1/4, not 1/2).
    Multi-bit (grouping g): each group's 2^g - 1 subset sums a_S = sum_{i in S} a_i are switched
    as sums (one rounding each), and the group contributes the rounding error of the one selected
    subset (none when S is empty: probability 2^-g for a uniform binary key):
    (1 + (n/g)(1 - 2^-g)) (1 - 1/q^2) / (12 (2N)^2)."""
    n, two_n, g = params.lwe_dimension, 2 * params.polynomial_size, params.grouping_factor
    if g > 1:
        terms = (n // g) * (1.0 - 2.0 ** -g)
    elif _is_centered(params):
        mean = secret_mean(getattr(params, "secret_distribution", "binary"))
        terms = n * (_e_s2(params) - mean * mean)
    else:
        terms = n * _e_s2(params)
    return (1.0 + terms) * (1.0 - 1.0 / params.q ** 2) / (12.0 * two_n ** 2)


TORUS = 1 << 64  # the modulus of the "fft" blind rotation's accumulator


def _is_fourier(params) -> bool:
    return getattr(params, "blind_rotation", "ntt") == "fft"


def bootstrap_key_variance(params) -> float:
    """Relative variance of a bootstrapping-key entry's noise: the GLWE width at q, or for the
    Fourier key (blind_rotation "fft") the width of the same relative std at 2^64."""
    if _is_fourier(params):
        return float(uniform_sum_variance(noise_width(params.glwe_noise_std, TORUS))) / float(TORUS) ** 2
    return fresh_glwe_variance(params)


def _ep_key_term(params) -> float:
    k, big_n = params.glwe_dimension, params.polynomial_size
    return (k + 1) * params.pbs_level * big_n * _digit_second_moment(params.pbs_base_log) * bootstrap_key_variance(params)


def _ep_decomposition_term(params) -> float:
    kn = params.glwe_dimension * params.polynomial_size
    q = TORUS if _is_fourier(params) else params.q
    return (1.0 + kn * _e_s2(params)) * decomposition_error_variance(q, params.pbs_base_log, params.pbs_level)


def fourier_product_variance(params) -> float:
    """Relative variance of the float64 rounding of one CMux's FFT product (blind_rotation "fft";
    0 for "ntt", exact): fhetorch._tfhe.fft.fft_product_variance for (k + 1) level digit rows of
    second moment (B^2 + 2) / 12 against uniform torus keys, / 2^128 (docs/tfhe.md)."""
    if not _is_fourier(params):
        return 0.0
    rows = (params.glwe_dimension + 1) * params.pbs_level
    d2 = _digit_second_moment(params.pbs_base_log)
    g = params.grouping_factor
    if g == 1:
        return fft_product_variance(params.log_n, rows, d2) / float(TORUS) ** 2
    # Multi-bit: the product's key is the bundle, a sum of 2^g keys (2^g times one key's second
    # moment, so every rounding of the product scales with it), plus the bundle's own roundings
    # (fft_bundle_rho, relative to one key).
    key2 = 2.0 ** 126 / 3
    v = fft_product_variance(params.log_n, rows, d2, (1 << g) * key2)
    v += fft_bundle_rho(g) * rows * params.polynomial_size * d2 * key2
    return v / float(TORUS) ** 2


def external_product_variance(params, input_variance: float = 0.0, message_norm2: float = 1.0) -> float:
    """Variance of GGSW(mu) [x] GLWE: (k+1) l N (B^2+2)/12 v_bsk + (1 + kN E[s^2]) v_dec
    + |mu|^2 v_in (mu a bit or a monomial: |mu|^2 = 1; message_norm2 otherwise)."""
    return _ep_key_term(params) + message_norm2 * (_ep_decomposition_term(params) + input_variance)


def cmux_variance(params, input_variance: float = 0.0) -> float:
    """Variance after CMux(b, C0, C1) = C0 + BSK(b) [x] (C1 - C0) with C0, C1 of variance
    input_variance (the blind-rotation case: C1 = X^a C0, the same error rotated): the input's
    variance plus one external product's key and decomposition terms (worst case b = 1)."""
    return input_variance + _ep_key_term(params) + _ep_decomposition_term(params)


def blind_rotation_variance(params, test_polynomial_variance: float = 0.0) -> float:
    """Variance after blind rotation of a trivial (noiseless) test polynomial: classical, one CMux
    per bootstrapping-key bit (blind_rotation_cmuxes: n binary, 2n ternary), each paying the key
    (and Fourier rounding) term, and the decomposition term in the worst case wherever the bit
    may be 1: all n of a binary key, n of a ternary key's 2n (s+_i and s-_i are never both 1);
    or n/g multi-bit steps of 2^g GGSWs each (grouping factor g)."""
    g = params.grouping_factor
    if g == 1:
        n = params.lwe_dimension
        if blind_rotation_cmuxes(params) == n:  # binary: every CMux may pay every term
            step = _ep_key_term(params) + _ep_decomposition_term(params) + fourier_product_variance(params)
            return test_polynomial_variance + n * step
        per_cmux = _ep_key_term(params) + fourier_product_variance(params)
        return test_polynomial_variance + 2 * n * per_cmux + n * _ep_decomposition_term(params)
    steps = params.lwe_dimension // g
    step = (1 << g) * _ep_key_term(params) + _ep_decomposition_term(params) + fourier_product_variance(params)
    return test_polynomial_variance + steps * step


def sample_extraction_variance(glwe_variance: float) -> float:
    """Sample extraction reads one coefficient of the GLWE error: the variance is unchanged."""
    return glwe_variance


def torus_to_q_variance(params) -> float:
    """Relative variance the Fourier blind rotation's return to mod q adds to an extracted LWE
    (0 for "ntt"): each of the k N + 1 coefficients rounded to an integer mod q (uniform error,
    1/12), weighted by the extracted key: (1 + k N E[s^2]) / 12 / q^2."""
    if not _is_fourier(params):
        return 0.0
    kn = params.glwe_dimension * params.polynomial_size
    return (1.0 + kn * _e_s2(params)) / 12.0 / float(params.q) ** 2


def pbs_variance(params) -> float:
    """Variance of a PBS output (under the kN-dimensional extracted key): blind rotation of a
    noiseless test polynomial, then sample extraction (and, for the Fourier rotation, the return
    to mod q). Independent of the input's noise."""
    return sample_extraction_variance(blind_rotation_variance(params)) + torus_to_q_variance(params)


def decision_variance(params, input_variance: float | None = None) -> float:
    """Variance at the modulus-switch output, the one that decides whether the next PBS is right.
    input_variance: the error variance of the ciphertext entering the key switch (under the kN
    key); None: the worst the parameters allow, max_noise_level^2 times a PBS output's (or a
    fresh encryption's under the kN key if larger). Then + key switch + modulus switch."""
    if input_variance is None:
        nu = getattr(params, "max_noise_level", 1)
        input_variance = nu * nu * max(pbs_variance(params), fresh_glwe_variance(params))
    return input_variance + keyswitch_variance(params) + modulus_switch_variance(params)


def half_gap(params) -> float:
    """Half the decision box, relative to q: 2^-(p+2) with p = message + carry bits (one padding bit)."""
    return 2.0 ** -(params.message_bits + params.carry_bits + 2)


def window_offset(params) -> float:
    """Distance (relative to q) between the mean of the modulus-switched phase and the centre of
    its test-polynomial window: 1/(4N), half a 2N step, for the standard switch (the window of
    integers [v box - box/2, v box + box/2) is centred half a step below v box); 0 for the
    centered switch, which subtracts that half step through the body."""
    return 0.0 if _is_centered(params) else 1.0 / (4.0 * params.polynomial_size)


# ----------------------------------------------------------------------------- failure probability


def log2_erfc(x: float) -> float:
    """log2(erfc(x)) for x >= 0, accurate where erfc underflows (the asymptotic series)."""
    if x < 0:
        raise ParameterError(f"log2_erfc: x must be >= 0, got {x}")
    if x < 25.0:
        return math.log2(math.erfc(x))
    # erfc(x) = exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + ...)
    inv = 1.0 / (2.0 * x * x)
    series = 1.0 - inv + 3.0 * inv ** 2 - 15.0 * inv ** 3
    return (-x * x) / math.log(2.0) - math.log2(x * math.sqrt(math.pi)) + math.log2(series)


def log2_p_fail_of_variance(variance: float, gap: float, offset: float = 0.0) -> float:
    """log2 P(e > gap - offset or e < -gap - offset) for a centred Gaussian error e of the given
    variance (same units as gap; offset 0: P(|e| > gap))."""
    if variance <= 0:
        return -math.inf
    s = math.sqrt(2.0 * variance)
    if offset == 0:
        return log2_erfc(gap / s)
    near, far = log2_erfc(max(gap - abs(offset), 0.0) / s), log2_erfc((gap + abs(offset)) / s)
    return near + math.log2(1.0 + 2.0 ** (far - near)) - 1.0


def log2_p_fail(params, input_variance: float | None = None) -> float:
    """log2 of the modelled probability that one PBS (key switch + modulus switch + blind rotation)
    returns a wrong message, for an input of the worst variance the parameters allow (see
    decision_variance), with the window offset of the modulus switch (window_offset)."""
    return log2_p_fail_of_variance(decision_variance(params, input_variance), half_gap(params),
                                   window_offset(params))


def p_fail(params, input_variance: float | None = None) -> float:
    """2 ** log2_p_fail(params): the modelled failure probability of one PBS."""
    return 2.0 ** log2_p_fail(params, input_variance)


def noise_report(params) -> dict:
    """Every modelled variance of the parameters (relative to q^2), their log2 standard deviations,
    and log2 p_fail: a plain dict for docs, tests and debugging."""
    vs = dict(fresh_lwe=fresh_lwe_variance(params), fresh_glwe=fresh_glwe_variance(params),
              keyswitch=keyswitch_variance(params), modulus_switch=modulus_switch_variance(params),
              external_product=external_product_variance(params), pbs=pbs_variance(params),
              decision=decision_variance(params))
    out = {f"var_{k}": v for k, v in vs.items()}
    out.update({f"log2_std_{k}": (0.5 * math.log2(v) if v > 0 else -math.inf) for k, v in vs.items()})
    out["log2_half_gap"] = math.log2(half_gap(params))
    out["log2_p_fail"] = log2_p_fail(params)
    return out
