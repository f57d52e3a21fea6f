"""GLWE (k = 1) key switching, automorphisms X -> X^g and LWE packing (fhetorch/_tfhe/glwe.py) on
the toy-tfhe-4bit ring (N = 1024, q ~ 2^62), fresh keys and inputs each run: decryptions against
the plaintexts within worst-case noise bounds (and, for the noise, rms against a variance model),
the automorphism against its definition, lwe_to_glwe exactly, and the ParameterErrors."""
from __future__ import annotations

import math
import random
import os
import warnings

import pytest
import torch

from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import glwe
from fhetorch._tfhe.context import TFHEContext
from fhetorch._tfhe.entities import GlweSecretKey
from fhetorch.errors import InsecureParametersWarning, ParameterError

# the key switches' decomposition: B L = 40 bits kept, so the dropped bits cost q / 2^41 per mask
# coefficient; B = 2^10 keeps the digits times the key noise well below that budget's q * 2^-20
BASE_LOG, LEVEL = 10, 4


@pytest.fixture(scope="module")
def ctx():
    seed = int.from_bytes(os.urandom(4), "little")
    print("context seed", seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return TFHEContext("toy-tfhe-4bit", seed=seed).keygen()


@pytest.fixture(scope="module")
def packing_keys(ctx):
    p = ctx.params
    return glwe.generate_packing_keys(ctx.sampler, ctx.ring, ctx.glwe_key, BASE_LOG, LEVEL, p.glwe_noise_width)


def centred(x: torch.Tensor, q: int) -> torch.Tensor:
    x = torch.remainder(x, q)
    return torch.where(x > q // 2, x - q, x)


def rand_mod_q(q: int, *shape) -> torch.Tensor:
    """Uniform int64 in [0, q) from the global generator (the conftest `seed` fixture seeds it)."""
    hi = torch.randint(0, 1 << 31, shape, dtype=torch.int64)
    lo = torch.randint(0, 1 << 31, shape, dtype=torch.int64)
    return ((hi << 31) + lo) % q


def noise_max(w: int) -> int:
    """|e| of the sampler's noise: a sum of 4 uniform integers in [-W, W]."""
    return 4 * w


def noise_var(w: int) -> float:
    return 4 * w * (w + 1) / 3


def ks_worst(q: int, n: int, w: int) -> int:
    """Worst case |added phase| of one keyswitch_glwe_ciphertext: with sum_j d_j G_j = A + r, the
    new phase is the old one - r S_in - sum_j d_j E_j. |r| <= q / 2^(BL+1) (the dropped bits) +
    L 2^(B-1) / 2 (each G_j rounded by <= 1/2), times N coefficients of a key with |s| <= 1;
    |d_j| <= 2^(B-1) against |E_j| <= 4W, over L levels of N coefficients."""
    r = q // (1 << (BASE_LOG * LEVEL + 1)) + 1 + LEVEL * (1 << (BASE_LOG - 1)) // 2
    return n * r + LEVEL * n * (1 << (BASE_LOG - 1)) * noise_max(w)


def ks_var(q: int, n: int, w: int, nonzero_key: float) -> float:
    """The same terms' variance: the dropped bits uniform on a width q / B^L over the key's
    nonzero coefficients, balanced digits (uniform on [-B/2, B/2): second moment B^2 / 12 + 1/6)."""
    b = 1 << BASE_LOG
    return nonzero_key * (q / b ** LEVEL) ** 2 / 12 + LEVEL * n * (b * b / 12 + 1 / 6) * noise_var(w)


def reference_automorphism(x: list, g: int, q: int | None) -> list:
    """tau_g by definition: X^i -> X^(i g mod 2N), minus the coefficient at exponent - N when >= N."""
    n = len(x)
    out = [0] * n
    for i, c in enumerate(x):
        e = i * g % (2 * n)
        out[e % n] = c if e < n else -c
    return [v % q for v in out] if q is not None else out


# --------------------------------------------------------------------------------- key switching

def test_keyswitch_glwe_ciphertext(ctx, seed):
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    s_in = torch.randint(-1, 2, (big_n,))  # ternary: the switch must take any |s| <= 1
    key = glwe.generate_glwe_keyswitch_key(ctx.sampler, ring, s_in, ctx.glwe_key, BASE_LOG, LEVEL,
                                           p.glwe_noise_width)
    assert key.data.shape == (LEVEL, 2, 2, big_n) and key.polynomial_size == big_n
    m = rand_mod_q(mq.q, 3, 2, big_n)  # batched leading dims: (3, 2, 2, N) ciphertexts
    ct = alg.encrypt_glwe_ciphertext(ctx.sampler, ring, GlweSecretKey(s_in.view(1, big_n)), m, p.glwe_noise_width)
    assert ct.shape == (3, 2, 2, big_n)
    out = glwe.keyswitch_glwe_ciphertext(ring, key, ct)
    assert out.shape == ct.shape and out.dtype == torch.int64
    assert int(out.min()) >= 0 and int(out.max()) < mq.q
    err = centred(alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, out) - m, mq.q).double()
    bound = noise_max(p.glwe_noise_width) + ks_worst(mq.q, big_n, p.glwe_noise_width)  # + the encryption's
    assert bound < mq.q * 2.0 ** -20  # ~2^35 at q ~ 2^62
    assert err.abs().max() <= bound
    # and the noise is what the terms above predict, not merely below the worst case
    model = math.sqrt(noise_var(p.glwe_noise_width) + ks_var(mq.q, big_n, p.glwe_noise_width,
                                                             int(s_in.count_nonzero())))
    rms = float(err.pow(2).mean().sqrt())
    print(f"keyswitch noise rms 2^{math.log2(rms):.2f}, model 2^{math.log2(model):.2f}")
    assert rms < 1.5 * model
    # through the batched NTT ops (a ring above FUSED_KEYSWITCH_BYTES), in chunks of the batch
    # (KEYSWITCH_CHUNK_BYTES): the same results as the one kernel, bit for bit
    chunk, fused = glwe.KEYSWITCH_CHUNK_BYTES, glwe.FUSED_KEYSWITCH_BYTES
    assert glwe._one_kernel(key)  # `out` came from the one kernel
    try:
        glwe.FUSED_KEYSWITCH_BYTES = 0
        glwe.KEYSWITCH_CHUNK_BYTES = 48 * LEVEL * big_n * random.randint(1, 5)  # 1..5 ciphertexts a chunk
        assert torch.equal(glwe.keyswitch_glwe_ciphertext(ring, key, ct), out)
    finally:
        glwe.KEYSWITCH_CHUNK_BYTES, glwe.FUSED_KEYSWITCH_BYTES = chunk, fused
    # each batch element is switched on its own: one at a time gives the same bits
    assert torch.equal(glwe.keyswitch_glwe_ciphertext(ring, key, ct[1, 0]), out[1, 0])


@pytest.mark.parametrize("level,base_log", [(1, 20), (2, 12), (6, 8)])
def test_keyswitch_of_an_automorphism_in_one_kernel(ctx, seed, level, base_log, monkeypatch):
    """The tfhe_glwe_keyswitch and tfhe_glwe_pack_step ops (the automorphism, the decomposition, the
    key product, the packing step's sums in one kernel; LWE leaves read as a scale times
    lwe_to_glwe) give the bits of the batched path (automorphism_glwe_ciphertext, rotate_glwe,
    lwe_to_glwe, the NTT ops) on uniformly random ciphertexts and keys,
    for g = 1, 3, 2N - 1 and a random odd g, random shifts; and an
    automorphism's key switch decrypts to tau_g of the phase under the key's output."""
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    raw = glwe.GlweKeyswitchKey(ring.to_montgomery(ring.to_ntt(rand_mod_q(mq.q, level, 2, big_n))).contiguous(),
                                base_log, level)
    ct = rand_mod_q(mq.q, 3, 2, big_n)
    ct[0, :, :5] = 0  # zeros: their negation is 0, not q
    y = rand_mod_q(mq.q, 3, 2, big_n)
    lx, ly = rand_mod_q(mq.q, 4, big_n + 1), rand_mod_q(mq.q, 4, big_n + 1)  # LWE leaves
    lx[0, :3] = 0
    scale = int(rand_mod_q(mq.q, 1))

    def steps(g, shift):
        return [glwe.keyswitch_glwe_ciphertext(ring, raw, ct, galois=g), glwe._pack_step(ring, raw, ct, y, g, shift),
                glwe._pack_step(ring, raw, ct, None, g, 0), glwe._pack_step(ring, raw, lx, ly, g, shift, scale),
                glwe._pack_step(ring, raw, lx, None, g, 0, scale)]

    for g in (1, 3, 2 * big_n - 1, 2 * random.randrange(big_n) + 1):
        shift = random.randrange(2 * big_n)
        fused = steps(g, shift)
        monkeypatch.setattr(glwe, "FUSED_KEYSWITCH_BYTES", 0)
        batched = steps(g, shift)
        monkeypatch.undo()
        for i, (a, b) in enumerate(zip(fused, batched)):
            assert torch.equal(a, b), (i, g, shift)
    g = 2 * random.randrange(1, big_n) + 1
    s = ctx.glwe_key.data[0]
    key = glwe.generate_glwe_keyswitch_key(ctx.sampler, ring, glwe.automorphism_polynomial(None, s, g), ctx.glwe_key,
                                           BASE_LOG, LEVEL, p.glwe_noise_width)
    m = rand_mod_q(mq.q, 2, big_n)
    enc = alg.encrypt_glwe_ciphertext(ctx.sampler, ring, ctx.glwe_key, m, p.glwe_noise_width)
    out = glwe.keyswitch_glwe_ciphertext(ring, key, enc, galois=g)
    err = centred(alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, out) - glwe.automorphism_polynomial(mq, m, g), mq.q)
    assert err.abs().max() <= noise_max(p.glwe_noise_width) + ks_worst(mq.q, big_n, p.glwe_noise_width)
    with pytest.raises(ParameterError):
        glwe.keyswitch_glwe_ciphertext(ring, key, enc, galois=4)


def test_keyswitch_rejects_wrong_shapes(ctx):
    ring, big_n = ctx.ring, ctx.params.N
    s_in = torch.randint(-1, 2, (big_n,))
    key = glwe.generate_glwe_keyswitch_key(ctx.sampler, ring, s_in, ctx.glwe_key, BASE_LOG, LEVEL, 1)
    for shape in [(2, big_n // 2), (3, big_n), (big_n,), (4, 1, big_n)]:
        with pytest.raises(ParameterError):
            glwe.keyswitch_glwe_ciphertext(ring, key, torch.zeros(shape, dtype=torch.int64))
    with pytest.raises(ParameterError):  # an input key of another ring size
        glwe.generate_glwe_keyswitch_key(ctx.sampler, ring, s_in[: big_n // 2], ctx.glwe_key, BASE_LOG, LEVEL, 1)
    k2 = GlweSecretKey(torch.zeros(2, big_n, dtype=torch.int64))
    with pytest.raises(ParameterError):  # k = 2 output keys are not supported
        glwe.generate_glwe_keyswitch_key(ctx.sampler, ring, s_in, k2, BASE_LOG, LEVEL, 1)


# --------------------------------------------------------------------------------- automorphisms

def test_automorphism_polynomial_matches_definition(ctx, seed):
    q, big_n = ctx.modulus.q, ctx.params.N
    x = rand_mod_q(q, 2, big_n)
    small = torch.randint(-5, 6, (big_n,))
    rnd = int(torch.randint(0, big_n, ())) * 2 + 1  # a random odd element
    for g in (1, 3, 5, 2 * big_n - 1, big_n + 1, rnd, 2 * big_n + 3, -3):
        got = glwe.automorphism_polynomial(ctx.modulus, x, g)
        assert got.tolist() == [reference_automorphism(row, g, q) for row in x.tolist()], g
        assert glwe.automorphism_polynomial(None, small, g).tolist() == reference_automorphism(small.tolist(), g, None)
        src, neg = glwe.automorphism_indices(big_n, g)
        assert sorted(src.tolist()) == list(range(big_n))  # a signed permutation
        ref = reference_automorphism(list(range(1, big_n + 1)), g, None)  # coefficient i = i + 1 marks its source
        assert src.tolist() == [abs(v) - 1 for v in ref] and neg.tolist() == [v < 0 for v in ref]
    # tau_g is a ring map: tau_g(a * b) = tau_g(a) * tau_g(b) (products by the key's route)
    g = 5
    a, b = x[0], torch.randint(0, 2, (1, big_n))
    ab = alg._poly_mul_key(ctx.ring, a.view(1, big_n), GlweSecretKey(b))
    tb = GlweSecretKey(glwe.automorphism_polynomial(None, b, g))
    assert torch.equal(glwe.automorphism_polynomial(ctx.modulus, ab, g),
                       alg._poly_mul_key(ctx.ring, glwe.automorphism_polynomial(ctx.modulus, a, g).view(1, big_n), tb))


@pytest.mark.parametrize("g", [0, 2, 4, 2048, -2])
def test_automorphism_even_element_raises(ctx, g):
    with pytest.raises(ParameterError):
        glwe.automorphism_indices(ctx.params.N, g)
    with pytest.raises(ParameterError):
        glwe.automorphism_polynomial(ctx.modulus, torch.zeros(ctx.params.N, dtype=torch.int64), g)


def test_automorphism_glwe_ciphertext(ctx, packing_keys, seed):
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    m = rand_mod_q(mq.q, 2, big_n)
    ct = alg.encrypt_glwe_ciphertext(ctx.sampler, ring, ctx.glwe_key, m, p.glwe_noise_width)
    phase = alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, ct)
    s = ctx.glwe_key.data[0]
    for g in (3, 2 * big_n - 1, int(torch.randint(0, big_n, ())) * 2 + 1):
        turned = glwe.automorphism_glwe_ciphertext(mq, ct, g)
        tau_key = GlweSecretKey(glwe.automorphism_polynomial(None, s, g).view(1, big_n))
        dec = alg.decrypt_glwe_ciphertext(ring, tau_key, turned)
        # phase'(X) = tau_g(B) - tau_g(A) tau_g(S) = tau_g(phase): exact, so tau_g(m) up to tau_g(e)
        assert torch.equal(dec, glwe.automorphism_polynomial(mq, phase, g))
        assert centred(dec - glwe.automorphism_polynomial(mq, m, g), mq.q).abs().max() <= noise_max(p.glwe_noise_width)
    # a packing key brings tau_g(S) back to S
    g = 9
    back = glwe.keyswitch_glwe_ciphertext(ring, packing_keys[g], glwe.automorphism_glwe_ciphertext(mq, ct, g))
    err = centred(alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, back) - glwe.automorphism_polynomial(mq, m, g), mq.q)
    assert err.abs().max() <= noise_max(p.glwe_noise_width) + ks_worst(mq.q, big_n, p.glwe_noise_width)


# --------------------------------------------------------------------------------- LWE -> GLWE, packing

def test_lwe_to_glwe_keeps_the_phase(ctx, seed):
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    lwe_key = ctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(ctx.sampler, ring, lwe_key, rand_mod_q(mq.q, 3, 5), p.glwe_noise_width)
    g = glwe.lwe_to_glwe(mq, lwe)
    assert g.shape == (3, 5, 2, big_n)
    assert torch.equal(alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, g)[..., 0],
                       alg.decrypt_lwe_ciphertext(mq, lwe_key, lwe))
    # the inverse of sample extraction at position 0
    assert torch.equal(alg.extract_lwe_sample(mq, g), lwe)


def test_packing_elements():
    assert glwe.packing_elements(1024) == [3, 5, 9, 17, 33, 65, 129, 257, 513, 1025]
    assert glwe.packing_elements(8) == [3, 5, 9]
    assert glwe.packing_elements(2) == [3]


@pytest.mark.parametrize("batch", [(), (2,)])
def test_pack_lwe_ciphertexts(ctx, packing_keys, seed, batch):
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    assert sorted(packing_keys) == glwe.packing_elements(big_n)
    lwe_key = ctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(ctx.sampler, ring, lwe_key, rand_mod_q(mq.q, *batch, big_n), p.glwe_noise_width)
    assert lwe.shape == (*batch, big_n, big_n + 1)
    packed = glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe)
    assert packed.shape == (*batch, 2, big_n)
    phases = alg.decrypt_lwe_ciphertext(mq, lwe_key, lwe)  # (*batch, N): coefficient i's target
    err = centred(alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, packed) - phases, mq.q).double()
    # each round is even + odd + KS(tau(even - odd)): |noise| <= 4 b + E_ks, so after log2 N rounds
    # b <= E_ks (4^log2 N - 1) / 3 = E_ks (N^2 - 1) / 3 (~2^53: loose, but garbage is ~q / 4)
    worst = ks_worst(mq.q, big_n, p.glwe_noise_width) * (big_n ** 2 - 1) // 3
    assert worst < mq.q * 2.0 ** -8
    assert err.abs().max() <= worst
    # the tight check, in energy: the trace over the rounds' Galois group doubles a noise's
    # E||.||^2 per round (tau_g's fixed coefficients come with + and - signs in equal numbers), and
    # round j's N / 2^j key switches each pass log2 N - j more rounds: (N^2 - 1) / 3 key switches
    nonzero = float(ctx.glwe_key.data.count_nonzero())  # tau_g(S) has S's support size
    model = math.sqrt((big_n ** 2 - 1) / 3 * ks_var(mq.q, big_n, p.glwe_noise_width, nonzero))
    rms = float(err.pow(2).mean().sqrt())
    print(f"packing noise rms 2^{math.log2(rms):.2f}, model 2^{math.log2(model):.2f}, worst 2^{math.log2(worst):.2f}")
    assert rms < 1.5 * model


def test_pack_rejects_wrong_counts(ctx, packing_keys):
    big_n = ctx.params.N
    for shape, stride in [((big_n - 1, big_n + 1), 1), ((3, big_n + 1), 1), ((2 * big_n, big_n + 1), 1),
                          ((big_n, big_n), 1), ((2, big_n + 1, big_n + 1), 1), ((big_n // 2, big_n + 1), 4),
                          ((0, big_n + 1), 1), ((big_n + 1,), 1)]:
        with pytest.raises(ParameterError):
            glwe.pack_lwe_ciphertexts(ctx.ring, packing_keys, torch.zeros(shape, dtype=torch.int64), stride)


@pytest.mark.parametrize("part,stride,batch", [(2, 1, ()), (4, 2, (2,)), (1, 4, ()), (16, 8, ()), (2, 1, (3,))])
def test_fewer_ciphertexts_are_the_dense_packing_with_zeros(ctx, packing_keys, seed, part, stride, batch):
    """The first `count` of the stride's positions only (a switch's values sit in the ring's first
    half): the same bits as the N-leaf packing with zero ciphertexts everywhere else."""
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    count = big_n // stride // part  # all, a half, a quarter, ... of the stride's positions
    lwe_key = ctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(ctx.sampler, ring, lwe_key, rand_mod_q(mq.q, *batch, count), p.glwe_noise_width)
    dense = torch.zeros(*batch, big_n, big_n + 1, dtype=torch.int64)
    dense[..., :count * stride:stride, :] = lwe
    packed = glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe, stride)
    assert torch.equal(packed, glwe.pack_lwe_ciphertexts(ring, packing_keys, dense))
    phase = alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, packed)
    err = centred(phase[..., :count * stride:stride] - alg.decrypt_lwe_ciphertext(mq, lwe_key, lwe), mq.q)
    assert err.abs().max() < mq.q * 2.0 ** -8
    rest = phase[..., count * stride:]  # the zeros' noise only
    assert rest.numel() == 0 or centred(rest, mq.q).abs().max() < mq.q * 2.0 ** -8


def test_packing_in_chunks_is_the_same(ctx, packing_keys, seed, monkeypatch):
    """A round's ciphertexts in chunks of 1, 3 or all of them, its steps in one kernel or through the
    batched NTT ops: the same bits."""
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    lwe_key = ctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(ctx.sampler, ring, lwe_key, rand_mod_q(mq.q, 2, big_n // 2), p.glwe_noise_width)
    whole = glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe)
    for entries in (1, 3):
        monkeypatch.setattr(glwe, "PACK_CHUNK_BYTES", entries * 8 * 16 * big_n * 2)
        assert torch.equal(glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe), whole)
    monkeypatch.setattr(glwe, "FUSED_KEYSWITCH_BYTES", 0)
    assert torch.equal(glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe), whole)


@pytest.mark.parametrize("stride", [2, 8])
def test_strided_packing_is_the_dense_one_with_zeros(ctx, packing_keys, seed, stride):
    """Ciphertexts for every stride-th coefficient: the same bits as the N-leaf packing with zero
    ciphertexts in between (whose key switches are exactly 0), with N / stride leaves."""
    ring, mq, p, big_n = ctx.ring, ctx.modulus, ctx.params, ctx.params.N
    lwe_key = ctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(ctx.sampler, ring, lwe_key, rand_mod_q(mq.q, big_n // stride), p.glwe_noise_width)
    dense = torch.zeros(big_n, big_n + 1, dtype=torch.int64)
    dense[::stride] = lwe
    packed = glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe, stride)
    assert torch.equal(packed, glwe.pack_lwe_ciphertexts(ring, packing_keys, dense))
    phase = alg.decrypt_glwe_ciphertext(ring, ctx.glwe_key, packed)
    err = centred(phase[::stride] - alg.decrypt_lwe_ciphertext(mq, lwe_key, lwe), mq.q)
    assert err.abs().max() < mq.q * 2.0 ** -8
    with pytest.raises(ParameterError):
        glwe.pack_lwe_ciphertexts(ring, packing_keys, lwe, 3)
