"""TFHE parameters: a TFHEParamsLiteral (what a user or a preset chooses) validated into
TFHEParams by make_params, mirroring fhetorch/_ckks/params.py.

The modulus: q = q1 * q2, two NTT primes below 2^31 with q_i = 1 mod 2^17 (every ring size
2^10 .. 2^13 has its NTT), so the CKKS side's 32-bit Montgomery arithmetic, NTT and samplers
serve TFHE too and CPU and CUDA agree bit for bit. Noise is given as a standard deviation
relative to q (TFHE-rs's convention: std / q), so published parameter sets at q = 2^64
translate at the same relative noise.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TFHEParamsLiteral:
    """What a TFHE parameter set chooses; make_params validates it into TFHEParams.

    lwe_dimension    n, the LWE secret's length (the key-switched, bootstrapped side)
    glwe_dimension   k, polynomials in a GLWE secret
    polynomial_size  N, the GLWE ring degree (2^10 .. 2^13)
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
