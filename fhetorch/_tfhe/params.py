"""TFHE parameters: a TFHEParamsLiteral (what a user or a preset chooses) validated into
TFHEParams by make_params, mirroring fhetorch/_ckks/params.py.

The modulus: q = q1 * q2, two NTT primes below 2^31 with q_i = 1 mod 2^17 (every ring size
2^10 .. 2^16 has its NTT), so the CKKS side's 32-bit Montgomery arithmetic, NTT and samplers
serve TFHE too and CPU and CUDA agree bit for bit. Noise is given as a standard deviation
relative to q (TFHE-rs's convention: std / q), so published parameter sets at q = 2^64
translate at the same relative noise (docs/parameters.md, "TFHE", says why security and the
failure probability carry over).

Security: an LWE problem of dimension d with binary (or ternary) secret and relative noise std
sigma is taken as 128-bit secure when log2(sigma) >= max(SLOPE * d + BIAS, 2 - log2 q) and
d >= 450: Zama's 128-bit security curve, fitted to lattice-estimator runs at q = 2^64 (zama-ai/
concrete, concrete-security-curves-rust/src/curves.gen.rs). Both the LWE (n) and the GLWE (kN)
secrets are checked, with the standard deviation the sampler really draws (noise_width rounds up).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields, replace

from .._ring.primes import largest_ntt_primes
from ..errors import InsecureParametersWarning, ParameterError, SecurityError, warn
from . import noise as _noise

# Zama's 128-bit curve (concrete-security-curves, lattice estimator, q = 2^64, binary keys):
# minimal log2(std / q) = SLOPE_128 * dimension + BIAS_128, for dimensions >= MIN_DIMENSION_128.
SLOPE_128 = -0.026405028765226296
BIAS_128 = 2.482642269104389
MIN_DIMENSION_128 = 450
# and never below an absolute std of 4 (2 bits at the bottom of q): log2(std / q) >= 2 - log2 q
ABSOLUTE_STD_FLOOR_LOG2 = 2.0

MIN_LOG_N, MAX_LOG_N = 10, 16  # the primes' 2^17-th roots give every N up to 2^16
PRIME_LOG_2N = 17  # q_i = 1 mod 2^17
SECRET_DISTRIBUTIONS = ("binary", "ternary")
MAX_GROUPING_FACTOR = 4
DEFAULT_LOG2_P_FAIL_MAX = -64.0


def tfhe_primes() -> tuple[int, int]:
    """The two primes of q: the largest below 2^31 with q_i = 1 mod 2^17 (2147352577, 2146959361)."""
    return tuple(largest_ntt_primes(PRIME_LOG_2N - 1, 2))


_PRIMES = None


def _primes() -> tuple[int, int]:
    global _PRIMES
    if _PRIMES is None:
        _PRIMES = tfhe_primes()
    return _PRIMES


@dataclass(frozen=True)
class TFHEParamsLiteral:
    """What a TFHE parameter set chooses; make_params validates it into TFHEParams.

    lwe_dimension    n, the LWE secret's length (the key-switched, bootstrapped side)
    glwe_dimension   k, polynomials in a GLWE secret
    polynomial_size  N, the GLWE ring degree (2^10 .. 2^16)
    lwe_noise_std    noise standard deviation of LWE encryptions and the key-switching key, / q
    glwe_noise_std   noise standard deviation of GLWE encryptions (bootstrapping key), / q
    pbs_base_log     log2 of the bootstrapping gadget base
    pbs_level        digits of the bootstrapping gadget decomposition
    ks_base_log      log2 of the key-switching gadget base
    ks_level         digits of the key-switching decomposition
    message_bits     bits of message per ciphertext (the LUT input space is 2^(message+carry))
    carry_bits       carry bits above the message (0 for plain LUT presets)
    grouping_factor  1: classical PBS (one CMux per key bit); g > 1: multi-bit PBS over
                     groups of g key bits
    name             "custom" by default; presets carry their name
    max_noise_level  1 by default: nu, the largest 2-norm of the integer weights of a linear
                     combination of PBS outputs allowed before the next PBS (TFHE-rs's
                     MaxNoiseLevel); the failure probability is modelled at this worst case
    secret_distribution  "binary" (default) or "ternary" (uniform in {-1, 0, 1}): the LWE and GLWE
                     secrets; a ternary secret's PBS runs 2n CMuxes (docs/tfhe.md, "Ternary
                     secrets"), classical PBS only
    log2_p_fail_max  -64.0 by default: make_params refuses parameters whose modelled log2
                     p_fail is above this (raise it only for failure-rate experiments)
    modulus_switch_type  "standard" (default: round every coefficient) or "centered" (TFHE-rs's
                     CenteredMeanNoiseReduction, classical PBS only: the known mean of the mask's
                     rounding term and half a step are removed through the body before the switch;
                     fhetorch/_tfhe/noise.py, docs/parameters.md)
    blind_rotation   where the blind rotation's accumulator lives: "fft" (the 2^64 torus, each CMux
                     or multi-bit group one float64 FFT product with a Fourier bootstrapping key; the
                     default) or "ntt" (mod q = q0 q1 by two NTTs); None picks the default. The LWE
                     side is mod q either way.
    """

    lwe_dimension: int
    glwe_dimension: int
    polynomial_size: int
    lwe_noise_std: float
    glwe_noise_std: float
    pbs_base_log: int
    pbs_level: int
    ks_base_log: int
    ks_level: int
    message_bits: int
    carry_bits: int = 0
    grouping_factor: int = 1
    name: str = "custom"
    max_noise_level: int = 1
    secret_distribution: str = "binary"
    log2_p_fail_max: float = DEFAULT_LOG2_P_FAIL_MAX
    modulus_switch_type: str = "standard"
    blind_rotation: str | None = None


BLIND_ROTATIONS = ("fft", "ntt")
_LITERAL_FIELDS = tuple(f.name for f in fields(TFHEParamsLiteral))


@dataclass(frozen=True)
class TFHEParams:
    """Validated, immutable TFHE parameters (made by make_params from a TFHEParamsLiteral).

    Besides the literal's fields: primes (q1, q2; also as `moduli`) and q = q1 * q2;
    delta = floor(q / 2^(bits+1)),
    the scaling of a message with one padding bit; lwe_noise_width / glwe_noise_width, the
    sampler's W (4 uniform integers in [-W, W]); security_bits (128, or 0 when not shown secure);
    log2_p_fail, the noise model's failure probability of one PBS (fhetorch/_tfhe/noise.py).
    """

    lwe_dimension: int
    glwe_dimension: int
    polynomial_size: int
    lwe_noise_std: float
    glwe_noise_std: float
    pbs_base_log: int
    pbs_level: int
    ks_base_log: int
    ks_level: int
    message_bits: int
    carry_bits: int
    grouping_factor: int
    name: str
    max_noise_level: int
    secret_distribution: str
    log2_p_fail_max: float
    modulus_switch_type: str
    blind_rotation: str
    primes: tuple
    q: int
    delta: int
    lwe_noise_width: int
    glwe_noise_width: int
    security_bits: int
    log2_p_fail: float

    # ------------------------------------------------------------------ short names and sizes
    @property
    def n(self) -> int:
        return self.lwe_dimension

    @property
    def N(self) -> int:  # noqa: N802 (the scheme's name for the ring degree)
        return self.polynomial_size

    @property
    def k(self) -> int:
        return self.glwe_dimension

    @property
    def log_n(self) -> int:
        """log2 N."""
        return self.polynomial_size.bit_length() - 1

    @property
    def lwe_size(self) -> int:
        """n + 1: an LWE ciphertext's length (mask and body)."""
        return self.lwe_dimension + 1

    @property
    def glwe_size(self) -> int:
        """k + 1: polynomials in a GLWE ciphertext."""
        return self.glwe_dimension + 1

    @property
    def big_lwe_dimension(self) -> int:
        """k N: the dimension of an LWE sample-extracted from a GLWE (the PBS output's key)."""
        return self.glwe_dimension * self.polynomial_size

    @property
    def bits(self) -> int:
        """message + carry bits: the LUT input precision."""
        return self.message_bits + self.carry_bits

    @property
    def message_space(self) -> int:
        """2^(message + carry bits): the values a LUT is defined on."""
        return 1 << self.bits

    @property
    def message_modulus(self) -> int:
        """2^message_bits."""
        return 1 << self.message_bits

    @property
    def plaintext_modulus(self) -> int:
        """2^(message + carry + 1): the message space with its padding bit."""
        return 1 << (self.bits + 1)

    @property
    def lwe_noise_variance(self):
        """Exact (Fraction) absolute variance of the LWE / key-switching-key noise the sampler draws."""
        return _noise.uniform_sum_variance(self.lwe_noise_width)

    @property
    def glwe_noise_variance(self):
        """Exact (Fraction) absolute variance of the GLWE / bootstrapping-key noise the sampler draws."""
        return _noise.uniform_sum_variance(self.glwe_noise_width)

    @property
    def moduli(self) -> tuple:
        """(q1, q2): the two NTT primes of q (the core's name for `primes`)."""
        return self.primes

    @property
    def is_secure(self) -> bool:
        return self.security_bits >= 128

    def with_message_bits(self, message_bits: int, *, max_noise_level: int | None = None) -> "TFHEParams":
        """The same cryptographic parameters with their bits split otherwise: message_bits of
        message and bits - message_bits of carry (TFHE-rs's MESSAGE_2_CARRY_2 reading of a 4-bit
        set), optionally another max_noise_level. The encoding (delta) and the noise model depend
        on the total bits and max_noise_level only, so the modelled p_fail is unchanged unless
        max_noise_level changes; it is checked again (make_params). Named "<name>:<m>+<c>".

        Raises ParameterError for message_bits outside [1, bits], or a max_noise_level whose
        modelled p_fail exceeds log2_p_fail_max."""
        _check_int("TFHEParams.with_message_bits", "message_bits", message_bits, 1, self.bits)
        nu = self.max_noise_level if max_noise_level is None else max_noise_level
        base = self.name.split(":")[0]
        name = f"{base}:{message_bits}+{self.bits - message_bits}" + (f":nu{nu}" if nu != self.max_noise_level else "")
        lit = replace(self.literal(), message_bits=message_bits, carry_bits=self.bits - message_bits,
                      max_noise_level=nu, name=name)
        with warnings.catch_warnings():  # the parameters' own insecurity was already reported
            warnings.simplefilter("ignore", InsecureParametersWarning)
            return make_params(lit, allow_insecure=not self.is_secure)

    # ------------------------------------------------------------------ serialization
    def literal(self) -> TFHEParamsLiteral:
        """The literal these parameters are made from. Raises nothing."""
        return TFHEParamsLiteral(**{f: getattr(self, f) for f in _LITERAL_FIELDS})

    def describe(self) -> dict:
        """Plain-data description used by serialization to check compatibility (the literal's
        fields and the derived values). Raises nothing."""
        d = {f: getattr(self, f) for f in _LITERAL_FIELDS}
        d.update(primes=list(self.primes), q=self.q, delta=self.delta, lwe_noise_width=self.lwe_noise_width,
                 glwe_noise_width=self.glwe_noise_width,
                 security_bits=self.security_bits, log2_p_fail=self.log2_p_fail)
        return d

    @classmethod
    def from_description(cls, d: dict, *, allow_insecure: bool = False) -> "TFHEParams":
        """Rebuild TFHEParams from describe()'s dict (make_params of its literal fields) and check
        that the derived values agree. Raises ParameterError if they do not (another prime
        choice, another noise model) or the dict lacks a field."""
        optional = {"blind_rotation": "ntt"}  # absent from descriptions saved before it existed (all "ntt")
        d = {**optional, **d}
        missing = [f for f in _LITERAL_FIELDS if f not in d]
        if missing:
            raise ParameterError(f"TFHEParams.from_description: missing fields {missing}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureParametersWarning)
            p = make_params(TFHEParamsLiteral(**{f: d[f] for f in _LITERAL_FIELDS}), allow_insecure=True)
        if not allow_insecure and not p.is_secure:
            raise SecurityError(f"TFHEParams.from_description: parameters {p.name!r} are not 128-bit secure; "
                                "pass allow_insecure=True to load test parameters")
        mine = p.describe()
        for key in ("primes", "q", "delta", "lwe_noise_width", "glwe_noise_width"):
            theirs = list(d[key]) if key == "primes" and key in d else d.get(key, mine[key])
            if theirs != mine[key]:
                raise ParameterError(f"TFHEParams.from_description: {key} = {d[key]} differs from this "
                                     f"version's {mine[key]}; the data was made with other parameters")
        return p


# ---------------------------------------------------------------------------- security


def min_log2_std_128(dimension: int, q: int) -> float:
    """The smallest log2(std / q) that the 128-bit curve accepts for an LWE dimension (binary or
    ternary secret): max(SLOPE * d + BIAS, 2 - log2 q); +inf below the curve's smallest
    dimension (450), where no noise is enough."""
    if dimension < MIN_DIMENSION_128:
        return math.inf
    return max(SLOPE_128 * dimension + BIAS_128, ABSOLUTE_STD_FLOOR_LOG2 - math.log2(q))


def lwe_security_ok(dimension: int, std_rel: float, q: int) -> bool:
    """True when (dimension, relative std) is on the secure side of the 128-bit curve."""
    return std_rel > 0 and math.log2(std_rel) >= min_log2_std_128(dimension, q)


def _sampled_std(width: int, q: int) -> float:
    return math.sqrt(float(_noise.uniform_sum_variance(width))) / q


# ---------------------------------------------------------------------------- validation


def _check_int(op: str, name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{op}: {name} must be an int, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ParameterError(f"{op}: {name} must be {rng}, got {value}")
    return value


def _check_std(op: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParameterError(f"{op}: {name} must be a float (a standard deviation relative to q), got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or v >= 0.125:
        raise ParameterError(f"{op}: {name} must be a finite standard deviation relative to q in [0, 1/8), "
                             f"got {value!r} (TFHE-rs's StandardDev values are relative: e.g. 3.6e-06)")
    return v


def make_params(literal: TFHEParamsLiteral | None = None, *, allow_insecure: bool = False, **fields_) -> TFHEParams:
    """Validate a TFHEParamsLiteral into TFHEParams: `make_params(lit)`, or the literal's fields
    as keywords: `make_params(lwe_dimension=833, ...)` (keywords given with a literal replace its
    own).

    Raises ParameterError for: a field of the wrong type; N not a power of two in 2^10 .. 2^16;
    k, n, levels or base logs below 1; base_log * level above ceil(log2 q) = 62 for either
    decomposition; a base log above 30; a grouping factor outside 1..4, not dividing n, or with a
    ternary secret or a centered modulus switch; an unknown secret distribution or modulus-switch type;
    a centered switch whose int64 correction sum could overflow (n (q/4N + 2) >= 2^63); noise std
    outside [0, 1/8); message bits < 1
    or carry bits < 0; more message + carry bits than N allows (2^(bits+1) <= N: at least two
    test-polynomial coefficients per message); max_noise_level < 1; a modelled log2 p_fail above
    log2_p_fail_max (the message says what to change).
    Raises SecurityError (a ParameterError) when either secret's (dimension, noise) is below the
    128-bit curve, unless allow_insecure=True: then it warns with InsecureParametersWarning and
    security_bits is 0.
    """
    op = "make_params"
    if literal is None:
        try:
            lit = TFHEParamsLiteral(**fields_)
        except TypeError as e:
            raise ParameterError(f"{op}: {e}") from None
    elif isinstance(literal, TFHEParamsLiteral):
        try:
            lit = replace(literal, **fields_)
        except TypeError as e:
            raise ParameterError(f"{op}: {e}") from None
    else:
        raise ParameterError(f"{op}: expected a TFHEParamsLiteral, got {type(literal).__name__}")

    q1, q2 = _primes()
    q = q1 * q2
    log2_q = (q - 1).bit_length()  # 62

    n = _check_int(op, "lwe_dimension", lit.lwe_dimension, 1, 1 << 14)
    k = _check_int(op, "glwe_dimension", lit.glwe_dimension, 1, 16)
    big_n = _check_int(op, "polynomial_size", lit.polynomial_size, 1)
    if big_n & (big_n - 1) or not MIN_LOG_N <= big_n.bit_length() - 1 <= MAX_LOG_N:
        raise ParameterError(f"{op}: polynomial_size must be a power of two in [2^{MIN_LOG_N}, 2^{MAX_LOG_N}], "
                             f"got {big_n}")
    for what in ("pbs", "ks"):
        bl = _check_int(op, f"{what}_base_log", getattr(lit, f"{what}_base_log"), 1, 30)
        lv = _check_int(op, f"{what}_level", getattr(lit, f"{what}_level"), 1)
        if bl * lv > log2_q:
            raise ParameterError(f"{op}: {what}_base_log * {what}_level = {bl * lv} exceeds log2 q = {log2_q}; "
                                 f"use fewer levels or a smaller base")
    g = _check_int(op, "grouping_factor", lit.grouping_factor, 1, MAX_GROUPING_FACTOR)
    if n % g:
        raise ParameterError(f"{op}: grouping_factor {g} must divide lwe_dimension {n}; "
                             f"use n = {n - n % g} or {n - n % g + g}")
    if lit.secret_distribution not in SECRET_DISTRIBUTIONS:
        raise ParameterError(f"{op}: secret_distribution must be one of {SECRET_DISTRIBUTIONS}, "
                             f"got {lit.secret_distribution!r}")
    if g > 1 and lit.secret_distribution != "binary":
        raise ParameterError(f"{op}: multi-bit PBS (grouping_factor {g}) needs a binary secret; "
                             "use secret_distribution='binary' or grouping_factor=1")
    if lit.modulus_switch_type not in _noise.MODULUS_SWITCH_TYPES:
        raise ParameterError(f"{op}: modulus_switch_type must be one of {_noise.MODULUS_SWITCH_TYPES}, "
                             f"got {lit.modulus_switch_type!r}")
    if g > 1 and lit.modulus_switch_type != "standard":
        raise ParameterError(f"{op}: the centered modulus switch is for the classical PBS; multi-bit PBS "
                             f"(grouping_factor {g}) needs modulus_switch_type='standard'")
    lwe_std = _check_std(op, "lwe_noise_std", lit.lwe_noise_std)
    glwe_std = _check_std(op, "glwe_noise_std", lit.glwe_noise_std)
    rotation = lit.blind_rotation if lit.blind_rotation is not None else "fft"
    if rotation not in BLIND_ROTATIONS:
        raise ParameterError(f"{op}: blind_rotation must be one of {BLIND_ROTATIONS} or None, got {rotation!r}")
    if lit.modulus_switch_type == "centered" and n * (q // (4 * big_n) + 2) >= 1 << 63:
        raise ParameterError(f"{op}: the centered modulus switch sums n mask corrections of up to q / 4N in "
                             f"int64; n = {n} is too large for N = {big_n}: use a larger N or "
                             "modulus_switch_type='standard'")
    m = _check_int(op, "message_bits", lit.message_bits, 1)
    c = _check_int(op, "carry_bits", lit.carry_bits, 0)
    if 1 << (m + c + 1) > big_n:
        raise ParameterError(f"{op}: message_bits + carry_bits = {m + c} needs N >= 2^{m + c + 1} "
                             f"(two test-polynomial coefficients per message); got N = {big_n}: "
                             "use fewer bits or a larger polynomial_size")
    nu = _check_int(op, "max_noise_level", lit.max_noise_level, 1)
    if isinstance(lit.log2_p_fail_max, bool) or not isinstance(lit.log2_p_fail_max, (int, float)) \
            or not lit.log2_p_fail_max <= 0:
        raise ParameterError(f"{op}: log2_p_fail_max must be a number <= 0, got {lit.log2_p_fail_max!r}")
    if not isinstance(lit.name, str):
        raise ParameterError(f"{op}: name must be a str, got {lit.name!r}")

    lwe_w = _noise.noise_width(lwe_std, q)
    glwe_w = _noise.noise_width(glwe_std, q)
    delta = q >> (m + c + 1)  # floor(q / 2^(bits+1)), the core's encoding

    lwe_ok = lwe_security_ok(n, _sampled_std(lwe_w, q), q)
    glwe_ok = lwe_security_ok(k * big_n, _sampled_std(glwe_w, q), q)
    if rotation == "fft":  # the GLWE secret also encrypts the Fourier key, at 2^64
        torus = _noise.TORUS
        glwe_ok = glwe_ok and lwe_security_ok(k * big_n, _sampled_std(_noise.noise_width(glwe_std, torus), torus),
                                              torus)
    secure = lwe_ok and glwe_ok
    p = TFHEParams(lwe_dimension=n, glwe_dimension=k, polynomial_size=big_n, lwe_noise_std=lwe_std,
                   glwe_noise_std=glwe_std, pbs_base_log=lit.pbs_base_log, pbs_level=lit.pbs_level,
                   ks_base_log=lit.ks_base_log, ks_level=lit.ks_level, message_bits=m, carry_bits=c,
                   grouping_factor=g, name=lit.name, max_noise_level=nu,
                   secret_distribution=lit.secret_distribution, log2_p_fail_max=float(lit.log2_p_fail_max),
                   modulus_switch_type=lit.modulus_switch_type, blind_rotation=rotation, primes=(q1, q2), q=q,
                   delta=delta,
                   lwe_noise_width=lwe_w, glwe_noise_width=glwe_w,
                   security_bits=128 if secure else 0, log2_p_fail=0.0)
    lpf = _noise.log2_p_fail(p)
    p = replace(p, log2_p_fail=lpf)
    if lpf > p.log2_p_fail_max:
        r = _noise.noise_report(p)
        worst = max(("pbs output x max_noise_level^2", 2 * r["log2_std_pbs"] + 2 * math.log2(nu)),
                    ("key switch", 2 * r["log2_std_keyswitch"]), ("modulus switch", 2 * r["log2_std_modulus_switch"]),
                    key=lambda t: t[1])[0]
        raise ParameterError(f"{op}: parameters {lit.name!r} fail a PBS with probability 2^{lpf:.1f} > "
                             f"2^{p.log2_p_fail_max:g} (largest noise term: {worst}); use fewer message/carry bits, "
                             "a larger N, a smaller max_noise_level, finer decompositions or less noise")
    if not secure and not allow_insecure:
        why = []
        for label, dim, w, std in (("LWE", n, lwe_w, lwe_std), ("GLWE", k * big_n, glwe_w, glwe_std)):
            if not lwe_security_ok(dim, _sampled_std(w, q), q):
                need = min_log2_std_128(dim, q)
                why.append(f"{label} dimension {dim} with noise std 2^{math.log2(max(std, 1e-300)):.1f} q "
                           + (f"(the 128-bit curve needs dimension >= {MIN_DIMENSION_128})" if math.isinf(need)
                              else f"(needs >= 2^{need:.1f} q)"))
        raise SecurityError(f"{op}: insecure parameters {lit.name!r}: {'; '.join(why)}; raise the noise or the "
                            "dimension, or pass allow_insecure=True for tests")
    if not secure:
        warn(f"TFHE parameters {lit.name!r} are not 128-bit secure; use them for tests only")
    return p
