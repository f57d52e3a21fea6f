"""Typed wrappers of the TFHE kernels (csrc/bind/schema.cpp, "tfhe_*") and their fake kernels.

Values mod q = q0 * q1 are int64 in [0, q); `moduli` is [q0, q1]. No TFHE semantics here
(no message, no padding): those live in fhetorch._tfhe.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

import fhetorch._C  # noqa: F401  (registers torch.ops.fhetorch)

_ops = torch.ops.fhetorch
_fake = torch.library.register_fake
Tensor = torch.Tensor

__all__ = ["tfhe_sample_int", "tfhe_modulus_switch", "tfhe_decompose", "tfhe_keyswitch", "tfhe_keyswitch_digits",
           "tfhe_keyswitch_combine", "tfhe_external_product", "tfhe_glwe_keyswitch", "tfhe_glwe_pack_step",
           "tfhe_blind_rotate", "tfhe_multi_bit_blind_rotate", "tfhe_fft", "tfhe_ifft", "tfhe_fft_product",
           "tfhe_torus_external_product", "tfhe_torus_cmux", "tfhe_fourier_blind_rotate",
           "tfhe_fourier_multi_bit_blind_rotate", "tfhe_fourier_key_bundle"]


def _m(moduli: Sequence[int]) -> list[int]:
    return [int(q) for q in moduli]


def tfhe_sample_int(key: Tensor, stream: int, n: int, lo: int, hi: int) -> Tensor:
    """(n,) int64 uniform in [lo, hi] from ChaCha20 (key (8,) int32, stream never reused)."""
    return _ops.tfhe_sample_int(key, int(stream), int(n), int(lo), int(hi))


@_fake("fhetorch::tfhe_sample_int")
def _(key, stream, n, lo, hi):
    return key.new_empty((n,), dtype=torch.int64)


def tfhe_modulus_switch(x: Tensor, moduli: Sequence[int], bits: int) -> Tensor:
    """round(x * 2^bits / q) mod 2^bits, element-wise."""
    return _ops.tfhe_modulus_switch(x, _m(moduli), int(bits))


@_fake("fhetorch::tfhe_modulus_switch")
def _(x, moduli, bits):
    return torch.empty_like(x)


def tfhe_decompose(x: Tensor, moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """(...) -> (..., level) balanced signed gadget digits, most significant first."""
    return _ops.tfhe_decompose(x, _m(moduli), int(base_log), int(level))


@_fake("fhetorch::tfhe_decompose")
def _(x, moduli, base_log, level):
    return x.new_empty((*x.shape, level))


def tfhe_keyswitch(ct: Tensor, keyswitch_key: Tensor, moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """LWE key switching (..., n_in + 1) -> (..., n_out + 1); keyswitch_key (n_in, level, 2, n_out + 1) int32."""
    return _ops.tfhe_keyswitch(ct, keyswitch_key, _m(moduli), int(base_log), int(level))


@_fake("fhetorch::tfhe_keyswitch")
def _(ct, keyswitch_key, moduli, base_log, level):
    return ct.new_empty((*ct.shape[:-1], keyswitch_key.shape[-1]))


# The key switch on int8 tensor cores (schema.cpp; fhetorch._tfhe.algorithms runs the three passes):
# digits, torch._int_mm by the key's byte planes, combine.
def tfhe_keyswitch_digits(ct: Tensor, moduli: Sequence[int], base_log: int, level: int, rows: int) -> Tensor:
    """(..., n_in + 1) -> (rows, K8) int8 gadget digits of the masks, row b = ciphertext b (rows >= the
    batch; the rest zero), column i level + j = digit j of mask i, K8 = n_in level rounded up to 8."""
    return _ops.tfhe_keyswitch_digits(ct, _m(moduli), int(base_log), int(level), int(rows))


@_fake("fhetorch::tfhe_keyswitch_digits")
def _(ct, moduli, base_log, level, rows):
    return ct.new_empty((rows, ((ct.shape[-1] - 1) * level + 7) // 8 * 8), dtype=torch.int8)


def tfhe_keyswitch_combine(sums: Tensor, ct: Tensor, moduli: Sequence[int]) -> Tensor:
    """sums (rows, 8 (n_out + 1)) int32 (digits x byte planes), ct (..., n_in + 1) -> the key-switched
    (..., n_out + 1) mod q: bodies minus the sums' residues."""
    return _ops.tfhe_keyswitch_combine(sums, ct, _m(moduli))


@_fake("fhetorch::tfhe_keyswitch_combine")
def _(sums, ct, moduli):
    return ct.new_empty((*ct.shape[:-1], sums.shape[1] // 8))


def tfhe_external_product(glwe: Tensor, ggsw: Tensor, psi: Tensor, psi_inv: Tensor, post: Tensor,
                          moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """GGSW (k+1, level, k+1, 2, N) x GLWE (..., k+1, N) -> (..., k+1, N)."""
    return _ops.tfhe_external_product(glwe, ggsw, psi, psi_inv, post, _m(moduli), int(base_log), int(level))


@_fake("fhetorch::tfhe_external_product")
def _(glwe, ggsw, psi, psi_inv, post, moduli, base_log, level):
    return torch.empty_like(glwe)


def tfhe_glwe_keyswitch(ct: Tensor, key: Tensor, psi: Tensor, psi_inv: Tensor, post: Tensor, moduli: Sequence[int],
                        base_log: int, level: int, galois: int = 1) -> Tensor:
    """GLWE (..., 2, N) -> the key switch of tau_galois(ct) by key (level, 2, 2, N), same shape."""
    return _ops.tfhe_glwe_keyswitch(ct, key, psi, psi_inv, post, _m(moduli), int(base_log), int(level), int(galois))


@_fake("fhetorch::tfhe_glwe_keyswitch")
def _(ct, key, psi, psi_inv, post, moduli, base_log, level, galois):
    return torch.empty_like(ct)


def tfhe_glwe_pack_step(x: Tensor, y: Tensor | None, key: Tensor, psi: Tensor, psi_inv: Tensor, post: Tensor,
                        moduli: Sequence[int], base_log: int, level: int, galois: int, shift: int,
                        lwe_scale: int | None = None) -> Tensor:
    """x + X^shift y + KS(tau_galois(x - X^shift y)) (y None: x + KS(tau_galois(x))), (..., 2, N); with
    lwe_scale, x and y are LWE (..., N + 1) read as lwe_scale * lwe_to_glwe(.) mod q."""
    return _ops.tfhe_glwe_pack_step(x, y, key, psi, psi_inv, post, _m(moduli), int(base_log), int(level),
                                    int(galois), int(shift), None if lwe_scale is None else int(lwe_scale))


@_fake("fhetorch::tfhe_glwe_pack_step")
def _(x, y, key, psi, psi_inv, post, moduli, base_log, level, galois, shift, lwe_scale=None):
    if lwe_scale is None:
        return torch.empty_like(x)
    return x.new_empty((*x.shape[:-1], 2, key.shape[-1]))


def tfhe_blind_rotate(ct: Tensor, luts: Tensor, lut_index: Tensor | None, bsk: Tensor, psi: Tensor, psi_inv: Tensor,
                      post: Tensor, moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """CMux-level batched blind rotation: LWE (..., n+1) -> accumulators (..., k+1, N)."""
    return _ops.tfhe_blind_rotate(ct, luts, lut_index, bsk, psi, psi_inv, post, _m(moduli), int(base_log),
                                  int(level))


@_fake("fhetorch::tfhe_blind_rotate")
def _(ct, luts, lut_index, bsk, psi, psi_inv, post, moduli, base_log, level):
    return ct.new_empty((*ct.shape[:-1], bsk.shape[1], luts.shape[-1]))


def tfhe_multi_bit_blind_rotate(ct: Tensor, luts: Tensor, lut_index: Tensor | None, bsk: Tensor, psi: Tensor,
                                psi_inv: Tensor, post: Tensor, mono_exp: Tensor, mono_pow: Tensor,
                                moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """Multi-bit blind rotation (one step per group of G key bits, bsk (n/G, 2^G, k+1, level, k+1,
    2, N)): LWE (..., n+1) -> accumulators (..., k+1, N)."""
    return _ops.tfhe_multi_bit_blind_rotate(ct, luts, lut_index, bsk, psi, psi_inv, post, mono_exp, mono_pow,
                                            _m(moduli), int(base_log), int(level))


@_fake("fhetorch::tfhe_multi_bit_blind_rotate")
def _(ct, luts, lut_index, bsk, psi, psi_inv, post, mono_exp, mono_pow, moduli, base_log, level):
    return ct.new_empty((*ct.shape[:-1], bsk.shape[2], luts.shape[-1]))


# ---- the ring product on the 2^64 torus by float64 FFT (int64 torus values, complex128 FFTs)
def tfhe_fft(x: Tensor, twiddles: Tensor) -> Tensor:
    """(..., N) int64 (signed, mod 2^64) -> (..., N/2) complex128, the folded negacyclic FFT;
    twiddles: fhetorch._tfhe.fft.fft_twiddles(log_n)."""
    return _ops.tfhe_fft(x, twiddles)


@_fake("fhetorch::tfhe_fft")
def _(x, twiddles):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2), dtype=torch.complex128)


def tfhe_ifft(x: Tensor, twiddles: Tensor) -> Tensor:
    """(..., N/2) complex128 -> (..., N) int64: the inverse of tfhe_fft, rounded mod 2^64."""
    return _ops.tfhe_ifft(x, twiddles)


@_fake("fhetorch::tfhe_ifft")
def _(x, twiddles):
    return x.new_empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=torch.int64)


def tfhe_fft_product(digits: Tensor, key: Tensor, twiddles: Tensor) -> Tensor:
    """digits (..., rows, N) int64 small integers, key (rows, cols, N/2) complex128 (tfhe_fft of
    torus polynomials) -> (..., cols, N) int64 = sum_r digits[r] * key[r, c] mod (X^N + 1, 2^64)."""
    return _ops.tfhe_fft_product(digits, key, twiddles)


@_fake("fhetorch::tfhe_fft_product")
def _(digits, key, twiddles):
    return digits.new_empty((*digits.shape[:-2], key.shape[1], digits.shape[-1]))


def tfhe_torus_external_product(glwe: Tensor, ggsw: Tensor, twiddles: Tensor, base_log: int, level: int) -> Tensor:
    """GGSW (k+1, level, k+1, N/2) complex128 (FFT form) x GLWE (..., k+1, N) int64 on the 2^64 torus."""
    return _ops.tfhe_torus_external_product(glwe, ggsw, twiddles, int(base_log), int(level))


@_fake("fhetorch::tfhe_torus_external_product")
def _(glwe, ggsw, twiddles, base_log, level):
    return torch.empty_like(glwe)


def tfhe_torus_cmux(c0: Tensor, c1: Tensor, ggsw: Tensor, twiddles: Tensor, base_log: int, level: int) -> Tensor:
    """c0 + GGSW x (c1 - c0) on the 2^64 torus (GLWE (..., k+1, N) int64; GGSW in FFT form)."""
    return _ops.tfhe_torus_cmux(c0, c1, ggsw, twiddles, int(base_log), int(level))


@_fake("fhetorch::tfhe_torus_cmux")
def _(c0, c1, ggsw, twiddles, base_log, level):
    return torch.empty_like(c1)


def tfhe_fourier_blind_rotate(ct: Tensor, luts: Tensor, lut_index: Tensor | None, bsk: Tensor, twiddles: Tensor,
                              moduli: Sequence[int], base_log: int, level: int) -> Tensor:
    """tfhe_blind_rotate's contract (mod q in and out) with a Fourier key bsk (n, k+1, level, k+1,
    N/2) complex128: the accumulator runs on the 2^64 torus, each CMux one float64 FFT product."""
    return _ops.tfhe_fourier_blind_rotate(ct, luts, lut_index, bsk, twiddles, _m(moduli), int(base_log), int(level))


@_fake("fhetorch::tfhe_fourier_blind_rotate")
def _(ct, luts, lut_index, bsk, twiddles, moduli, base_log, level):
    return ct.new_empty((*ct.shape[:-1], bsk.shape[1], luts.shape[-1]))


def tfhe_fourier_multi_bit_blind_rotate(ct: Tensor, luts: Tensor, lut_index: Tensor | None, bsk: Tensor,
                                        twiddles: Tensor, roots: Tensor, exponents: Tensor, moduli: Sequence[int],
                                        base_log: int, level: int) -> Tensor:
    """tfhe_multi_bit_blind_rotate's contract with a Fourier multi-bit key bsk (n / G, 2^G, k+1,
    level, k+1, N/2) complex128: per group, one float64 FFT product of the accumulator by the group's
    key bundle (tfhe_fourier_key_bundle); roots, exponents: TFHERing.fourier_monomial_tables()."""
    return _ops.tfhe_fourier_multi_bit_blind_rotate(ct, luts, lut_index, bsk, twiddles, roots, exponents, _m(moduli),
                                                    int(base_log), int(level))


@_fake("fhetorch::tfhe_fourier_multi_bit_blind_rotate")
def _(ct, luts, lut_index, bsk, twiddles, roots, exponents, moduli, base_log, level):
    return ct.new_empty((*ct.shape[:-1], bsk.shape[2], luts.shape[-1]))


def tfhe_fourier_key_bundle(ct: Tensor, bsk: Tensor, roots: Tensor, exponents: Tensor, moduli: Sequence[int],
                            base_log: int, level: int, group: int) -> Tensor:
    """The key bundle of group `group` for each ciphertext (..., n + 1): (..., k+1, level, k+1, N/2)
    complex128, sum over the group's subsets S of zeta^(e_k a_S) times the key's GGSW of f_S at slot
    k (the multi-bit rotation's product key, exactly as it computes it)."""
    return _ops.tfhe_fourier_key_bundle(ct, bsk, roots, exponents, _m(moduli), int(base_log), int(level), int(group))


@_fake("fhetorch::tfhe_fourier_key_bundle")
def _(ct, bsk, roots, exponents, moduli, base_log, level, group):
    return bsk.new_empty((*ct.shape[:-1], *bsk.shape[2:]))
