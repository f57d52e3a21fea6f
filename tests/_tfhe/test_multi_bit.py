"""Multi-bit blind rotation (grouping factor G): the monomial tables against the NTT, the subset
indicators against their definition, the kernel against a composition of external products by
key bundles built in Python (bit for bit, every path and G = 2, 3, 4), batched = one at a time,
and whole multi-bit PBS through the Context, exhaustively over the message space."""
import os
import warnings
from dataclasses import replace

import pytest
import torch

import fhetorch as fhe
import fhetorch._ops as ops
from fhetorch._ring import Sampler
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import noise
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.params import make_params
from fhetorch._tfhe.presets import PRESETS
from fhetorch._tfhe.ring import TFHERing

from . import measure
from . import reference as ref
from .inputs import MODULI, Q, ggsw_kernel_form, rand_mod_q

MQ = Modulus(MODULI)


def _monomial_ntt(ring, a):
    """NTT(X^a) (2, N), Montgomery, by the ring's NTT of the coefficient vector (a in [0, 2N))."""
    x = torch.zeros(ring.n, dtype=torch.int64)
    x[a % ring.n] = 1 if a < ring.n else -1
    return ring.to_montgomery(ring.to_ntt(x))


def test_monomial_tables_are_the_ntt_of_monomials(gen):
    for log_n in (4, 10, 11):
        ring = TFHERing(log_n, MODULI)
        exps, pows = ring.monomial_tables()
        assert exps.shape == (2, ring.n) and pows.shape == (2, 2 * ring.n)
        for a in [0, 1, ring.n - 1, ring.n, 2 * ring.n - 1] + torch.randint(0, 2 * ring.n, (5,), generator=gen).tolist():
            got = torch.gather(pows, 1, (exps.to(torch.int64) * a) % (2 * ring.n))
            assert torch.equal(got, _monomial_ntt(ring, a)), (log_n, a)


@pytest.mark.parametrize("g", [2, 3, 4])
def test_subset_indicators(g):
    key = alg.LweSecretKey(Sampler(seed=g).binary(4 * g))
    f = alg.subset_indicators(key, g)
    bits = key.data.view(4, g).tolist()
    assert f.shape == (4, 1 << g)
    for j in range(4):  # one subset per group: the set of its key bits that are 1
        assert f[j].tolist() == [int(s == sum(b << u for u, b in enumerate(bits[j]))) for s in range(1 << g)]


def _multi_bit_by_products(ring, bsk, ct, luts, lut_index):
    """The reference composition: the rotated test polynomial, then per group one external product
    (the external_product op) by the key bundle sum_S X^(a_S) GGSW(f_S) summed in Python."""
    g, n2 = bsk.grouping_factor, 2 * ring.n
    log2n = n2.bit_length() - 1
    qv = torch.tensor(MODULI, dtype=torch.int64).view(2, 1)
    outs = []
    for b in range(ct.shape[0]):
        body = ref.modulus_switch(int(ct[b, -1]), Q, log2n)
        lut = luts[0 if lut_index is None else int(lut_index[b])].tolist()
        acc = torch.zeros(bsk.data.shape[2], ring.n, dtype=torch.int64)
        acc[-1] = torch.tensor(ref.rotate(lut, -body % n2, Q))
        for j in range(bsk.data.shape[0]):
            masks = [int(v) for v in ct[b, j * g:(j + 1) * g]]
            bundle = bsk.data[j, 0].to(torch.int64)
            for s in range(1, 1 << g):
                a = ref.modulus_switch(sum(m for u, m in enumerate(masks) if s >> u & 1) % Q, Q, log2n)
                bundle = bundle + ring.mul(bsk.data[j, s], _monomial_ntt(ring, a)).to(torch.int64)
            bundle = (bundle % qv).to(torch.int32)  # Montgomery: ring.mul(x R, m R) = x m R
            acc = alg.external_product(ring, bundle, acc, bsk.base_log, bsk.level)
        outs.append(acc)
    return torch.stack(outs)


# (log_n, k, base_log, level, G, groups) at N = 2^4 .. 2^13, k = 1 and 2, level 1 to 3. Batch 3:
# the cluster path (2 k1 teams per ciphertext), against the reference; batch 40 (> 128 / (2 k1)
# teams): the fused path, or per-step at N = 2^13, equal to it on the same ciphertexts
@pytest.mark.parametrize("log_n,k,base_log,level,g,groups", [
    (4, 1, 9, 2, 2, 3), (5, 2, 12, 1, 3, 2), (6, 1, 7, 3, 4, 2), (11, 1, 22, 1, 4, 1), (13, 1, 15, 2, 2, 1)])
def test_multi_bit_blind_rotate_matches_key_bundle_products(gen, log_n, k, base_log, level, g, groups):
    ring = TFHERing(log_n, MODULI)
    k1, n = k + 1, g * groups
    ggsw = rand_mod_q(gen, groups, 1 << g, k1, level, k1, 1 << log_n)
    bsk = alg.LweMultiBitBootstrapKey(ggsw_kernel_form(ring, ggsw), base_log, level, g)
    ct = rand_mod_q(gen, 40, n + 1)
    ct[0, :g] = 0  # every a_S zero: the bundle is the sum of the group's GGSWs
    luts = rand_mod_q(gen, 2, 1 << log_n)
    idx = torch.randint(0, 2, (40,), generator=gen)
    got = alg.blind_rotate(ring, bsk, ct[:3], luts, idx[:3])
    assert torch.equal(got, _multi_bit_by_products(ring, bsk, ct[:3], luts, idx[:3]))
    assert torch.equal(alg.blind_rotate(ring, bsk, ct, luts, idx)[:3], got)


def test_multi_bit_blind_rotate_batched_equals_one_at_a_time(gen):
    ring = TFHERing(6, MODULI)
    g, groups, batch = 2, 3, 37  # fused; one at a time: the cluster path
    bsk = alg.LweMultiBitBootstrapKey(ggsw_kernel_form(ring, rand_mod_q(gen, groups, 4, 2, 2, 2, 64)), 8, 2, g)
    ct = rand_mod_q(gen, batch, g * groups + 1)
    luts = rand_mod_q(gen, 3, 64)
    idx = torch.randint(0, 3, (batch,), generator=gen)
    got = alg.blind_rotate(ring, bsk, ct, luts, idx)
    one = torch.cat([alg.blind_rotate(ring, bsk, ct[b:b + 1], luts, idx[b:b + 1]) for b in range(batch)])
    assert torch.equal(got, one)
    assert torch.equal(alg.blind_rotate(ring, bsk, ct.view(batch, 1, -1), luts, idx.view(batch, 1)).view_as(got), got)


def test_multi_bit_op_refuses_bad_keys(gen):
    ring = TFHERing(4, MODULI)
    exps, pows = ring.monomial_tables()
    ct = rand_mod_q(gen, 2, 9)
    luts = rand_mod_q(gen, 1, 16)
    args = (ring.psi, ring.psi_inv, ring.post, exps, pows, MODULI, 8, 1)
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, 3, 4, 2, 1, 2, 16))
    with pytest.raises(RuntimeError, match="differs from the key's 6"):
        ops.tfhe_multi_bit_blind_rotate(ct, luts, None, bsk, *args)
    bad = ggsw_kernel_form(ring, rand_mod_q(gen, 3, 5, 2, 1, 2, 16))
    with pytest.raises(RuntimeError, match="2\\^G"):
        ops.tfhe_multi_bit_blind_rotate(rand_mod_q(gen, 2, 7), luts, None, bad, *args)
    with pytest.raises(RuntimeError, match="mono_pow"):
        ops.tfhe_multi_bit_blind_rotate(rand_mod_q(gen, 2, 7), luts, None, bsk, ring.psi, ring.psi_inv, ring.post,
                                        exps, pows[:, :16].contiguous(), MODULI, 8, 1)


ROTATIONS = ["fft", "ntt"]  # the multi-bit key on the 2^64 torus (the default) or mod q
KEY_TYPES = {"fft": "FourierLweMultiBitBootstrapKey", "ntt": "LweMultiBitBootstrapKey"}


def _context(name="toy-tfhe-4bit-mb2", rotation="fft", **fields):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        label = f"{name}-{rotation}" + (f"-g{fields['grouping_factor']}" if "grouping_factor" in fields else "")
        p = make_params(replace(PRESETS[name], name=label, blind_rotation=rotation, **fields), allow_insecure=True)
        ctx = fhe.tfhe.Context(p, seed=int.from_bytes(os.urandom(4), "little")).keygen()
    assert type(ctx.bootstrap_key).__name__ == KEY_TYPES[rotation]
    return ctx


@pytest.mark.parametrize("rotation", ROTATIONS)
@pytest.mark.parametrize("fields", [{}, {"grouping_factor": 4}])
def test_multi_bit_pbs_random_luts_exhaustive(fields, rotation):
    """Every message of the 4-bit space through random LUTs (G = 2: toy-tfhe-4bit-mb2; G = 4: the
    same toy with groups of 4), mixed LUTs in one batch by index, batched = one at a time, on either
    rotation."""
    ctx = _context(rotation=rotation, **fields)
    x = torch.arange(16).repeat(2)
    tables = [torch.randint(0, 16, (16,)) for _ in range(3)]
    luts = [fhe.tfhe.LUT.from_table(t) for t in tables]
    ex = ctx.encrypt(x)
    for lut, t in zip(luts, tables):
        assert torch.equal(ctx.decrypt(lut(ex)), t[x])
    idx = torch.arange(32) % 3
    y = ctx.apply_lut(ex, luts, index=idx)
    want = torch.stack(tables)[idx, x]
    assert torch.equal(ctx.decrypt(y), want)
    one = torch.cat([ctx.apply_lut(ex[i:i + 1], luts, index=idx[i:i + 1]).data for i in range(4)])
    assert torch.equal(one, y.data[:4])


@pytest.mark.parametrize("rotation", ROTATIONS)
def test_multi_bit_many_lut_and_linear_ops(rotation):
    ctx = _context(rotation=rotation)
    x = torch.arange(8).repeat(2)
    ex = fhe.tfhe.LUT(lambda m: m % 8, bits=4)(ctx.encrypt(x))  # values below 8: two LUTs per PBS
    lo, hi = ctx.apply_many_luts(ex, [fhe.tfhe.LUT(lambda m: (m * 3) % 8, bits=3),
                                      fhe.tfhe.LUT(lambda m: 7 - m, bits=3)])
    assert torch.equal(ctx.decrypt(lo), (x * 3) % 8)
    assert torch.equal(ctx.decrypt(hi), 7 - x)
    assert torch.equal(ctx.decrypt(lo + hi), ((x * 3) % 8 + 7 - x) % 16)


@pytest.mark.parametrize("rotation", ROTATIONS)
def test_multi_bit_context_save_load_round_trip(tmp_path, rotation):
    ctx = _context(rotation=rotation)
    x = torch.randint(0, 16, (20,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        fhe.save(ctx.public(), tmp_path / "server.pt")
        fhe.save(ctx.encrypt(x), tmp_path / "x.pt")
        server = fhe.load(tmp_path / "server.pt")
        ex = fhe.load(tmp_path / "x.pt", server)
    assert torch.equal(server.bootstrap_key.data, ctx.bootstrap_key.data)
    ey = fhe.tfhe.LUT(lambda m: (m * m) % 16, bits=4)(ex)
    assert torch.equal(ctx.decrypt(fhe.tfhe.LWETensor(ctx, ey.data, ey.degree)), (x * x) % 16)


@pytest.mark.parametrize("rotation", ROTATIONS)
def test_multi_bit_pbs_noise_matches_the_model(rotation):
    """The bootstrapping key's noise dominating (glwe_noise_std 2^-30, toy-tfhe-4bit-mb2): every
    group pays 2^G key terms (the model's key bundle form: 2^G GGSWs, each times a monomial), the
    first on the test polynomial's digits only (its masks are zero); measured per ciphertext over
    the accumulator's N coefficients against that, 48 ciphertexts. The 2^G - 1 form with
    (X^(a_S) - 1) factors would measure 2 (2^G - 1) / 2^G = 1.5 x this at G = 2. On the torus
    ("fft") each group's product also rounds (fourier_product_variance) and the return to mod q
    rounds once (torus_to_q_variance)."""
    ctx = measure.context("toy-tfhe-4bit-mb2", glwe_noise_std=2.0 ** -30, blind_rotation=rotation)
    p, mq = ctx.params, ctx.modulus
    g, k1, count = p.grouping_factor, p.k + 1, 48
    m = measure.fresh_messages(ctx, count, seed=7)
    table = [int(v) for v in torch.randperm(p.message_modulus, generator=torch.Generator().manual_seed(7))]
    tv = ctx._test_polynomials([table])
    ks = alg.keyswitch_lwe_ciphertext(ctx.keyswitch_key, ctx.encrypt(m).data, mq)
    acc = alg.blind_rotate(ctx.ring, ctx.bootstrap_key, ks, tv.unsqueeze(0))
    phase = alg.decrypt_glwe_ciphertext(ctx.ring, ctx.glwe_key, acc)
    log_2n = p.log_n + 1
    body = alg.modulus_switch(ks[:, -1], mq, log_2n)
    start = torch.stack([alg.rotate_glwe(mq, tv, -int(b)) for b in body])  # the rotated test polynomial
    # the noiseless accumulator: X^(-b~ + sum_groups a_(S*)) tv, S* the group's key bits that are 1
    sw = torch.zeros(count, dtype=torch.int64)
    for j in range(p.n // g):
        bits = ctx.lwe_key.data[j * g:(j + 1) * g]
        total = mq.reduce((ks[:, j * g:(j + 1) * g] * bits).sum(-1) % p.q)
        sw = sw + alg.modulus_switch(total, mq, log_2n)
    want = torch.stack([alg.rotate_glwe(mq, tv, int(s - b)) for s, b in zip(sw, body)])
    err = measure.relative(mq.sub(phase, want), p.q)

    assert p.blind_rotation == rotation
    v_bsk = noise.bootstrap_key_variance(p)
    digit2 = ((1 << 2 * p.pbs_base_log) + 2) / 12
    first = alg.decompose(start, mq, p.pbs_base_log, p.pbs_level).double().pow(2).sum((-1, -2))  # sum_j ||d_j||^2
    steps = p.n // g
    key_weight = (1 + int(ctx.glwe_key.data.sum())) / (1 + p.k * p.N * 0.5)  # this key's E[s^2] against the model's
    dec = noise._ep_decomposition_term(p) * key_weight
    rounding = steps * noise.fourier_product_variance(p) + noise.torus_to_q_variance(p) * key_weight
    predicted = (1 << g) * v_bsk * (first + (steps - 1) * k1 * p.pbs_level * p.N * digit2) + steps * dec + rounding
    # the model (2^G key terms per group, every group) is this but for the first group's digits
    assert float((err * err).mean()) <= noise.pbs_variance(p)
    assert noise.pbs_variance(p) == pytest.approx(steps * ((1 << g) * k1 * p.pbs_level * p.N * digit2 * v_bsk
                                                           + noise._ep_decomposition_term(p)
                                                           + noise.fourier_product_variance(p))
                                                  + noise.torus_to_q_variance(p), rel=1e-9)
    entries = steps * (1 << g) * k1 * p.pbs_level * p.N
    measure.assert_ratios((err * err).mean(-1) / predicted, f"{p.name} after the multi-bit blind rotation",
                          extra=(1.7 / entries) ** 0.5)
