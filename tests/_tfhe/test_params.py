"""TFHE parameters: validation errors that say what to change, presets, warnings, and the
describe() / literal() round trip (fhetorch/_tfhe/params.py, presets.py)."""
from __future__ import annotations

import math
import warnings
from dataclasses import replace
from fractions import Fraction

import pytest

from fhetorch._ring.primes import is_prime
from fhetorch._tfhe import noise
from fhetorch._tfhe.params import TFHEParams, TFHEParamsLiteral, make_params, min_log2_std_128, tfhe_primes
from fhetorch._tfhe.presets import CITATIONS, PRESETS, TARGET_LOG2_P_FAIL, is_toy, preset, presets, t_uniform_std
from fhetorch.errors import InsecureParametersWarning, ParameterError, SecurityError

SECURE = [name for name in PRESETS if not is_toy(name)]
TOY = [name for name in PRESETS if is_toy(name)]
BASE = PRESETS["tfhe-4bit"]


def quiet(lit, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return make_params(lit, allow_insecure=True, **kw)


def test_primes_are_ntt_primes_below_2_31():
    q1, q2 = tfhe_primes()
    assert q1 != q2
    for p in (q1, q2):
        assert is_prime(p) and p < 2**31 and (p - 1) % 2**17 == 0
    p = preset("tfhe-4bit")
    assert p.primes == p.moduli == (q1, q2) and p.q == q1 * q2
    assert 61.99 < math.log2(p.q) < 62


def test_derived_sizes():
    p = preset("tfhe-4bit")
    assert (p.n, p.N, p.k) == (833, 2048, 1)
    assert p.lwe_size == 834 and p.glwe_size == 2 and p.big_lwe_dimension == 2048
    assert p.bits == 4 and p.message_space == 16 and p.plaintext_modulus == 32
    assert p.delta == p.q // 32
    assert p.lwe_noise_variance == Fraction(4 * p.lwe_noise_width * (p.lwe_noise_width + 1), 3)
    assert p.security_bits == 128 and p.is_secure


def test_frozen():
    p = preset("tfhe-4bit")
    with pytest.raises(AttributeError):
        p.lwe_dimension = 10


@pytest.mark.parametrize("field, value, words", [
    ("polynomial_size", 1000, "power of two"),
    ("polynomial_size", 512, "power of two"),
    ("polynomial_size", 1 << 17, "power of two"),
    ("glwe_dimension", 0, "glwe_dimension"),
    ("lwe_dimension", 0, "lwe_dimension"),
    ("lwe_dimension", 2.5, "must be an int"),
    ("pbs_level", True, "must be an int"),
    ("pbs_base_log", 31, "pbs_base_log"),
    ("pbs_level", 3, "exceeds log2 q"),
    ("ks_level", 0, "ks_level"),
    ("ks_base_log", 13, "exceeds log2 q"),
    ("grouping_factor", 5, "grouping_factor"),
    ("grouping_factor", 3, "must divide lwe_dimension"),
    ("message_bits", 0, "message_bits"),
    ("carry_bits", -1, "carry_bits"),
    ("message_bits", 11, "larger polynomial_size"),
    ("lwe_noise_std", -1e-6, "standard deviation"),
    ("lwe_noise_std", float("nan"), "standard deviation"),
    ("glwe_noise_std", "1e-15", "must be a float"),
    ("max_noise_level", 0, "max_noise_level"),
    ("secret_distribution", "gaussian", "secret_distribution"),
    ("log2_p_fail_max", 3, "log2_p_fail_max"),
    ("modulus_switch_type", "rounded", "modulus_switch_type"),
])
def test_validation_errors_say_what_to_change(field, value, words):
    with pytest.raises(ParameterError, match=words):
        quiet(BASE, **{field: value})


def test_errors_start_with_the_op():
    with pytest.raises(ParameterError, match=r"^make_params: "):
        quiet(BASE, polynomial_size=1000)


def test_unknown_field_and_wrong_literal():
    with pytest.raises(ParameterError):
        make_params(BASE, no_such_field=1)
    with pytest.raises(ParameterError, match="TFHEParamsLiteral"):
        make_params({"lwe_dimension": 10})


def test_keywords_alone_make_params():
    p = quiet(None, **{f: getattr(BASE, f) for f in ("lwe_dimension", "glwe_dimension", "polynomial_size",
                                                        "lwe_noise_std", "glwe_noise_std", "pbs_base_log",
                                                        "pbs_level", "ks_base_log", "ks_level", "message_bits")},
              max_noise_level=5, modulus_switch_type="centered")
    assert p.describe() == replace(preset("tfhe-4bit"), name="custom").describe()


def test_multibit_needs_binary_secret():
    with pytest.raises(ParameterError, match="binary"):
        quiet(PRESETS["tfhe-4bit-mb4"], secret_distribution="ternary")


def test_centered_switch_is_classical_only_and_fits_int64():
    with pytest.raises(ParameterError, match="multi-bit PBS .* modulus_switch_type='standard'"):
        quiet(PRESETS["tfhe-4bit-mb4"], modulus_switch_type="centered")
    # n (q/4N + 2) must stay below 2^63: about n = 8192 at N = 1024
    toy = replace(PRESETS["toy-tfhe-4bit"], log2_p_fail_max=0.0)
    with pytest.raises(ParameterError, match="int64; n = 8200 is too large for N = 1024"):
        quiet(toy, lwe_dimension=8200)
    assert quiet(toy, lwe_dimension=8190).modulus_switch_type == "centered"
    assert quiet(toy, lwe_dimension=8200, modulus_switch_type="standard").n == 8200


def test_too_many_bits_for_the_noise():
    # 6 bits on the 4-bit set: the model's p_fail is far above 2^-64, and the message says so
    with pytest.raises(ParameterError, match=r"fail a PBS with probability .* fewer message/carry bits"):
        make_params(BASE, message_bits=6)
    # the same with the bound raised is allowed (failure-rate experiments)
    p = make_params(BASE, message_bits=6, log2_p_fail_max=0.0)
    assert p.log2_p_fail > -64


def test_insecure_noise_raises_security_error():
    with pytest.raises(SecurityError, match="LWE dimension 833") as e:
        make_params(BASE, lwe_noise_std=2.0**-30)
    assert "allow_insecure=True" in str(e.value)
    with pytest.raises(SecurityError, match="GLWE dimension 2048"):
        make_params(BASE, glwe_noise_std=2.0**-55)
    with pytest.raises(SecurityError, match="dimension >= 450"):
        make_params(BASE, lwe_dimension=400, lwe_noise_std=0.01, log2_p_fail_max=0.0)
    assert issubclass(SecurityError, ParameterError)


def test_allow_insecure_warns_and_marks_zero_bits():
    with pytest.warns(InsecureParametersWarning, match="not 128-bit secure"):
        p = make_params(BASE, lwe_noise_std=2.0**-30, allow_insecure=True)
    assert p.security_bits == 0 and not p.is_secure


def test_secure_curve_boundary():
    q = preset("tfhe-4bit").q
    # the curve: log2 std >= slope * n + bias, and an absolute std of 4 at least
    assert min_log2_std_128(833, q) == pytest.approx(-0.026405028765226296 * 833 + 2.482642269104389)
    assert min_log2_std_128(8192, q) == pytest.approx(2 - math.log2(q))
    assert min_log2_std_128(449, q) == math.inf


def test_noise_width_rounds_up():
    p = preset("tfhe-4bit")
    for w, std in ((p.lwe_noise_width, p.lwe_noise_std), (p.glwe_noise_width, p.glwe_noise_std)):
        target = (std * p.q) ** 2
        assert 4 * w * (w + 1) / 3 >= target * (1 - 1e-12)
        assert 4 * (w - 1) * w / 3 < target


@pytest.mark.parametrize("name", list(PRESETS))
def test_describe_round_trip(name):
    p = quiet(PRESETS[name])
    d = p.describe()
    assert all(isinstance(v, (int, float, str, list)) for v in d.values())
    assert quiet(p.literal()) == p
    assert TFHEParams.from_description(d, allow_insecure=True) == p


def test_from_description_refuses_other_derivations():
    d = preset("tfhe-4bit").describe()
    with pytest.raises(ParameterError, match="q = "):
        TFHEParams.from_description(dict(d, q=2**64))
    with pytest.raises(ParameterError, match="missing"):
        TFHEParams.from_description({"name": "x"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        toy = preset("toy-tfhe-4bit").describe()
    with pytest.raises(SecurityError):
        TFHEParams.from_description(toy)


# ----------------------------------------------------------------------------- presets


def test_required_presets_exist():
    for name in ("tfhe-2bit", "tfhe-4bit", "tfhe-6bit", "tfhe-8bit", "tfhe-2bit-p128", "tfhe-4bit-p128",
                 "toy-tfhe-2bit", "toy-tfhe-4bit"):
        assert name in PRESETS
    assert {preset(n).bits for n in ("tfhe-2bit", "tfhe-4bit", "tfhe-6bit", "tfhe-8bit")} == {2, 4, 6, 8}


@pytest.mark.parametrize("name", SECURE)
def test_secure_presets(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureParametersWarning)
        p = preset(name)
    assert p.security_bits == 128
    assert p.log2_p_fail <= TARGET_LOG2_P_FAIL[name] <= -64
    if name.endswith("-p128"):
        assert TARGET_LOG2_P_FAIL[name] <= -128
    cite = CITATIONS[name]
    assert cite["repository"] == "zama-ai/tfhe-rs" and len(cite["commit"]) == 40
    assert cite["cited_log2_p_fail"] <= TARGET_LOG2_P_FAIL[name]
    assert cite["file"].endswith(".rs") and "MESSAGE_" in cite["constant"]


def test_the_anchor_preset_is_tfhe_rs_v1_4_at_n_2048():
    """tfhe-4bit-p128 = V1_4_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128 (the anchor's set): same n,
    k, N, decompositions, bits and 2-norm, noise at least the cited TUniform std (the sampler rounds
    up, by under 1e-4 relatively), the centered switch; the model within 1.5 bits of the stated
    2^-129.58, on the pessimistic side, and below 2^-128."""
    p, cite = preset("tfhe-4bit-p128"), CITATIONS["tfhe-4bit-p128"]
    assert cite["constant"] == "V1_4_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128"
    assert (p.n, p.k, p.N, p.pbs_base_log, p.pbs_level, p.ks_base_log, p.ks_level) == (918, 1, 2048, 23, 1, 4, 4)
    assert (p.bits, p.max_noise_level, p.modulus_switch_type, p.grouping_factor) == (4, 5, "centered", 1)
    for var, bound in ((p.lwe_noise_variance, 45), (p.glwe_noise_variance, 17)):
        ratio = math.sqrt(float(var)) / p.q / t_uniform_std(bound)
        assert 1 <= ratio < 1 + 1e-4
    assert cite["cited_log2_p_fail"] <= p.log2_p_fail <= min(-128, cite["cited_log2_p_fail"] + 1.5)


def test_t_uniform_std_by_enumeration():
    for b in (0, 1, 3, 6):
        values = range(-(1 << b), (1 << b) + 1)
        weight = [1 if abs(x) == 1 << b else 2 for x in values]  # end points at half weight
        var = Fraction(sum(w * x * x for w, x in zip(weight, values)), sum(weight))
        assert t_uniform_std(b) == pytest.approx(math.sqrt(var) / 2.0**64, rel=1e-12)


@pytest.mark.parametrize("name", list(PRESETS))
def test_classical_presets_use_the_centered_switch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = preset(name)
    assert p.modulus_switch_type == ("centered" if p.grouping_factor == 1 else "standard")


@pytest.mark.parametrize("name", TOY)
def test_toy_presets_warn_every_time(name):
    for _ in range(2):
        with pytest.warns(InsecureParametersWarning, match="insecure"):
            p = preset(name)
    assert p.security_bits == 0
    assert p.polynomial_size <= 1024 and p.lwe_dimension <= 128


def test_toy_presets_decrypt_reliably_except_the_noisy_one():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        for name in TOY:
            p = preset(name)
            if name.endswith("noisy"):
                assert -10 < p.log2_p_fail < -2
            else:
                assert p.log2_p_fail < -128


def test_unknown_preset():
    with pytest.raises(ParameterError, match="unknown TFHE preset 'tfhe-5bit'; available: tfhe-2bit"):
        preset("tfhe-5bit")


def test_presets_info_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = presets()
    assert set(info) == set(PRESETS)
    i = info["tfhe-4bit"]
    assert (i["n"], i["N"], i["k"], i["bits"], i["security_bits"]) == (833, 2048, 1, 4, 128)
    assert i["decomposition"] == dict(pbs_base_log=23, pbs_level=1, ks_base_log=3, ks_level=5)
    assert i["log2_p_fail"] <= -64 and i["cited_log2_p_fail"] == -64.014
    assert info["toy-tfhe-4bit"]["security_bits"] == 0 and info["toy-tfhe-4bit"]["cited"] is None
    assert info["tfhe-4bit-mb4"]["grouping_factor"] == 4
    assert info["tfhe-4bit"]["modulus_switch_type"] == "centered" and i["max_noise_level"] == 5


def test_preset_is_cached():
    assert preset("tfhe-4bit") is preset("tfhe-4bit")
    assert noise.log2_p_fail(preset("tfhe-4bit")) == preset("tfhe-4bit").log2_p_fail
