"""TFHE algorithms, verb_object as TFHE-rs core_crypto names them: key generation, LWE/GLWE
encryption, key switching, modulus switching, gadget decomposition, external product, CMux,
blind rotation, sample extraction and the programmable bootstrap. Inputs explicit; every
function takes any leading batch dimensions. The math: docs/tfhe.md.
"""
from __future__ import annotations

import os

import torch

from .. import _ops
from .._ring import Sampler
from ..errors import ParameterError
from .entities import (FourierLweBootstrapKey, FourierLweMultiBitBootstrapKey, GlweSecretKey, LweBootstrapKey,
                       LweKeyswitchKey, LweMultiBitBootstrapKey, LweSecretKey)
from .modular import Modulus
from .ring import TFHERing


def gadget(q: int, base_log: int, level: int) -> list[int]:
    """G_j = round(q / B^(j+1)), j = 0 .. level - 1 (B = 2^base_log)."""
    return [(q + (1 << (base_log * (j + 1) - 1))) // (1 << (base_log * (j + 1))) for j in range(level)]


def _uniform_mod_q(sampler: Sampler, ring: TFHERing, shape) -> torch.Tensor:
    """Uniform int64 in [0, q) of `shape`: one uniform residue per prime, joined by CRT."""
    n = shape[-1]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    r = sampler.uniform(ring.ring.basis(), rows, n).to(torch.int64)
    return ring.modulus.compose(r[:, 0], r[:, 1]).view(*shape)


# --- keys ------------------------------------------------------------------------------------

def sample_secret(sampler: Sampler, count: int, distribution: str = "binary") -> torch.Tensor:
    """(count,) int64 secret coefficients from the ChaCha20 sampler, uniform in {0, 1} ("binary")
    or {-1, 0, 1} ("ternary"), without modulo bias (Sampler.uniform_int). Raises ParameterError
    for another distribution."""
    if distribution == "binary":
        return sampler.binary(count)
    if distribution == "ternary":
        return sampler.uniform_int(count, -1, 1)
    raise ParameterError(f"sample_secret: the secret distribution must be 'binary' or 'ternary', got "
                         f"{distribution!r}")


def generate_lwe_secret_key(sampler: Sampler, n: int, distribution: str = "binary") -> LweSecretKey:
    """A uniform binary or ternary LWE secret of dimension n. Raises ParameterError for another
    distribution."""
    return LweSecretKey(sample_secret(sampler, n, distribution), distribution)


def generate_glwe_secret_key(sampler: Sampler, k: int, big_n: int, distribution: str = "binary") -> GlweSecretKey:
    """A GLWE secret of k polynomials of degree < N, uniform binary or ternary coefficients.
    Raises ParameterError for another distribution."""
    return GlweSecretKey(sample_secret(sampler, k * big_n, distribution).view(k, big_n), distribution)


def split_ternary_secret(lwe_key: LweSecretKey) -> torch.Tensor:
    """The 2n bits (s+_0, s-_0, s+_1, s-_1, ...) of a secret s in {-1, 0, 1}^n, s+_i = [s_i = 1],
    s-_i = [s_i = -1], so s_i = s+_i - s-_i: what a ternary key's bootstrapping key encrypts
    (its blind rotation is one CMux per bit). (2n,) int64. Raises nothing."""
    s = lwe_key.data
    return torch.stack(((s == 1), (s == -1)), -1).reshape(-1).to(torch.int64)


def extend_lwe_mask(ct: torch.Tensor, modulus: Modulus) -> torch.Tensor:
    """(..., n + 1) mod q -> (..., 2n + 1): the mask (a_0, -a_0, a_1, -a_1, ...) mod q and the
    same body, so <a_ext, split_ternary_secret(s)> = <a, s> mod q: the ciphertext a ternary key's
    bootstrapping key rotates by. The modulus switch commutes with it exactly: round(2N (q - a) /
    q) = 2N - round(2N a / q) for every a in (0, q), as q is odd and 2N a / q never a tie
    (docs/tfhe.md, "Ternary secrets"). Raises nothing."""
    a = ct[..., :-1]
    ext = torch.stack((a, modulus.neg(a)), -1).flatten(-2)
    return torch.cat((ext, ct[..., -1:]), -1)


def generate_lwe_keyswitch_key(sampler: Sampler, ring: TFHERing, input_key: LweSecretKey, output_key: LweSecretKey,
                               base_log: int, level: int, noise_width: int) -> LweKeyswitchKey:
    """LWE encryptions under output_key of input_key[i] * G_j, stored as residues."""
    n_in, n_out = input_key.dimension, output_key.dimension
    rows = n_in * level
    a = sampler.uniform(ring.ring.basis(), rows, n_out).to(torch.int64)  # (rows, 2, n_out)
    q = torch.tensor(ring.moduli, dtype=torch.int64, device=a.device)
    dot = (a * output_key.data).sum(-1) % q  # (rows, 2)
    e = sampler.irwin_hall(rows, noise_width)
    g = torch.tensor(gadget(ring.modulus.q, base_log, level), dtype=torch.int64, device=a.device)
    msg = (input_key.data.view(n_in, 1) * g.view(1, level)).reshape(rows)  # |s| <= 1: no overflow
    b = (dot + e.view(rows, 1) % q + msg.view(rows, 1) % q) % q
    data = torch.cat((a, b.unsqueeze(-1)), -1).to(torch.int32).view(n_in, level, 2, n_out + 1)
    return LweKeyswitchKey(data.contiguous(), base_log, level)


def encrypt_ggsw_ciphertext(sampler: Sampler, ring: TFHERing, key: GlweSecretKey, mu: torch.Tensor, base_log: int,
                            level: int, noise_width: int) -> torch.Tensor:
    """GGSW encryptions of the small integers mu (M,): (M, k+1, level, k+1, 2, N) int32, NTT
    form, Montgomery; row (p, j) = GLWE encryption of zero + mu * G_j on component p."""
    k, big_n = key.data.shape
    k1, m = k + 1, mu.shape[0]
    rows = m * k1 * level
    a = sampler.uniform(ring.ring.basis(), rows * k, big_n).view(m, k1, level, k, 2, big_n)  # NTT domain
    s = ring.to_montgomery(ring.to_ntt(key.data))  # (k, 2, N)
    body = ring.sum_residues(ring.mul(a, s), 3)  # (m, k1, level, 2, N)
    e = ring.to_ntt(sampler.irwin_hall(rows * big_n, noise_width).view(m, k1, level, big_n))
    body = ring.sum_residues(torch.stack((body, e), 0), 0)
    x = torch.cat((a, body.unsqueeze(3)), 3).to(torch.int64)  # (m, k1, level, k1, 2, N)
    q = torch.tensor(ring.moduli, dtype=torch.int64, device=x.device).view(2, 1)
    g = torch.tensor(gadget(ring.modulus.q, base_log, level), dtype=torch.int64, device=x.device)
    mg = mu.to(torch.int64).view(m, 1) * g.view(1, level)  # |mu| small
    add = torch.remainder(mg.unsqueeze(-1).unsqueeze(-1), q)  # (m, level, 2, 1): a constant is constant in NTT form
    for p in range(k1):
        x[:, p, :, p] = (x[:, p, :, p] + add) % q
    return ring.to_montgomery(x.to(torch.int32))


def bootstrap_key_bits(lwe_key: LweSecretKey) -> tuple[torch.Tensor, bool]:
    """(the bits a bootstrapping key encrypts, whether the key is ternary): lwe_key's own bits
    (binary), or the 2n bits of split_ternary_secret (ternary). Raises nothing."""
    if lwe_key.distribution == "ternary":
        return split_ternary_secret(lwe_key), True
    return lwe_key.data, False


def generate_lwe_bootstrap_key(sampler: Sampler, ring: TFHERing, lwe_key: LweSecretKey, glwe_key: GlweSecretKey,
                               base_log: int, level: int, noise_width: int) -> LweBootstrapKey:
    """GGSW encryptions under glwe_key of every bit of lwe_key (a ternary key: of its 2n split
    bits, bootstrap_key_bits). Raises nothing."""
    bits, ternary = bootstrap_key_bits(lwe_key)
    data = encrypt_ggsw_ciphertext(sampler, ring, glwe_key, bits, base_log, level, noise_width)
    return LweBootstrapKey(data.contiguous(), base_log, level, ternary)


def uniform_torus(sampler: Sampler, shape) -> torch.Tensor:
    """Uniform int64 (every value of the 2^64 torus) of `shape`: a signed high half times 2^32 plus
    an unsigned low half, each uniform (no overflow in forming it)."""
    count = 1
    for s in shape:
        count *= s
    lo = sampler.uniform_int(count, 0, (1 << 32) - 1)
    hi = sampler.uniform_int(count, -(1 << 31), (1 << 31) - 1)
    return (hi * (1 << 32) + lo).view(*shape)


def torus_poly_mul_key(ring: TFHERing, a: torch.Tensor, key: GlweSecretKey) -> torch.Tensor:
    """sum_p a_p * S_p in Z_{2^64}[X]/(X^N + 1), exactly: a (..., k, N) int64 torus polynomials,
    S binary or ternary -> (..., N). Each a_p is cut into four 16-bit limbs; a limb's product with
    a key of |s| <= 1 is an integer of magnitude below k N 2^16 <= 2^34 that one float64 FFT product gives exactly (its
    rounding error is below 2^-10, tfhe.md); the limbs are joined mod 2^64."""
    k, big_n = key.data.shape
    tw = ring.twiddles
    key_fft = _ops.tfhe_fft(key.data.to(torch.int64).contiguous(), tw).view(k, 1, big_n // 2)
    limbs = torch.stack([(a >> (16 * j)) & 0xFFFF for j in range(4)], -3)  # (..., 4, k, N)
    prod = _ops.tfhe_fft_product(limbs.contiguous(), key_fft, tw)[..., 0, :]  # (..., 4, N)
    out = prod[..., 0, :]
    for j in range(1, 4):
        out = out + (prod[..., j, :] << (16 * j))  # int64 arithmetic wraps: mod 2^64
    return out


def torus_gadget(base_log: int, level: int) -> list[int]:
    """g_j = 2^(64 - base_log (j + 1)) as signed int64 torus values, j = 0 .. level - 1."""
    return [((1 << (64 - base_log * (j + 1))) + (1 << 63)) % (1 << 64) - (1 << 63) for j in range(level)]


def encrypt_fourier_ggsw_ciphertext(sampler: Sampler, ring: TFHERing, key: GlweSecretKey, mu: torch.Tensor,
                                    base_log: int, level: int, noise_width: int) -> torch.Tensor:
    """GGSW encryptions on the 2^64 torus of the bits mu (M,), in FFT form: (M, k+1, level, k+1,
    N/2) complex128; row (p, j) = the tfhe_fft of a GLWE encryption of zero (masks uniform on the
    torus, body sum_p A_p S_p + E, E of sampler width noise_width) plus mu g_j on component p."""
    k, big_n = key.data.shape
    k1, m = k + 1, mu.shape[0]
    rows = m * k1 * level
    a = uniform_torus(sampler, (rows, k, big_n))
    e = sampler.irwin_hall(rows * big_n, noise_width).view(rows, big_n)
    body = torus_poly_mul_key(ring, a, key) + e
    x = torch.cat((a, body.unsqueeze(1)), 1).view(m, k1, level, k1, big_n)
    g = torch.tensor(torus_gadget(base_log, level), dtype=torch.int64, device=x.device)
    mg = mu.to(torch.int64).view(m, 1) * g.view(1, level)  # mu in {0, 1}: no overflow
    for p in range(k1):
        x[:, p, :, p, 0] = x[:, p, :, p, 0] + mg  # the constant mu g_j: coefficient 0
    return _ops.tfhe_fft(x.contiguous(), ring.twiddles)


def generate_fourier_bootstrap_key(sampler: Sampler, ring: TFHERing, lwe_key: LweSecretKey, glwe_key: GlweSecretKey,
                                   base_log: int, level: int, noise_width: int) -> FourierLweBootstrapKey:
    """The Fourier bootstrapping key: GGSW encryptions on the torus, FFT form, of every bit of
    lwe_key under glwe_key (noise_width: the sampler width at 2^64). Made in slabs of key bits
    (a tfhe-8bit key is 3.5 GB). A ternary lwe_key: its 2n split bits (bootstrap_key_bits).
    Raises nothing."""
    bits, ternary = bootstrap_key_bits(lwe_key)
    data = _encrypt_fourier_ggsws_in_slabs(sampler, ring, glwe_key, bits, base_log, level, noise_width)
    return FourierLweBootstrapKey(data, base_log, level, ternary)


def _encrypt_fourier_ggsws_in_slabs(sampler: Sampler, ring: TFHERing, glwe_key: GlweSecretKey, mu: torch.Tensor,
                                    base_log: int, level: int, noise_width: int) -> torch.Tensor:
    """encrypt_fourier_ggsw_ciphertext of the bits mu (M,), made in slabs of about 1 GiB of int64 work
    tensors (a tfhe-8bit key is 3.5 GB): (M, k+1, level, k+1, N/2) complex128, contiguous."""
    k, big_n = glwe_key.data.shape
    per_ggsw = (k + 1) * level * (k + 1) * big_n * 8 * 6  # bytes of one GGSW's int64 work tensors
    step = max(1, (1 << 30) // per_ggsw)
    parts = [encrypt_fourier_ggsw_ciphertext(sampler, ring, glwe_key, mu[i: i + step], base_log, level, noise_width)
             for i in range(0, mu.shape[0], step)]
    return torch.cat(parts, 0).contiguous()


def subset_indicators(lwe_key: LweSecretKey, grouping_factor: int) -> torch.Tensor:
    """(n / G, 2^G) int64: f_S = prod_(u in S) s_(Gj+u) prod_(u not in S) (1 - s_(Gj+u)) of group j
    and subset S (bit u of S: key bit Gj + u); one per row is 1 (binary keys). Raises
    ParameterError for a ternary key (the multi-bit PBS is binary only)."""
    if lwe_key.distribution != "binary":
        raise ParameterError("subset_indicators: the multi-bit PBS needs a binary LWE secret; use "
                             "grouping_factor=1 for a ternary one")
    s = lwe_key.data.view(-1, grouping_factor, 1)  # (groups, G, 1)
    subsets = torch.arange(1 << grouping_factor, device=s.device)
    bits = (subsets.view(1, -1) >> torch.arange(grouping_factor, device=s.device).view(-1, 1)) & 1  # (G, 2^G)
    return torch.where(bits.bool(), s, 1 - s).prod(1)


def generate_lwe_multi_bit_bootstrap_key(sampler: Sampler, ring: TFHERing, lwe_key: LweSecretKey,
                                         glwe_key: GlweSecretKey, base_log: int, level: int, noise_width: int,
                                         grouping_factor: int) -> LweMultiBitBootstrapKey:
    """GGSW encryptions under glwe_key of f_S for every group of grouping_factor bits of lwe_key
    and every subset S of the group (subset_indicators). Raises ParameterError for a ternary
    lwe_key (make_params refuses that pair, and checks that the grouping factor divides n)."""
    f = subset_indicators(lwe_key, grouping_factor)
    data = encrypt_ggsw_ciphertext(sampler, ring, glwe_key, f.reshape(-1), base_log, level, noise_width)
    return LweMultiBitBootstrapKey(data.view(*f.shape, *data.shape[1:]).contiguous(), base_log, level,
                                   grouping_factor)


def generate_fourier_multi_bit_bootstrap_key(sampler: Sampler, ring: TFHERing, lwe_key: LweSecretKey,
                                             glwe_key: GlweSecretKey, base_log: int, level: int, noise_width: int,
                                             grouping_factor: int) -> FourierLweMultiBitBootstrapKey:
    """generate_lwe_multi_bit_bootstrap_key's GGSWs of the subset indicators, encrypted on the 2^64
    torus and kept in FFT form (encrypt_fourier_ggsw_ciphertext; noise_width at 2^64), made in slabs.
    Raises ParameterError for a ternary lwe_key."""
    f = subset_indicators(lwe_key, grouping_factor).reshape(-1)
    data = _encrypt_fourier_ggsws_in_slabs(sampler, ring, glwe_key, f, base_log, level, noise_width)
    return FourierLweMultiBitBootstrapKey(data.view(-1, 1 << grouping_factor, *data.shape[1:]), base_log, level,
                                          grouping_factor)


# --- LWE / GLWE encryption ---------------------------------------------------------------------

def encrypt_lwe_ciphertext(sampler: Sampler, ring: TFHERing, key: LweSecretKey, plaintext: torch.Tensor,
                           noise_width: int) -> torch.Tensor:
    """plaintext (...) int64 in [0, q) -> (..., n + 1): a uniform, b = <a, s> + e + plaintext."""
    mq = ring.modulus
    shape = tuple(plaintext.shape)
    a = _uniform_mod_q(sampler, ring, (*shape, key.dimension) if shape else (1, key.dimension))
    a = a.view(*shape, key.dimension)
    e = sampler.irwin_hall(max(1, plaintext.numel()), noise_width)[: plaintext.numel()].view(shape)
    b = mq.add(mq.add(mq.dot_small(a, key.data), mq.reduce(e)), plaintext)
    return torch.cat((a, b.unsqueeze(-1)), -1)


def decrypt_lwe_ciphertext(modulus: Modulus, key: LweSecretKey, ct: torch.Tensor) -> torch.Tensor:
    """The phase b - <a, s> in [0, q), (...)."""
    return modulus.sub(ct[..., -1], modulus.dot_small(ct[..., :-1], key.data))


def trivial_lwe_ciphertext(plaintext: torch.Tensor, dimension: int) -> torch.Tensor:
    """(0, ..., 0, plaintext): no secret, no noise."""
    z = torch.zeros((*plaintext.shape, dimension), dtype=torch.int64, device=plaintext.device)
    return torch.cat((z, plaintext.unsqueeze(-1).to(torch.int64)), -1)


def _poly_mul_key(ring: TFHERing, a: torch.Tensor, key: GlweSecretKey) -> torch.Tensor:
    """sum_p a_p * S_p in Z_q[X]/(X^N + 1): a (..., k, N) int64 -> (..., N) in [0, q)."""
    s = ring.to_montgomery(ring.to_ntt(key.data))
    prod = ring.sum_residues(ring.mul(ring.to_ntt(a), s), -3)  # (..., 2, N)
    r = _ops.intt(prod.contiguous(), ring.mod, ring.psi_inv, ring.post).to(torch.int64)
    return ring.modulus.compose(r[..., 0, :], r[..., 1, :])


def encrypt_glwe_ciphertext(sampler: Sampler, ring: TFHERing, key: GlweSecretKey, plaintext: torch.Tensor,
                            noise_width: int) -> torch.Tensor:
    """plaintext (..., N) in [0, q) -> (..., k + 1, N): masks uniform, body = sum A_p S_p + E + plaintext."""
    k, big_n = key.data.shape
    shape = tuple(plaintext.shape[:-1])
    a = _uniform_mod_q(sampler, ring, (*shape, k, big_n) if shape else (k, big_n)).view(*shape, k, big_n)
    e = sampler.irwin_hall(plaintext.numel(), noise_width).view(plaintext.shape)
    mq = ring.modulus
    b = mq.add(mq.add(_poly_mul_key(ring, a, key), mq.reduce(e)), plaintext)
    return torch.cat((a, b.unsqueeze(-2)), -2)


def decrypt_glwe_ciphertext(ring: TFHERing, key: GlweSecretKey, ct: torch.Tensor) -> torch.Tensor:
    """The phase B - sum A_p S_p, (..., N) in [0, q)."""
    return ring.modulus.sub(ct[..., -1, :], _poly_mul_key(ring, ct[..., :-1, :], key))


# --- the bootstrap's steps ------------------------------------------------------------------------

# The LWE key switch runs one of two exact kernels with the same output bit for bit (docs/tfhe.md, "Key
# switch" and "Key switch on int8 tensor cores"): "gemm", the int64 GEMM of csrc/tfhe.h (op
# tfhe_keyswitch), or "tensor", int8 digits times the key's byte planes by torch._int_mm (tensor cores
# on CUDA) between two element-wise ops. FHETORCH_TFHE_KEYSWITCH=gemm|tensor sets the default (read
# once, here); unset: "tensor" wherever its int32 sums cannot overflow, except CUDA batches of at most
# KEYSWITCH_GEMM_BATCH ciphertexts, which take "gemm": its kernel for a few ciphertexts reads the key
# once with coalesced loads (H100, tfhe-4bit-mb4-p128 at batch 1: 0.07 against 0.09 ms in a graph; at
# batch 4 the tensor path was faster, 83 against 91 us).
KEYSWITCH_METHODS = ("tensor", "gemm")
KEYSWITCH_METHOD_SET = "FHETORCH_TFHE_KEYSWITCH" in os.environ
KEYSWITCH_METHOD = os.environ.get("FHETORCH_TFHE_KEYSWITCH", "tensor")
KEYSWITCH_GEMM_BATCH = 1  # at most csrc/cuda/tfhe_keyswitch.cu's kKsSmallBatch (4)
# The tensor key switch runs a batch in chunks whose int32 sums (rows, 8 (n_out + 1)) stay below this.
KEYSWITCH_SUMS_BYTES = 256 << 20
_INT8_MAX_BASE_LOG = 8  # balanced digits in [-2^(base_log-1), 2^(base_log-1)) fit int8
# torch._int_mm on CUDA wants more than 16 rows; the digits op pads small chunks with zero rows to 32
# (cuBLAS's int8 kernels had wrong results at 17 rows in one CUDA release, pytorch issue 107671)
INT_MM_MIN_ROWS = 32


def keyswitch_sum_bound(keyswitch_key: LweKeyswitchKey) -> int:
    """The largest magnitude an int32 sum of the tensor key switch can reach: digits of magnitude at
    most 2^(base_log - 1) times signed key bytes of magnitude at most 128, n_in level terms. Raises
    nothing."""
    k = keyswitch_key
    return (1 << (k.base_log - 1)) * 128 * k.input_dimension * k.level


def keyswitch_method(keyswitch_key: LweKeyswitchKey, method: str | None = None) -> str:
    """The kernel keyswitch_lwe_ciphertext runs for this key: "tensor" where asked (method, else
    FHETORCH_TFHE_KEYSWITCH, else "tensor") and allowed (base_log <= 8 and keyswitch_sum_bound below
    2^31: the int32 sums are exact), else "gemm". Raises ParameterError for a method other than
    "tensor" and "gemm"."""
    chosen = KEYSWITCH_METHOD if method is None else method
    if chosen not in KEYSWITCH_METHODS:
        origin = "FHETORCH_TFHE_KEYSWITCH" if method is None else "method"
        raise ParameterError(f"keyswitch_lwe_ciphertext: {origin} must be 'tensor' or 'gemm', got {chosen!r}")
    fits = keyswitch_key.base_log <= _INT8_MAX_BASE_LOG and keyswitch_sum_bound(keyswitch_key) < 1 << 31
    return "tensor" if chosen == "tensor" and fits else "gemm"


def keyswitch_byte_planes(keyswitch_key: LweKeyswitchKey, modulus: Modulus) -> torch.Tensor:
    """The key as the int8 matrix of the tensor key switch, (8 (n_out + 1), K8) on the key's device,
    K8 = n_in level rounded up to a multiple of 8 (zero columns), torch._int_mm's operand as its
    transpose (the layout cuBLAS's int8 GEMM takes, both operands K-major). Each residue of row t = i
    level + j, prime l, coefficient c, centred to (-q_l/2, q_l/2] (|r| < 2^30), is written in four
    signed bytes r = sum_b 2^(8b) W[8 c + 4 l + b, t], each in [-128, 127] (exact). Built once, in
    slabs of coefficients, and kept on the key (LweKeyswitchKey.byte_planes; never saved). Raises
    nothing."""
    k = keyswitch_key
    if k.byte_planes is not None:
        return k.byte_planes
    n_in, level, _, w = k.data.shape
    rows = n_in * level
    data = k.data.view(rows, 2, w).permute(2, 1, 0)  # (w, 2, rows): coefficient-major, as the planes
    planes = torch.zeros(8 * w, (rows + 7) // 8 * 8, dtype=torch.int8, device=data.device)
    step = max(1, (16 << 20) // (2 * rows))  # coefficients per slab: int32 temporaries of ~64 MiB
    for c0 in range(0, w, step):
        x = data[c0:c0 + step].contiguous()
        r = torch.stack([torch.where(x[:, i] > q // 2, x[:, i] - q, x[:, i])  # centred residues
                         for i, q in enumerate(modulus.moduli)], 1)
        parts = []
        for _ in range(4):
            b = ((r + 128) & 255) - 128  # the balanced low byte
            parts.append(b.to(torch.int8))
            r = (r - b) >> 8  # exact: r - b is a multiple of 256
        planes[8 * c0:8 * (c0 + x.shape[0]), :rows] = torch.stack(parts, 2).view(8 * x.shape[0], rows)
    object.__setattr__(k, "byte_planes", planes)  # a derived cache on the frozen key
    return planes


def _keyswitch_on_tensor_cores(k: LweKeyswitchKey, ct: torch.Tensor, modulus: Modulus) -> torch.Tensor:
    """The "tensor" key switch of ct (..., n_in + 1): per chunk of ciphertexts the digits (int8),
    torch._int_mm by the byte planes (int32 sums), the combine (bodies minus the sums mod q)."""
    planes = keyswitch_byte_planes(k, modulus)
    w = planes.shape[0] // 8
    lead = ct.shape[:-1]
    x = ct.reshape(-1, ct.shape[-1])
    batch = x.shape[0]
    if batch == 0:
        return ct.new_empty((*lead, w))
    per_chunk = max(1, KEYSWITCH_SUMS_BYTES // (4 * planes.shape[0]))  # ciphertexts whose sums fit the budget
    chunks = (batch + per_chunk - 1) // per_chunk  # of sizes differing by one at most
    min_rows = INT_MM_MIN_ROWS if x.is_cuda else 1
    outs = []
    for i in range(chunks):  # a chunk's digits and sums are freed before the next chunk's are made
        part = x[i * batch // chunks:(i + 1) * batch // chunks]
        digits = _ops.tfhe_keyswitch_digits(part, modulus.moduli, k.base_log, k.level, max(part.shape[0], min_rows))
        outs.append(_ops.tfhe_keyswitch_combine(torch._int_mm(digits, planes.t()), part, modulus.moduli))
        del digits
    return (outs[0] if len(outs) == 1 else torch.cat(outs)).view(*lead, w)


def keyswitch_lwe_ciphertext(keyswitch_key: LweKeyswitchKey, ct: torch.Tensor, modulus: Modulus, *,
                             method: str | None = None) -> torch.Tensor:
    """(..., n_in + 1) under the input key -> (..., n_out + 1) under the output key. method: "tensor"
    (int8 tensor cores where the key allows, keyswitch_method) or "gemm" (the int64 GEMM kernel);
    None: FHETORCH_TFHE_KEYSWITCH, else "gemm" for CUDA batches of at most KEYSWITCH_GEMM_BATCH and
    "tensor" above. Both give the same output bit for bit. Raises
    ParameterError for ciphertexts of another dimension than the key's or an unknown method."""
    if ct.shape[-1] != keyswitch_key.input_dimension + 1:
        raise ParameterError(f"keyswitch_lwe_ciphertext: ciphertexts of dimension {ct.shape[-1] - 1}, "
                             f"key from dimension {keyswitch_key.input_dimension}")
    k = keyswitch_key
    if method is None and not KEYSWITCH_METHOD_SET and ct.is_cuda and ct[..., 0].numel() <= KEYSWITCH_GEMM_BATCH:
        method = "gemm"
    if keyswitch_method(k, method) == "tensor":
        return _keyswitch_on_tensor_cores(k, ct.contiguous(), modulus)
    return _ops.tfhe_keyswitch(ct.contiguous(), k.data, modulus.moduli, k.base_log, k.level)


def modulus_switch(x: torch.Tensor, modulus: Modulus, log_modulus: int) -> torch.Tensor:
    """round(x * 2^log_modulus / q) mod 2^log_modulus (the PBS uses log_modulus = log2 2N)."""
    return _ops.tfhe_modulus_switch(x.contiguous(), modulus.moduli, log_modulus)


def center_modulus_switch(ct: torch.Tensor, modulus: Modulus, log_modulus: int,
                          secret_distribution: str = "binary") -> torch.Tensor:
    """The centered modulus switch's body correction (TFHE-rs's CenteredMeanNoiseReduction):
    (..., n + 1) -> the same masks, body + round(E[s] sum_i t_i) - round(q / 2^(log_modulus + 1))
    mod q, with t_i = round(a~_i q / 2^log_modulus) - a_i (centred mod q) the known rounding of
    each mask coefficient, a~_i = modulus_switch(a_i). Switched afterwards (the blind rotation),
    the phase's rounding error is e_b - sum_i (s_i - E[s]) e_i and lies centred in its
    test-polynomial window (noise.modulus_switch_variance, noise.window_offset). Exact int64:
    with 2N = 2^log_modulus and q = Q0 2N + R, round(a~ q / 2N) = a~ Q0 + floor((a~ R + N) / 2N),
    |t_i| <= q / 4N + 1, and make_params keeps n (q / 4N + 2) below 2^63, so the sum fits.
    Raises nothing."""
    q, two_n = modulus.q, 1 << log_modulus
    q0, r = divmod(q, two_n)
    a = ct[..., :-1]
    a_sw = modulus_switch(a, modulus, log_modulus)
    t = a_sw * q0 + torch.div(a_sw * r + two_n // 2, two_n, rounding_mode="floor") - a
    t = torch.where(t > q // 2, t - q, torch.where(t < -(q // 2), t + q, t))
    total = t.sum(-1)
    mean = 0 if secret_distribution == "ternary" else torch.div(total + 1, 2, rounding_mode="floor")  # E[s] = 1/2
    half_step = (q + two_n) // (2 * two_n)
    body = torch.remainder(ct[..., -1] + mean - half_step, q)
    return torch.cat((a, body.unsqueeze(-1)), -1)


def decompose(x: torch.Tensor, modulus: Modulus, base_log: int, level: int) -> torch.Tensor:
    """(...) -> (..., level) balanced signed digits with sum_j d_j G_j = x + small (mod q)."""
    return _ops.tfhe_decompose(x.contiguous(), modulus.moduli, base_log, level)


def external_product(ring: TFHERing, ggsw: torch.Tensor, glwe: torch.Tensor, base_log: int, level: int) -> torch.Tensor:
    """GGSW(mu) x GLWE(m) = GLWE(mu * m), (..., k + 1, N)."""
    return _ops.tfhe_external_product(glwe.contiguous(), ggsw, ring.psi, ring.psi_inv, ring.post, ring.moduli,
                                      base_log, level)


def cmux(ring: TFHERing, ggsw: torch.Tensor, c0: torch.Tensor, c1: torch.Tensor, base_log: int, level: int):
    """GGSW(b) selects: c0 + GGSW(b) x (c1 - c0), an encryption of c_b (b in {0, 1})."""
    mq = ring.modulus
    return mq.add(c0, external_product(ring, ggsw, mq.sub(c1, c0), base_log, level))


def blind_rotate(ring: TFHERing, bsk: LweBootstrapKey | LweMultiBitBootstrapKey | FourierLweBootstrapKey,
                 ct: torch.Tensor, luts: torch.Tensor, lut_index: torch.Tensor | None = None) -> torch.Tensor:
    """(..., n + 1) -> GLWE accumulators (..., k + 1, N) = X^(-phase~) * luts[lut_index]; one
    CMux step per key bit over the whole batch (with a Fourier key on the 2^64 torus: docs/tfhe.md,
    "The Fourier blind rotation"), or with a multi-bit key one external product per group of G key
    bits by the key bundle sum_S X^(a_S) GGSW(f_S) (a_S the switched subset sums of the group's
    masks; docs/tfhe.md, "Multi-bit PBS"). A ternary key (bsk.ternary) rotates extend_lwe_mask(ct):
    2n CMuxes, one per split bit (docs/tfhe.md, "Ternary secrets"). Raises ParameterError for a
    key of another dimension."""
    if ct.shape[-1] != bsk.input_dimension + 1:
        raise ParameterError(f"blind_rotate: ciphertexts of dimension {ct.shape[-1] - 1}, bootstrapping key "
                             f"for dimension {bsk.input_dimension}")
    if getattr(bsk, "ternary", False):
        ct = extend_lwe_mask(ct, ring.modulus)
    idx = None if lut_index is None else lut_index.to(torch.int64).contiguous()
    if isinstance(bsk, FourierLweMultiBitBootstrapKey):
        exps, roots = ring.fourier_monomial_tables()
        return _ops.tfhe_fourier_multi_bit_blind_rotate(ct.contiguous(), luts.contiguous(), idx, bsk.data,
                                                        ring.twiddles, roots, exps, ring.moduli, bsk.base_log,
                                                        bsk.level)
    if isinstance(bsk, FourierLweBootstrapKey):
        return _ops.tfhe_fourier_blind_rotate(ct.contiguous(), luts.contiguous(), idx, bsk.data, ring.twiddles,
                                              ring.moduli, bsk.base_log, bsk.level)
    if isinstance(bsk, LweMultiBitBootstrapKey):
        exps, pows = ring.monomial_tables()
        return _ops.tfhe_multi_bit_blind_rotate(ct.contiguous(), luts.contiguous(), idx, bsk.data, ring.psi,
                                                ring.psi_inv, ring.post, exps, pows, ring.moduli, bsk.base_log,
                                                bsk.level)
    return _ops.tfhe_blind_rotate(ct.contiguous(), luts.contiguous(), idx, bsk.data, ring.psi, ring.psi_inv, ring.post,
                                  ring.moduli, bsk.base_log, bsk.level)


def rotate_glwe(modulus: Modulus, glwe: torch.Tensor, shift: int) -> torch.Tensor:
    """X^shift * glwe (negacyclic), shift any integer."""
    big_n = glwe.shape[-1]
    s = shift % (2 * big_n)
    src = (torch.arange(big_n, device=glwe.device) - s) % (2 * big_n)
    neg = src >= big_n
    x = glwe[..., src % big_n]
    return torch.where(neg, modulus.neg(x), x)


def extract_lwe_sample(modulus: Modulus, glwe: torch.Tensor, position: int = 0) -> torch.Tensor:
    """GLWE (..., k + 1, N) -> LWE (..., k N + 1) of its coefficient `position`, under the
    extracted key (GlweSecretKey.as_lwe_key)."""
    if position:
        glwe = rotate_glwe(modulus, glwe, -position)
    masks = glwe[..., :-1, :]
    # coefficient 0 of A_p * S_p = A_p[0] S_p[0] - sum_(j >= 1) A_p[N - j] S_p[j]
    rest = modulus.neg(torch.flip(masks[..., 1:], (-1,)))
    a = torch.cat((masks[..., :1], rest), -1).flatten(-2)
    return torch.cat((a, glwe[..., -1, :1]), -1)


def programmable_bootstrap_lwe_ciphertext(ring: TFHERing,
                                          bsk: LweBootstrapKey | LweMultiBitBootstrapKey | FourierLweBootstrapKey,
                                          ct: torch.Tensor, luts: torch.Tensor, lut_index: torch.Tensor | None = None,
                                          positions=(0,)) -> list:
    """Blind rotation then sample extraction at each of `positions` (one output per position:
    many-LUT); the key switch before it is keyswitch_lwe_ciphertext (KS-PBS)."""
    acc = blind_rotate(ring, bsk, ct, luts, lut_index)
    return [extract_lwe_sample(ring.modulus, acc, p) for p in positions]
