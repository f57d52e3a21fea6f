"""TFHE's named parameter sets, as literals (fhetorch/_tfhe/params.py), each secure one citing the
published set it takes n, N, k, the noise (relative to q) and the decompositions from.

Every secure preset copies a TFHE-rs shortint parameter set (zama-ai/tfhe-rs, binary keys,
q = 2^64, the KS-PBS atomic pattern) at the same relative noise: Gaussian sets by their std,
TUniform(b) sets (uniform on [-2^b, 2^b], the end points at half weight) by the std of that
distribution, sqrt((2^(2b+1) + 1) / 6) / 2^64. Where the GLWE noise is TFHE-rs's floor (std 2^-62,
an absolute std of 4 at 2^64) the preset keeps the absolute floor of 4 at our q (relative 2^-60:
more noise, never less). Every classical preset uses the centered modulus switch (TFHE-rs's
CenteredMeanNoiseReduction; the cited TUniform set was made for it, and it only lowers the
Gaussian sets' failure probability); the multi-bit ones the standard switch. Each preset's
failure probability is this project's noise model's (fhetorch/_tfhe/noise.py) at the preset's
max_noise_level; CITATIONS holds the cited set's own stated p_fail beside it. Toy presets
(`toy-tfhe-*`) are insecure test sizes (small n, N = 2^10) and warn whenever used; the `-ternary`
toy draws its secrets uniform in {-1, 0, 1} (no secure ternary preset: TFHE-rs publishes none to
cite, docs/parameters.md).

Bits: a "tfhe-Kbit" preset holds K message bits and no carry (LUT inputs 0 .. 2^K - 1, the API's
`tctx.encrypt(torch.randint(0, 2^K, ...))`); the cited TFHE-rs set has message + carry = K (e.g.
MESSAGE_2_CARRY_2 for 4 bits): the decision gap depends on the total only.
"""
from __future__ import annotations

import math
import warnings

from ..errors import InsecureParametersWarning, ParameterError
from .._ring.presets import cached_params, is_toy
from .params import TFHEParams, TFHEParamsLiteral, make_params

_ABS_FLOOR = 2.0 ** -60  # an absolute std of 4 at q ~ 2^62 (TFHE-rs's 2^-62 at 2^64)
_TFHE_RS = "zama-ai/tfhe-rs"


def t_uniform_std(bound_log2: int) -> float:
    """The std, relative to 2^64, of TFHE-rs's TUniform(bound_log2) noise: every integer in
    [-2^b, 2^b] with probability 2^-(b+1), the two end points 2^-(b+2); variance (2^(2b+1) + 1) / 6."""
    return math.sqrt((2.0 ** (2 * bound_log2 + 1) + 1.0) / 6.0) / 2.0 ** 64


def _lit(name, n, k, big_n, lwe_std, glwe_std, pbs, ks, bits, nu, g=1, **kw):
    kw.setdefault("modulus_switch_type", "centered" if g == 1 else "standard")
    return TFHEParamsLiteral(lwe_dimension=n, glwe_dimension=k, polynomial_size=big_n, lwe_noise_std=lwe_std,
                             glwe_noise_std=glwe_std, pbs_base_log=pbs[0], pbs_level=pbs[1], ks_base_log=ks[0],
                             ks_level=ks[1], message_bits=bits, carry_bits=0, grouping_factor=g, name=name,
                             max_noise_level=nu, **kw)


PRESETS = {
    # ---- 128-bit secure, p_fail <= 2^-64 (and the -p128 ones <= 2^-128)
    "tfhe-2bit": _lit("tfhe-2bit", 747, 2, 1024, 8.243822162983204e-06, 3.1529322391500584e-16,
                      (23, 1), (4, 3), 2, 3),
    "tfhe-2bit-p128": _lit("tfhe-2bit-p128", 747, 2, 1024, 8.243822162983204e-06, 3.1529322391500584e-16,
                           (23, 1), (4, 3), 2, 3, log2_p_fail_max=-128.0),
    "tfhe-4bit": _lit("tfhe-4bit", 833, 1, 2048, 3.6158408373309336e-06, 2.845267479601915e-15,
                      (23, 1), (3, 5), 4, 5),
    "tfhe-4bit-p128": _lit("tfhe-4bit-p128", 918, 1, 2048, t_uniform_std(45), t_uniform_std(17),
                           (23, 1), (4, 4), 4, 5, log2_p_fail_max=-128.0),
    "tfhe-4bit-mb4": _lit("tfhe-4bit-mb4", 808, 1, 2048, 5.565910031845765e-06, 2.845267479601915e-15,
                          (22, 1), (3, 5), 4, 5, g=4),
    "tfhe-4bit-mb4-p128": _lit("tfhe-4bit-mb4-p128", 872, 1, 2048, 1.844927811696596e-06, 2.845267479601915e-15,
                               (22, 1), (3, 5), 4, 5, g=4, log2_p_fail_max=-128.0),
    "tfhe-6bit": _lit("tfhe-6bit", 977, 1, 8192, 3.0144389706858286e-07, _ABS_FLOOR, (15, 2), (3, 6), 6, 9),
    "tfhe-8bit": _lit("tfhe-8bit", 1110, 1, 32768, 3.038278019865525e-08, _ABS_FLOOR, (11, 3), (2, 11), 8, 17),
    "tfhe-8bit-p128": _lit("tfhe-8bit-p128", 1267, 1, 65536, 2.0240196581361536e-09, _ABS_FLOOR, (11, 3), (3, 9),
                           8, 17, log2_p_fail_max=-128.0),
    # ---- insecure test sizes (CPU, exhaustive LUT tests): small n, N = 2^10, p_fail far below 2^-64
    "toy-tfhe-2bit": _lit("toy-tfhe-2bit", 32, 1, 1024, 2.0 ** -30, 2.0 ** -50, (12, 2), (4, 6), 2, 2),
    "toy-tfhe-4bit": _lit("toy-tfhe-4bit", 32, 1, 1024, 2.0 ** -30, 2.0 ** -50, (12, 2), (4, 6), 4, 2),
    "toy-tfhe-4bit-mb2": _lit("toy-tfhe-4bit-mb2", 32, 1, 1024, 2.0 ** -30, 2.0 ** -50, (12, 2), (4, 6), 4, 2,
                              g=2),
    # ternary secrets (uniform in {-1, 0, 1}; the PBS runs 2n CMuxes): toy-tfhe-4bit's sizes
    "toy-tfhe-4bit-ternary": _lit("toy-tfhe-4bit-ternary", 32, 1, 1024, 2.0 ** -30, 2.0 ** -50, (12, 2), (4, 6),
                                  4, 2, secret_distribution="ternary"),
    # deliberately noisy key switch: a PBS fails with probability ~ 2^-4.4 (failure-rate experiments)
    "toy-tfhe-4bit-noisy": _lit("toy-tfhe-4bit-noisy", 32, 1, 1024, 2.0 ** -15.5, 2.0 ** -50, (12, 2), (4, 6),
                                4, 1, log2_p_fail_max=0.0),
}

# where each secure preset's values come from: repository, file, commit (the tfhe-rs versions the
# constant's name carries), the constant, and the p_fail the source states for it
CITATIONS = {
    "tfhe-2bit": dict(
        repository=_TFHE_RS, commit="59b5ec13b3b3659ff80f2b02629298071b66e489",
        file="tfhe/src/shortint/parameters/classic/p_fail_2_minus_128/ks_pbs.rs",
        constant="PARAM_MESSAGE_1_CARRY_1_KS_PBS_GAUSSIAN_2M128", cited_log2_p_fail=-128.979, cited_norm2=3,
        note="no published Gaussian 2-bit set with N >= 2^10 at 2^-64 was found; the 2^-128 set serves both"),
    "tfhe-2bit-p128": dict(
        repository=_TFHE_RS, commit="59b5ec13b3b3659ff80f2b02629298071b66e489",
        file="tfhe/src/shortint/parameters/classic/p_fail_2_minus_128/ks_pbs.rs",
        constant="PARAM_MESSAGE_1_CARRY_1_KS_PBS_GAUSSIAN_2M128", cited_log2_p_fail=-128.979, cited_norm2=3),
    "tfhe-4bit": dict(
        repository=_TFHE_RS, commit="6a00779d74052f0ec3d2da5916741655da63c47b",
        file="tfhe/src/shortint/parameters/v1_1/classic/gaussian/p_fail_2_minus_64/ks_pbs.rs",
        constant="V1_1_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M64", cited_log2_p_fail=-64.014, cited_norm2=5,
        note="the source's standard modulus switch; with the centered one the model gives about 2^-93"),
    "tfhe-4bit-p128": dict(
        repository=_TFHE_RS, commit="1feb4ca2f3733c3385d6c8d52f89e8f03e2a5182",
        file="tfhe/src/shortint/parameters/v1_4/classic/tuniform/p_fail_2_minus_128/ks_pbs.rs",
        constant="V1_4_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128", cited_log2_p_fail=-129.581, cited_norm2=5,
        note="the anchor's set (alias PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128); TUniform(45) and "
             "TUniform(17) at 2^64 as stds; its modulus switch is CenteredMeanNoiseReduction, as here"),
    "tfhe-4bit-mb4": dict(
        repository=_TFHE_RS, commit="dc9afe114694688acdc708fb519c67920989ac9d",
        file="tfhe/src/shortint/parameters/v1_1/multi_bit/gaussian/p_fail_2_minus_64/ks_pbs_gpu.rs",
        constant="V1_1_PARAM_GPU_MULTI_BIT_GROUP_4_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M64",
        cited_log2_p_fail=-64.733, cited_norm2=5),
    "tfhe-4bit-mb4-p128": dict(
        repository=_TFHE_RS, commit="10928ae48fc2d9def7a803645d831b7964446078",
        file="tfhe/src/shortint/parameters/v1_1/multi_bit/gaussian/p_fail_2_minus_128/ks_pbs_gpu.rs",
        constant="V1_1_PARAM_GPU_MULTI_BIT_GROUP_4_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M128",
        cited_log2_p_fail=-129.112, cited_norm2=5),
    "tfhe-6bit": dict(
        repository=_TFHE_RS, commit="6a00779d74052f0ec3d2da5916741655da63c47b",
        file="tfhe/src/shortint/parameters/v1_1/classic/gaussian/p_fail_2_minus_64/ks_pbs.rs",
        constant="V1_1_PARAM_MESSAGE_3_CARRY_3_KS_PBS_GAUSSIAN_2M64", cited_log2_p_fail=-64.177, cited_norm2=9,
        note="GLWE std floor kept absolute (2^-60 relative here)"),
    "tfhe-8bit": dict(
        repository=_TFHE_RS, commit="6a00779d74052f0ec3d2da5916741655da63c47b",
        file="tfhe/src/shortint/parameters/v1_1/classic/gaussian/p_fail_2_minus_64/ks_pbs.rs",
        constant="V1_1_PARAM_MESSAGE_4_CARRY_4_KS_PBS_GAUSSIAN_2M64", cited_log2_p_fail=-64.014, cited_norm2=17,
        note="N = 2^15: 8 bits at 2^-64 need 2N >~ 60000 for the modulus-switch noise alone; GLWE std floor "
             "kept absolute"),
    "tfhe-8bit-p128": dict(
        repository=_TFHE_RS, commit="df0b3f5e91c70914362d3ce9deba4cf8506fee87",
        file="tfhe/src/shortint/parameters/v1_4/classic/gaussian/p_fail_2_minus_128/pbs_ks.rs",
        constant="V1_4_PARAM_MESSAGE_4_CARRY_4_PBS_KS_GAUSSIAN_2M128", cited_log2_p_fail=-129.855, cited_norm2=17,
        note="N = 2^16, a PBS-KS set (its small LWE key has little noise, n = 1267) run here as KS-PBS with the "
             "same keys, so the cited p_fail is for the other order and this project's model gives its own; "
             "the switch's 10-bit LUT grid (docs/switching.md); GLWE std floor kept absolute"),
}

# the failure-probability target each preset is held to (tests check the model against it)
TARGET_LOG2_P_FAIL = {name: lit.log2_p_fail_max for name, lit in PRESETS.items()}


def params_of(literal: TFHEParamsLiteral, cache: dict) -> TFHEParams:
    """make_params of a preset's literal, once per name (toy presets warn at every use)."""
    return cached_params(literal, make_params, cache, "TFHE ")


_made: dict[str, TFHEParams] = {}


def preset(name: str) -> TFHEParams:
    """The named TFHE preset's TFHEParams (toy presets warn with InsecureParametersWarning).
    Raises ParameterError for a name that is not one of PRESETS."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ParameterError(f"preset: unknown TFHE preset {name!r}; available: {', '.join(PRESETS)}")
    return params_of(PRESETS[name], _made)


def presets() -> dict[str, dict]:
    """name -> plain info of every TFHE preset: n, N, k, grouping_factor, decomposition
    (pbs and ks base_log/level), bits (message + carry), message_bits, carry_bits,
    max_noise_level, modulus_switch_type, secret_distribution, security_bits (0 for toy), log2_p_fail (this project's model), the cited
    set and its stated p_fail (None for toys). Raises nothing; does not warn."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        for name in PRESETS:
            p = preset(name)
            cite = CITATIONS.get(name)
            out[name] = dict(
                n=p.lwe_dimension, N=p.polynomial_size, k=p.glwe_dimension, grouping_factor=p.grouping_factor,
                decomposition=dict(pbs_base_log=p.pbs_base_log, pbs_level=p.pbs_level, ks_base_log=p.ks_base_log,
                                   ks_level=p.ks_level),
                bits=p.bits, message_bits=p.message_bits, carry_bits=p.carry_bits,
                max_noise_level=p.max_noise_level, modulus_switch_type=p.modulus_switch_type,
                secret_distribution=p.secret_distribution, security_bits=p.security_bits, log2_p_fail=p.log2_p_fail,
                cited=None if cite is None else f"{cite['repository']} {cite['file']} {cite['constant']}",
                cited_log2_p_fail=None if cite is None else cite["cited_log2_p_fail"])
    return out
