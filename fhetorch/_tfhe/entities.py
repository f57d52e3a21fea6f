"""TFHE entities: thin containers of tensors (TFHE-rs core_crypto's entities); the algorithms
that make and use them are functions in fhetorch._tfhe.algorithms.

LWE ciphertexts are plain int64 tensors (..., n + 1), values in [0, q), mask first, body last.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class LweSecretKey:
    """data (n,) int64: binary ({0, 1}) or ternary ({-1, 0, 1}) as `distribution` says."""
    data: torch.Tensor
    distribution: str = "binary"

    @property
    def dimension(self) -> int:
        return self.data.shape[-1]


@dataclass(frozen=True)
class GlweSecretKey:
    """data (k, N) int64 polynomials, binary or ternary coefficients as `distribution` says."""
    data: torch.Tensor
    distribution: str = "binary"

    def as_lwe_key(self) -> LweSecretKey:
        """The extracted LWE key (k N,): the key of sample extraction's output."""
        return LweSecretKey(self.data.reshape(-1), self.distribution)


@dataclass(frozen=True)
class LweKeyswitchKey:
    """data (n_in, level, 2, n_out + 1) int32 residues mod (q0, q1): LWE encryptions under the
    output key of s_in[i] * G_j.

    byte_planes: derived, not part of the key: the int8 matrix of the key switch on tensor cores
    (algorithms.keyswitch_byte_planes), built on first use on data's device and kept here. Never
    saved or pickled (serialization writes `data`), not compared, not copied by
    dataclasses.replace (a key moved to another device builds its own)."""
    data: torch.Tensor
    base_log: int
    level: int
    byte_planes: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self):
        """Pickles and copies hold the key alone, as before byte_planes existed (rebuilt on use)."""
        return {**self.__dict__, "byte_planes": None}

    @property
    def input_dimension(self) -> int:
        return self.data.shape[0]

    @property
    def output_dimension(self) -> int:
        return self.data.shape[-1] - 1


@dataclass(frozen=True)
class _BitwiseBootstrapKey:
    """What the classical bootstrapping keys share: one GGSW per key bit (2n for a ternary secret:
    the bits (s+_0, s-_0, s+_1, s-_1, ...), s+_i = [s_i = 1], s-_i = [s_i = -1], algorithms.
    split_ternary_secret; the blind rotation extends each ciphertext's mask to match,
    algorithms.extend_lwe_mask)."""
    data: torch.Tensor
    base_log: int
    level: int
    ternary: bool = False

    @property
    def input_dimension(self) -> int:
        """n, the LWE dimension the key bootstraps (its GGSW count is 2n for a ternary key)."""
        return self.data.shape[0] // 2 if self.ternary else self.data.shape[0]


@dataclass(frozen=True)
class LweBootstrapKey(_BitwiseBootstrapKey):
    """data (n, k + 1, level, k + 1, 2, N) int32: GGSW encryptions of each LWE key bit, NTT form
    over (q0, q1), Montgomery (ternary: 2n GGSWs, _BitwiseBootstrapKey)."""


@dataclass(frozen=True)
class FourierLweBootstrapKey(_BitwiseBootstrapKey):
    """data (n, k + 1, level, k + 1, N/2) complex128: the tfhe_fft of GGSW encryptions on the 2^64
    torus (gadget 2^(64 - base_log (j + 1))) of each LWE key bit (TFHE-rs's Fourier bootstrapping
    key). The blind rotation runs its accumulator on the torus with it; its inputs and outputs
    stay mod q (ternary: 2n GGSWs, _BitwiseBootstrapKey)."""


@dataclass(frozen=True)
class LweMultiBitBootstrapKey:
    """data (n / G, 2^G, k + 1, level, k + 1, 2, N) int32, G = grouping_factor: for every group
    j of G key bits s_(Gj+u) and every subset S of them (bit u of S: key bit Gj + u), the GGSW
    encryption (NTT form over (q0, q1), Montgomery) of f_S = prod_(u in S) s_(Gj+u)
    prod_(u not in S) (1 - s_(Gj+u)), one of which is 1. (TFHE-rs's multi-bit key holds the
    same subsets; the blind rotation sums them into one key bundle per group.)"""
    data: torch.Tensor
    base_log: int
    level: int
    grouping_factor: int

    @property
    def input_dimension(self) -> int:
        return self.data.shape[0] * self.grouping_factor


@dataclass(frozen=True)
class FourierLweMultiBitBootstrapKey(LweMultiBitBootstrapKey):
    """data (n / G, 2^G, k + 1, level, k + 1, N/2) complex128: LweMultiBitBootstrapKey's GGSWs of
    the subset indicators f_S encrypted on the 2^64 torus and kept as their tfhe_fft (as
    FourierLweBootstrapKey's). The blind rotation sums each group's bundle in FFT form, a monomial
    X^a being a pointwise factor there (TFHE-rs's multi-bit PBS on its Fourier key)."""


@dataclass(frozen=True)
class GlweKeyswitchKey:
    """data (level, 2, 2, N) int32, NTT form over (q0, q1), Montgomery: row j is a GLWE (k = 1)
    encryption (A_j, B_j) under the output key of G_j * s_in, s_in the input polynomial key."""
    data: torch.Tensor
    base_log: int
    level: int

    @property
    def polynomial_size(self) -> int:
        return self.data.shape[-1]
