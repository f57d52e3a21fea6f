"""The TFHE noise model (fhetorch/_tfhe/noise.py): exact small cases, a direct simulation of
the key switch, monotonicity, TFHE-rs's stated p_fail reproduced at q = 2^64, and every secure
preset's failure-probability claim. Measured PBS noise against the model is the core's test
(it needs the PBS): tests/_tfhe/test_noise_measured.py."""
from __future__ import annotations

import math
import random
import warnings
from dataclasses import replace
from fractions import Fraction
from types import SimpleNamespace

import pytest

from fhetorch._tfhe import noise
from fhetorch._tfhe.params import make_params
from fhetorch._tfhe.presets import PRESETS, TARGET_LOG2_P_FAIL, is_toy, preset
from fhetorch.errors import InsecureParametersWarning, ParameterError

SECURE = [name for name in PRESETS if not is_toy(name)]


def quiet(lit, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return make_params(lit, allow_insecure=True, **kw)


def centred(x, q):
    x %= q
    return x - q if x > q // 2 else x


# ----------------------------------------------------------------------------- exact small cases


@pytest.mark.parametrize("w", [0, 1, 2, 3, 7])
def test_uniform_sum_variance_by_enumeration(w):
    dist = {0: 1}  # distribution of the sum of 4 uniforms on [-w, w], as counts
    for _ in range(4):
        nxt = {}
        for v, c in dist.items():
            for u in range(-w, w + 1):
                nxt[v + u] = nxt.get(v + u, 0) + c
        dist = nxt
    total = sum(dist.values())
    var = Fraction(sum(c * v * v for v, c in dist.items()), total)
    assert sum(c * v for v, c in dist.items()) == 0
    assert noise.uniform_sum_variance(w) == var == Fraction(4 * w * (w + 1), 3)


def test_noise_width_is_the_smallest_width_reaching_the_variance():
    q = 2**40 + 15
    for std in (0.0, 1e-12, 3e-11, 1e-9, 2.0**-20, 0.01):
        w = noise.noise_width(std, q)
        target = (std * q) ** 2
        assert noise.uniform_sum_variance(w) >= target * (1 - 1e-12)
        assert w == 0 or noise.uniform_sum_variance(w - 1) < target
    with pytest.raises(ParameterError):
        noise.noise_width(1e-6)
    with pytest.raises(ParameterError):
        noise.noise_width(-1.0, q)


def test_noise_width_of_params():
    p = preset("tfhe-4bit")
    assert noise.noise_width(p) == p.lwe_noise_width
    assert noise.noise_width(p, which="glwe") == p.glwe_noise_width


def decompose(a, q, base_log, level):
    """The core's gadget: balanced digits of round(a B^l / q) mod B^l, g_j = round(q / B^j)."""
    b = 1 << base_log
    x = (a * b**level * 2 + q) // (2 * q) % b**level
    digits = []
    for _ in range(level):  # least significant first
        d = x % b
        x //= b
        if d >= b // 2:
            d -= b
            x += 1
        digits.append(d)
    digits.reverse()  # d_1 (most significant) .. d_l
    return digits, [(2 * q + b**j) // (2 * b**j) for j in range(1, level + 1)]


@pytest.mark.parametrize("q, base_log, level", [(10007, 2, 3), (65521 * 3, 3, 2), (1000003, 4, 3), (1000003, 5, 1)])
def test_decomposition_error_variance_by_enumeration(q, base_log, level):
    errs, digit_sq, n_digits = [], 0, 0
    for a in range(q):
        d, g = decompose(a, q, base_log, level)
        errs.append(centred(a - sum(x * y for x, y in zip(d, g)), q))
        digit_sq += sum(x * x for x in d)
        n_digits += level
    mean = sum(errs) / q
    var = sum(e * e for e in errs) / q - mean * mean
    assert abs(mean) < 0.05 * math.sqrt(var) + 0.5
    assert var / q**2 == pytest.approx(noise.decomposition_error_variance(q, base_log, level), rel=0.05)
    assert digit_sq / n_digits == pytest.approx(((1 << base_log) ** 2 + 2) / 12, rel=0.1)


@pytest.mark.parametrize("q, two_n", [(10007, 64), (1000003, 2048)])
def test_modulus_switch_rounding_by_enumeration(q, two_n):
    # one coefficient: 2N a / q - round(2N a / q), over every a in Z_q
    s = sum(centred(two_n * a, q) ** 2 for a in range(q))
    per_coefficient = s / q / q**2  # in units of the 2N torus element, squared
    assert per_coefficient == pytest.approx((1 - 1 / q**2) / 12, rel=1e-9)
    p = SimpleNamespace(lwe_dimension=0, polynomial_size=two_n // 2, grouping_factor=1, q=q,
                        secret_distribution="binary")
    assert noise.modulus_switch_variance(p) * two_n**2 == pytest.approx(per_coefficient, rel=1e-9)


def test_keyswitch_variance_by_direct_simulation():
    """A key switch computed with Python integers, its output error's sample variance against
    keyswitch_variance."""
    rng = random.Random(12)
    lit = PRESETS["toy-tfhe-4bit"]
    p = quiet(lit, lwe_noise_std=2.0**-16, log2_p_fail_max=0.0)
    q = p.q
    big, n, bl, lv = 24, 8, p.ks_base_log, 3  # a small instance of the same formula
    sim = SimpleNamespace(q=q, glwe_dimension=1, polynomial_size=big, lwe_dimension=n, ks_base_log=bl,
                          ks_level=lv, lwe_noise_width=p.lwe_noise_width, secret_distribution="binary")
    w = p.lwe_noise_width

    def e():
        return sum(rng.randint(-w, w) for _ in range(4))

    errors = []
    for _ in range(300):
        s_in = [rng.randint(0, 1) for _ in range(big)]
        s_out = [rng.randint(0, 1) for _ in range(n)]
        a = [rng.randrange(q) for _ in range(big)]
        b = sum(x * y for x, y in zip(a, s_in)) % q  # an encryption of 0 without noise
        out_a, out_b = [0] * n, b
        for i in range(big):
            digits, g = decompose(a[i], q, bl, lv)
            for d, gj in zip(digits, g):
                if d == 0:
                    continue
                ka = [rng.randrange(q) for _ in range(n)]
                kb = (sum(x * y for x, y in zip(ka, s_out)) + s_in[i] * gj + e()) % q
                out_a = [(x - d * y) % q for x, y in zip(out_a, ka)]
                out_b = (out_b - d * kb) % q
        errors.append(centred(out_b - sum(x * y for x, y in zip(out_a, s_out)), q))
    sample = sum(x * x for x in errors) / len(errors) / q**2
    model = noise.keyswitch_variance(sim)
    assert sample == pytest.approx(model, rel=0.3)


def test_linear_variance():
    assert noise.linear_variance([1.0, 2.0, 3.0], [1, -2, 0]) == 9.0
    with pytest.raises(ValueError):
        noise.linear_variance([1.0], [1, 2])


def test_log2_erfc_is_continuous_and_matches_math():
    for x in (0.0, 1.0, 5.0, 20.0, 24.9):
        assert noise.log2_erfc(x) == pytest.approx(math.log2(math.erfc(x)), rel=1e-12)
    assert noise.log2_erfc(25.0) == pytest.approx(math.log2(math.erfc(25.0)), rel=1e-6)
    assert noise.log2_erfc(100.0) < noise.log2_erfc(50.0) < noise.log2_erfc(25.0)
    with pytest.raises(ParameterError):
        noise.log2_erfc(-1.0)


# ----------------------------------------------------------------------------- model properties


@pytest.mark.parametrize("gap, offset, var", [(1.0, 0.1, 0.04), (2.0, 0.5, 0.3), (30.0, 0.5, 25.0)])
def test_offset_window_p_fail(gap, offset, var):
    # P(e > gap - offset) + P(e < -gap - offset) for e ~ N(0, var), directly
    s = math.sqrt(2 * var)
    direct = (math.erfc((gap - offset) / s) + math.erfc((gap + offset) / s)) / 2
    assert 2.0 ** noise.log2_p_fail_of_variance(var, gap, offset) == pytest.approx(direct, rel=1e-9)
    assert noise.log2_p_fail_of_variance(var, gap, offset) > noise.log2_p_fail_of_variance(var, gap)


def test_steps_compose():
    p = preset("tfhe-4bit")
    assert noise.pbs_variance(p) == noise.blind_rotation_variance(p) == noise.sample_extraction_variance(
        noise.blind_rotation_variance(p))
    per_cmux = noise.cmux_variance(p) - noise.cmux_variance(p, 0.0) + noise.cmux_variance(p)
    assert noise.blind_rotation_variance(p) == pytest.approx(p.lwe_dimension * per_cmux)
    assert noise.external_product_variance(p) == pytest.approx(noise.cmux_variance(p))
    assert noise.external_product_variance(p, 1e-10) == pytest.approx(noise.cmux_variance(p) + 1e-10)
    v = noise.decision_variance(p)
    assert v == pytest.approx(p.max_noise_level**2 * noise.pbs_variance(p) + noise.keyswitch_variance(p)
                              + noise.modulus_switch_variance(p))
    assert noise.half_gap(p) == 2.0**-6
    assert noise.log2_p_fail(p) == pytest.approx(noise.log2_erfc(2.0**-6 / math.sqrt(2 * v)))
    assert noise.p_fail(p) == pytest.approx(2.0 ** noise.log2_p_fail(p))
    r = noise.noise_report(p)
    assert r["log2_p_fail"] == p.log2_p_fail and r["var_decision"] == v


def test_multibit_blind_rotation():
    p = preset("tfhe-4bit-mb4")
    g = p.grouping_factor
    one = replace(p, grouping_factor=1)
    key = noise.external_product_variance(p) - noise._ep_decomposition_term(p)
    rounding = noise.fourier_product_variance(p)  # "fft" (the default): each group's product rounds
    assert p.blind_rotation == "fft" and 0 < rounding < 1e-2 * (1 << g) * key  # 0.2 % here
    expect = p.lwe_dimension // g * ((1 << g) * key + noise._ep_decomposition_term(p) + rounding)
    assert noise.blind_rotation_variance(p) == pytest.approx(expect, rel=1e-12, abs=0)
    ntt = replace(p, blind_rotation="ntt")
    assert noise.fourier_product_variance(ntt) == 0
    assert noise.modulus_switch_variance(p) < noise.modulus_switch_variance(one)


@pytest.mark.parametrize("field, factor", [("lwe_noise_std", 2.0), ("glwe_noise_std", 4.0),
                                           ("max_noise_level", 2), ("message_bits", None)])
def test_monotonic_in_noise_and_bits(field, factor):
    base = PRESETS["toy-tfhe-4bit-noisy"]
    p0 = quiet(base)
    if field == "message_bits":
        p1 = quiet(base, message_bits=5)
    else:
        value = getattr(base, field) * factor
        p1 = quiet(base, **{field: value})
    assert noise.decision_variance(p1) >= noise.decision_variance(p0)
    assert p1.log2_p_fail > p0.log2_p_fail


def test_ternary_secret_adds_noise():
    p = preset("tfhe-4bit")
    t = replace(p, secret_distribution="ternary")
    assert noise.keyswitch_variance(t) > noise.keyswitch_variance(p)
    assert noise.modulus_switch_variance(t) > noise.modulus_switch_variance(p)
    assert noise.log2_p_fail(t) > noise.log2_p_fail(p)


def test_ternary_blind_rotation_runs_2n_cmuxes():
    """2n CMuxes pay the key (and Fourier rounding) term, n the decomposition term (s+_i s-_i = 0);
    make_params reports that p_fail, and refuses tfhe-4bit's values with a ternary secret."""
    binary, ternary = quiet(PRESETS["toy-tfhe-4bit"]), quiet(PRESETS["toy-tfhe-4bit-ternary"])
    assert ternary.secret_distribution == "ternary" and ternary.n == binary.n
    assert noise.blind_rotation_cmuxes(binary) == binary.n and noise.blind_rotation_cmuxes(ternary) == 2 * ternary.n
    for p in (ternary, replace(ternary, blind_rotation="ntt")):
        key = noise.external_product_variance(p, message_norm2=0.0) + noise.fourier_product_variance(p)
        dec = noise.external_product_variance(p) - noise.external_product_variance(p, message_norm2=0.0)
        assert dec == pytest.approx((1 + p.k * p.N * 2 / 3) * noise.decomposition_error_variance(
            noise.TORUS if p.blind_rotation == "fft" else p.q, p.pbs_base_log, p.pbs_level))
        assert noise.blind_rotation_variance(p) == pytest.approx(2 * p.n * key + p.n * dec, rel=1e-12)
    assert ternary.log2_p_fail == noise.log2_p_fail(ternary) > binary.log2_p_fail
    with pytest.raises(ParameterError, match="fail a PBS"):
        quiet(PRESETS["tfhe-4bit"], secret_distribution="ternary")  # 2^-51.7 > 2^-64
    assert quiet(PRESETS["tfhe-2bit"], secret_distribution="ternary").log2_p_fail == pytest.approx(-113.67, abs=0.01)


def test_finer_decomposition_less_rounding():
    q = preset("tfhe-4bit").q
    assert noise.decomposition_error_variance(q, 3, 6) < noise.decomposition_error_variance(q, 3, 5)
    assert noise.decomposition_error_variance(q, 23, 1) > noise.decomposition_error_variance(q, 12, 2)


# ----------------------------------------------------------------------------- against TFHE-rs


# TFHE-rs Gaussian classical sets with a plain modulus switch (v1_1, KS-PBS, binary keys, q = 2^64):
# (n, k, N, lwe std, glwe std, pbs (base_log, level), ks (base_log, level), message + carry bits,
#  2-norm, the p_fail TFHE-rs states)
TFHE_RS_2M64 = {
    "V1_1_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M64":
        (833, 1, 2048, 3.6158408373309336e-06, 2.845267479601915e-15, (23, 1), (3, 5), 4, 5, -64.014),
    "V1_1_PARAM_MESSAGE_3_CARRY_3_KS_PBS_GAUSSIAN_2M64":
        (977, 1, 8192, 3.0144389706858286e-07, 2.168404344971009e-19, (15, 2), (3, 6), 6, 9, -64.177),
    "V1_1_PARAM_MESSAGE_4_CARRY_4_KS_PBS_GAUSSIAN_2M64":
        (1110, 1, 32768, 3.038278019865525e-08, 2.168404344971009e-19, (11, 3), (2, 11), 8, 17, -64.014),
}


@pytest.mark.parametrize("name", list(TFHE_RS_2M64))
def test_model_reproduces_tfhe_rs_p_fail_at_2_64(name):
    n, k, big_n, sl, sg, pbs, ks, bits, nu, stated = TFHE_RS_2M64[name]
    q = 2**64
    p = SimpleNamespace(q=q, lwe_dimension=n, glwe_dimension=k, polynomial_size=big_n, lwe_noise_std=sl,
                        glwe_noise_std=sg, pbs_base_log=pbs[0], pbs_level=pbs[1], ks_base_log=ks[0],
                        ks_level=ks[1], message_bits=bits, carry_bits=0, grouping_factor=1, max_noise_level=nu,
                        secret_distribution="binary")
    p.lwe_noise_width = noise.noise_width(p)
    p.glwe_noise_width = noise.noise_width(p, which="glwe")
    # TFHE-rs states these from the variance alone; ours adds the standard switch's half-step window
    # offset (noise.window_offset), about 0.3 bits more
    assert noise.log2_p_fail(p) == pytest.approx(stated, abs=0.5)


def _t_uniform_std(b):
    return math.sqrt((2.0 ** (2 * b + 1) + 1) / 6) / 2.0**64


# TFHE-rs v1_4 TUniform classical sets, CenteredMeanNoiseReduction modulus switch (zama-ai/tfhe-rs
# @1feb4ca2, tfhe/src/shortint/parameters/v1_4/classic/tuniform/p_fail_2_minus_128/ks_pbs.rs):
# (n, k, N, lwe TUniform bound, glwe TUniform bound, pbs, ks, message + carry bits, 2-norm, stated p_fail)
TFHE_RS_CENTERED_2M128 = {
    "V1_4_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M128": (879, 4, 512, 46, 17, (23, 1), (5, 3), 2, 3, -144.322),
    "V1_4_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128": (918, 1, 2048, 45, 17, (23, 1), (4, 4), 4, 5, -129.581),
    "V1_4_PARAM_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M128": (1077, 1, 8192, 41, 3, (15, 2), (4, 5), 6, 9, -128.992),
}


@pytest.mark.parametrize("name", list(TFHE_RS_CENTERED_2M128))
def test_model_reproduces_tfhe_rs_centered_sets_at_2_64(name):
    """Within 1.5 bits and never more optimistic than TFHE-rs (ours is 0.4 .. 1.1 bits above: at
    p_fail ~ 2^-130 one bit is ~0.8% of the decision variance)."""
    n, k, big_n, bl, bg, pbs, ks, bits, nu, stated = TFHE_RS_CENTERED_2M128[name]
    p = SimpleNamespace(q=2**64, lwe_dimension=n, glwe_dimension=k, polynomial_size=big_n,
                        lwe_noise_std=_t_uniform_std(bl), glwe_noise_std=_t_uniform_std(bg), pbs_base_log=pbs[0],
                        pbs_level=pbs[1], ks_base_log=ks[0], ks_level=ks[1], message_bits=bits, carry_bits=0,
                        grouping_factor=1, max_noise_level=nu, secret_distribution="binary",
                        modulus_switch_type="centered")
    p.lwe_noise_width = noise.noise_width(p)
    p.glwe_noise_width = noise.noise_width(p, which="glwe")
    assert stated <= noise.log2_p_fail(p) <= stated + 1.5
    # the same set with the standard switch is far from 2^-128: centering is what reaches it
    p.modulus_switch_type = "standard"
    assert noise.log2_p_fail(p) > stated + 50


# ----------------------------------------------------------------------------- preset claims


@pytest.mark.parametrize("name", SECURE)
def test_secure_preset_p_fail_claims(name):
    p = preset(name)
    assert noise.log2_p_fail(p) == p.log2_p_fail <= TARGET_LOG2_P_FAIL[name] <= -64
    if name.endswith("p128"):
        assert p.log2_p_fail <= -128


def test_toy_presets_are_flagged_insecure():
    for name in PRESETS:
        if is_toy(name):
            with pytest.warns(InsecureParametersWarning):
                assert preset(name).security_bits == 0
