"""GLWE (k = 1) key switching, automorphisms and LWE packing: the ring-side algorithms of
scheme switching (fhetorch/circuits/switching), verb_object like fhetorch._tfhe.algorithms.

A GLWE ciphertext here is (..., 2, N) int64 in [0, q): mask A then body B, phase B - A S.
- keyswitch_glwe_ciphertext: from a polynomial key S_in to S_out with a gadget decomposition of
  the mask (TFHE-style, no special primes): B' = B - sum_j d_j(A) B_j, A' = -sum_j d_j(A) A_j,
  so B' - A' S_out = B - A S_in + sum_j d_j e_j (+ the decomposition's rounding times S_in).
- automorphism_glwe_ciphertext: X -> X^g on every polynomial; the phase becomes tau_g(phase)
  under tau_g(S), which a key switch brings back to S.
- pack_lwe_ciphertexts: N LWE ciphertexts under S's coefficients (the extracted key) -> one GLWE
  whose coefficient i is the phase of LWE i (Chen, Dai, Kim, Song 2020, "Efficient homomorphic
  conversion between (ring) LWE ciphertexts", Algorithm 2 with the field trace folded in): log N
  rounds, each one batched automorphism key switch; the inputs are first multiplied by N^-1 mod q
  (q is odd), which the rounds' factor 2 each give back: the messages come out unscaled, while
  the key switches' noise doubles with every later round (std ~ N / sqrt(3) of one switch's).
  Ciphertexts for every stride-th coefficient only (`stride`), and for the first c of those: the
  tree on those, the other rounds single steps (the trace), so memory and work scale with the count,
  not N^2; each round in chunks of the ciphertexts, so its temporaries stay bounded.
"""
from __future__ import annotations

import os

import torch

from .. import _ops
from .._ring import Sampler
from ..errors import MissingKeyError, ParameterError
from .algorithms import decompose, encrypt_glwe_ciphertext, gadget, rotate_glwe
from .entities import GlweKeyswitchKey, GlweSecretKey
from .modular import Modulus
from .ring import TFHERing


def generate_glwe_keyswitch_key(sampler: Sampler, ring: TFHERing, input_key: torch.Tensor, output_key: GlweSecretKey,
                                base_log: int, level: int, noise_width: int) -> GlweKeyswitchKey:
    """GLWE encryptions under output_key (k = 1) of G_j * input_key, input_key (N,) small
    integers (|s| <= 1). Raises ParameterError for k > 1 or a key of another ring size."""
    if output_key.data.shape[0] != 1 or output_key.data.shape[-1] != ring.n or input_key.shape[-1] != ring.n:
        raise ParameterError("generate_glwe_keyswitch_key: keys must be single polynomials of the ring's size")
    g = torch.tensor(gadget(ring.modulus.q, base_log, level), dtype=torch.int64, device=input_key.device)
    pt = ring.modulus.reduce(g.view(level, 1) * input_key.to(torch.int64).view(1, -1))  # |G_j| < 2^62, |s| <= 1
    ct = encrypt_glwe_ciphertext(sampler, ring, output_key, pt, noise_width)  # (level, 2, N)
    return GlweKeyswitchKey(ring.to_montgomery(ring.to_ntt(ct)).contiguous(), base_log, level)


# Bytes of temporaries one key switch call may hold: a ciphertext's take ~48 level N (its digits, their
# NTT, the products with both key rows and their int64 sums), so a batch is switched in chunks (the
# first packing round of 2^15 values at N = 2^13 held ~40 GB at once).
KEYSWITCH_CHUNK_BYTES = 1 << 30
# Bytes of temporaries one packing round may hold (its chunks of ciphertexts; the key switches inside
# are chunked again): the first round of 2048 values at N = 2^16 held ~12 GiB at once.
PACK_CHUNK_BYTES = 4 << 30


# The one-kernel key switch (the tfhe_glwe_keyswitch and tfhe_glwe_pack_step ops: a thread block per
# ciphertext, its digits in shared memory) takes rings whose digit scratch is at most this (N = 2^11 at
# level 6: 96 KiB); larger rings (the CKKS ring's switches, a few ciphertexts) go through the batched NTT
# ops. Same bits either way; FHETORCH_GLWE_KEYSWITCH_KERNEL=0 (read at import) keeps every ring on the
# batched path (A/B timing).
FUSED_KEYSWITCH_BYTES = 0 if os.environ.get("FHETORCH_GLWE_KEYSWITCH_KERNEL") == "0" else 227 * 1024


def keyswitch_glwe_ciphertext(ring: TFHERing, key: GlweKeyswitchKey, ct: torch.Tensor, galois: int = 1) -> torch.Tensor:
    """(..., 2, N) under the key's input polynomial -> (..., 2, N) under its output key; with galois
    g != 1 the key switch of tau_g(ct) (automorphism_glwe_ciphertext), whose key is then one from
    tau_g(S). In one kernel where the ring is small (FUSED_KEYSWITCH_BYTES), else in chunks of the batch
    (KEYSWITCH_CHUNK_BYTES); each ciphertext's result is the same bits whatever the path or chunk.
    Raises ParameterError for another shape or an even galois element."""
    if ct.dim() < 2 or ct.shape[-1] != key.polynomial_size or ct.shape[-2] != 2:
        raise ParameterError(f"keyswitch_glwe_ciphertext: ciphertexts (..., 2, {key.polynomial_size}) expected, "
                             f"got {tuple(ct.shape)}")
    if galois % 2 == 0:
        raise ParameterError(f"keyswitch_glwe_ciphertext: the Galois element must be odd, got {galois}")
    big_n = ct.shape[-1]
    if _one_kernel(key):
        return _ops.tfhe_glwe_keyswitch(ct.contiguous(), key.data, ring.psi, ring.psi_inv, ring.post, ring.moduli,
                                        key.base_log, key.level, galois % (2 * big_n))
    if galois % (2 * big_n) != 1:
        ct = automorphism_glwe_ciphertext(ring.modulus, ct, galois)
    flat = ct.reshape(-1, 2, ct.shape[-1])
    step = max(1, KEYSWITCH_CHUNK_BYTES // (48 * key.level * ct.shape[-1]))
    if flat.shape[0] <= step:
        return _keyswitch_glwe(ring, key, ct)
    out = torch.empty_like(flat)
    for s in range(0, flat.shape[0], step):
        out[s:s + step] = _keyswitch_glwe(ring, key, flat[s:s + step])
    return out.reshape(ct.shape)


def _one_kernel(key: GlweKeyswitchKey) -> bool:
    """Whether key's switches run in one kernel (FUSED_KEYSWITCH_BYTES)."""
    return 4 * 2 * max(key.level, 2) * key.polynomial_size <= FUSED_KEYSWITCH_BYTES


def _pack_step(ring: TFHERing, key: GlweKeyswitchKey, x: torch.Tensor, y: torch.Tensor | None, galois: int,
               shift: int, lwe_scale: int | None = None) -> torch.Tensor:
    """One step of the packing's tree: x + X^shift y + KS(tau_g(x - X^shift y)), or without a partner
    (y None) x + KS(tau_g(x)); in one kernel where the ring is small (the tfhe_glwe_pack_step op). With
    lwe_scale, x and y are LWE ciphertexts (the leaves), each read as lwe_scale * lwe_to_glwe(.)."""
    mq = ring.modulus
    if _one_kernel(key):
        return _ops.tfhe_glwe_pack_step(x.contiguous(), None if y is None else y.contiguous(), key.data, ring.psi,
                                        ring.psi_inv, ring.post, ring.moduli, key.base_log, key.level, galois, shift,
                                        lwe_scale)
    if lwe_scale is not None:
        x = mq.mul_small(lwe_to_glwe(mq, x), lwe_scale)
        y = None if y is None else mq.mul_small(lwe_to_glwe(mq, y), lwe_scale)
    if y is None:
        return mq.add(x, keyswitch_glwe_ciphertext(ring, key, x, galois))
    y = rotate_glwe(mq, y, shift)
    return mq.add(mq.add(x, y), keyswitch_glwe_ciphertext(ring, key, mq.sub(x, y), galois))


def _keyswitch_glwe(ring: TFHERing, key: GlweKeyswitchKey, ct: torch.Tensor) -> torch.Tensor:
    mq = ring.modulus
    d = decompose(ct[..., 0, :], mq, key.base_log, key.level).movedim(-1, -2)  # (..., level, N)
    dn = ring.to_ntt(d).unsqueeze(-3)  # (..., level, 1, 2, N)
    dn = dn.expand(*dn.shape[:-3], 2, *dn.shape[-2:])
    acc = ring.sum_residues(ring.mul(dn, key.data), -4)  # (..., 2, 2, N): sum_j d_j (A_j, B_j)
    r = _ops.intt(acc.contiguous(), ring.mod, ring.psi_inv, ring.post).to(torch.int64)
    r = mq.compose(r[..., 0, :], r[..., 1, :])  # (..., 2, N)
    return torch.stack((mq.neg(r[..., 0, :]), mq.sub(ct[..., 1, :], r[..., 1, :])), -2)


def automorphism_indices(big_n: int, g: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(source, negate) (N,) with tau_g(x)[p] = (-1)^negate[p] x[source[p]], tau_g: X -> X^g (g odd)."""
    if g % 2 == 0:
        raise ParameterError(f"automorphism: g must be odd, got {g}")
    i = torch.arange(big_n, device=device)
    t = i * g % (2 * big_n)
    src = torch.empty_like(i)
    neg = torch.empty(big_n, dtype=torch.bool, device=device)
    src[t % big_n] = i
    neg[t % big_n] = t >= big_n
    return src, neg


def automorphism_polynomial(modulus: Modulus | None, x: torch.Tensor, g: int) -> torch.Tensor:
    """tau_g of (..., N) polynomials: in [0, q) with a modulus, small signed integers without."""
    src, neg = automorphism_indices(x.shape[-1], g, x.device)
    y = x[..., src]
    return torch.where(neg, modulus.neg(y) if modulus is not None else -y, y)


def automorphism_glwe_ciphertext(modulus: Modulus, ct: torch.Tensor, g: int) -> torch.Tensor:
    """(..., 2, N) -> tau_g of mask and body: an encryption of tau_g(phase) under tau_g(S)."""
    return automorphism_polynomial(modulus, ct, g)


def packing_elements(big_n: int) -> list[int]:
    """The Galois elements pack_lwe_ciphertexts uses: 2^j + 1, j = 1 .. log2 N."""
    return [(1 << j) + 1 for j in range(1, big_n.bit_length())]


def generate_packing_keys(sampler: Sampler, ring: TFHERing, key: GlweSecretKey, base_log: int, level: int,
                          noise_width: int) -> dict:
    """{g: key switching tau_g(S) -> S} for every element of packing_elements."""
    s = key.data[0]
    return {g: generate_glwe_keyswitch_key(sampler, ring, automorphism_polynomial(None, s, g), key, base_log, level,
                                           noise_width)
            for g in packing_elements(ring.n)}


def lwe_to_glwe(modulus: Modulus, lwe: torch.Tensor) -> torch.Tensor:
    """(..., N + 1) LWE under S's coefficients -> (..., 2, N) GLWE whose constant coefficient has
    the same phase (the inverse of extract_lwe_sample at position 0)."""
    a, b = lwe[..., :-1], lwe[..., -1]
    mask = torch.cat((a[..., :1], modulus.neg(torch.flip(a[..., 1:], (-1,)))), -1)
    body = torch.zeros_like(mask)
    body[..., 0] = b
    return torch.stack((mask, body), -2)


def pack_lwe_ciphertexts(ring: TFHERing, keys: dict, lwe: torch.Tensor, stride: int = 1) -> torch.Tensor:
    """(..., c, N + 1) LWE ciphertexts under S's coefficients -> (..., 2, N) GLWE under S whose
    coefficient i stride has LWE i's phase (plus the key switches' noise), the other coefficients 0
    (plus noise); keys from generate_packing_keys. c is a power of two <= N / stride: the
    coefficients from c stride on are those of zero ciphertexts. The tree runs on the c ciphertexts
    only: a round that would pair each with a zero one (partners c stride or more positions on, or
    between the stride's positions) becomes a single step c + KS(tau_g(c)) (Chen-Dai-Kim-Song's
    field trace), bit for bit what the packing of N ciphertexts with zeros gives. Each round runs in
    chunks of the ciphertexts (PACK_CHUNK_BYTES), so its temporaries do not grow with c.
    Raises ParameterError for another count or dimension or a stride that is not a power of two
    dividing N, MissingKeyError when a key of packing_elements(N) is absent."""
    big_n, mq = ring.n, ring.modulus
    absent = [g for g in packing_elements(big_n) if g not in keys]
    if absent:
        raise MissingKeyError(f"pack_lwe_ciphertexts: no packing key for the Galois elements {absent}")
    if stride < 1 or stride & (stride - 1) or stride > big_n:
        raise ParameterError(f"pack_lwe_ciphertexts: the stride must be a power of two <= {big_n}, got {stride}")
    c = lwe.shape[-2] if lwe.dim() >= 2 else 0
    if lwe.dim() < 2 or lwe.shape[-1] != big_n + 1 or c < 1 or c & (c - 1) or c * stride > big_n:
        raise ParameterError(f"pack_lwe_ciphertexts: (c, {big_n + 1}) ciphertexts expected, c a power of two "
                             f"<= {big_n // stride}, got {tuple(lwe.shape)}")
    n_inv = pow(big_n, -1, mq.q)
    batch = lwe.shape[:-2]
    step = max(1, PACK_CHUNK_BYTES // (8 * 16 * big_n * max(1, batch.numel())))  # ~8 ciphertexts' temporaries each

    cur = None  # (..., c, 2, N) after the first round, whose inputs are the leaves: n_inv lwe_to_glwe(lwe)
    for j in range(1, big_n.bit_length()):
        g, dist = (1 << j) + 1, big_n >> j  # round j pairs coefficient p with p + N / 2^j
        pair = stride <= dist < c * stride
        half = c // 2 if pair else c
        out = torch.empty((*batch, half, 2, big_n), dtype=torch.int64, device=lwe.device)
        src, scale = (lwe, n_inv) if cur is None else (cur, None)
        for a in range(0, half, step):
            b = min(half, a + step)
            x = src.narrow(len(batch), a, b - a)
            if pair:  # pair entry e with e + half (positions dist apart)
                y = src.narrow(len(batch), half + a, b - a)
                out[..., a:b, :, :] = _pack_step(ring, keys[g], x, y, g, dist, scale)
            else:  # the partner would be a zero ciphertext
                out[..., a:b, :, :] = _pack_step(ring, keys[g], x, None, g, 0, scale)
        cur, c = out, half
    if cur is None:  # N = 1: no round
        return mq.mul_small(lwe_to_glwe(mq, lwe[..., 0, :]), n_inv)
    return cur[..., 0, :, :]
