"""Measuring TFHE noise against the model (fhetorch/_tfhe/noise.py), shared by
tests/_tfhe/test_noise_measured.py and tests/tfhe/test_failure_rate.py.

Errors are (phase - delta m) centred mod q, divided by q (relative, the model's units).

The model is an expectation over random keys: E[s^2] = 1/2 (binary) or 2/3 (ternary) for the
weight of a secret, the sampler's variance for the noise of the key-switching key. One measured
context has one key, with its own weights sum s_i^2 and its own key-switching-key noise; at the
toy sizes (n = 32) a key's weight alone moves the modulus-switch variance by +-20 %. So the
predictions here are the model's own functions with the key's realised weights and noise put in
place of their expectations (`conditioned_*`); with the expected weights they are the model
exactly.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import torch

import fhetorch as fhe
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import noise

Z = 5.0  # two-sided P(|N(0,1)| > 5) = 5.7e-7 per comparison
MAX_BAND = 0.10  # a band this narrow makes a model 20 % off fail (but for a > 4-sigma fluke)


@functools.lru_cache(maxsize=None)
def context(name: str, **changes) -> fhe.tfhe.Context:
    """A keyed context of the preset `name`, with literal fields changed (insecure variants)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.tfhe.preset(name)
        if changes:
            lit = dataclasses.replace(p.literal(), name=f"{name}-variant", **changes)
            p = fhe.tfhe.make_params(lit, allow_insecure=True)
        return fhe.tfhe.Context(p).keygen()


def centred(x: torch.Tensor, modulus: int) -> torch.Tensor:
    """x in [0, modulus) -> the representative in [-modulus/2, modulus/2), as int64."""
    return torch.where(x >= (modulus + 1) // 2, x - modulus, x)


def relative(x: torch.Tensor, q: int) -> torch.Tensor:
    """Centred x mod q divided by q, float64 (exact to 2^-52 relative: x < 2^62)."""
    return centred(x, q).double() / q


def fresh_messages(ctx, count: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, ctx.params.message_modulus, (count,), generator=g)


# --- key-conditioned predictions -----------------------------------------------------------------
def keyswitch_key_noise(ctx) -> torch.Tensor:
    """The noise of every key-switching-key entry (kN, level), relative: each row, an LWE
    encryption of s_big[i] G_j under the small key, decrypted with the secrets."""
    p, mq = ctx.params, ctx.modulus
    r = ctx.keyswitch_key.data.to(torch.int64)  # (kN, level, 2, n + 1) residues
    rows = mq.compose(r[..., 0, :], r[..., 1, :])
    phase = alg.decrypt_lwe_ciphertext(mq, ctx.lwe_key, rows)
    g = torch.tensor(alg.gadget(p.q, p.ks_base_log, p.ks_level), dtype=torch.int64)
    msg = ctx.glwe_key.as_lwe_key().data.view(-1, 1) * g.view(1, -1)
    return relative(mq.sub(phase, msg), p.q)


def keyswitch_mean(ctx) -> float:
    """The mean error the key switch adds under this key: its digits are uniform on
    [-B/2, B/2), mean -1/2, and the output is b - sum d_ij KSK_ij, so + sum e_ij / 2. Over random
    keys it averages out (the model's second moment (B^2+2)/12 = Var d + 1/4 holds it)."""
    return 0.5 * float(keyswitch_key_noise(ctx).sum())


def keyswitch_second_moment(params, weight: float, noise_squares: float, noise_sum: float) -> float:
    """The key switch's added second moment for a big key of weight h whose key-switching key has
    noise entries e_ij: h v_dec + (B^2-1)/12 sum e_ij^2 + (sum e_ij / 2)^2. With the expected
    h = kN/2, sum e^2 = (sum e)^2 = kN level v_lwe it is noise.keyswitch_variance."""
    b = 1 << params.ks_base_log
    v_dec = noise.decomposition_error_variance(params.q, params.ks_base_log, params.ks_level)
    return weight * v_dec + (b * b - 1) / 12 * noise_squares + (noise_sum / 2) ** 2


def key_weight(key: torch.Tensor) -> int:
    """sum s_i^2: the Hamming weight of a binary or ternary key (the model's n E[s^2])."""
    return int((key * key).sum())


def conditioned_keyswitch_variance(ctx) -> float:
    """keyswitch_second_moment of this context's key."""
    e = keyswitch_key_noise(ctx).double()
    return keyswitch_second_moment(ctx.params, key_weight(ctx.glwe_key.data), float((e * e).sum()), float(e.sum()))


def conditioned_modulus_switch_variance(ctx) -> float:
    """noise.modulus_switch_variance with the small key's weight: 1 + sum (s_i - m)^2 rounding
    errors' worth, m = E[s] for the centered switch (binary: (s_i - 1/2)^2 = 1/4 whatever the key;
    ternary: m = 0, the weight), m = 0 for the standard one."""
    p = ctx.params
    mean = noise.secret_mean(p.secret_distribution) if p.modulus_switch_type == "centered" else 0.0
    s = ctx.lwe_key.data.double()
    weight = float(((s - mean) ** 2).sum())
    expected = p.n * (noise.secret_second_moment(p.secret_distribution) - mean * mean)
    return noise.modulus_switch_variance(p) * (1 + weight) / (1 + expected)


def conditioned_decision_variance(ctx, input_variance: float) -> float:
    """noise.decision_variance(p, input_variance) with the key's weights and noise energy."""
    p = ctx.params
    model = noise.decision_variance(p, input_variance)
    return model + (conditioned_keyswitch_variance(ctx) - noise.keyswitch_variance(p)) + \
        (conditioned_modulus_switch_variance(ctx) - noise.modulus_switch_variance(p))


def conditioned_input_variance(ctx, input_variance: float) -> float:
    """The input variance that makes noise.decision_variance / noise.p_fail give the
    key-conditioned value (the decision variance is additive in it)."""
    return input_variance + conditioned_decision_variance(ctx, input_variance) - \
        noise.decision_variance(ctx.params, input_variance)


def switched_phase(ctx, ks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a~, phase~): the key-switched ciphertexts (..., n + 1) modulus-switched to 2N as the PBS
    does (with the centered switch's body correction where the parameters use it), and their
    phase b~ - <a~, s> mod 2N under the small key."""
    two_n = 2 * ctx.params.N
    log_2n = two_n.bit_length() - 1
    if ctx.params.modulus_switch_type == "centered":
        ks = alg.center_modulus_switch(ks, ctx.modulus, log_2n, ctx.params.secret_distribution)
    sw = alg.modulus_switch(ks, ctx.modulus, log_2n)
    phase = (sw[..., -1] - (sw[..., :-1] * ctx.lwe_key.data).sum(-1)) % two_n
    return sw, phase


# --- the comparison ---------------------------------------------------------------------------------
def assert_variance(errors: torch.Tensor, predicted: float, what: str, *, mean: float = 0.0, extra: float = 0.0):
    """errors: independent samples (relative). Their mean square must equal `predicted` within
    Z standard errors (the standard error of a mean of squares, from the samples' own fourth
    moment, so non-Gaussian noise gets its true spread; `extra`: a further relative standard
    deviation, e.g. a key's noise energy not conditioned on), and that band must be narrow
    enough to catch a 20 % model error. The mean must be `mean` within Z standard errors."""
    e = errors.double().flatten()
    n = e.numel()
    sq = e * e
    measured = float(sq.mean())
    rel_se = math.sqrt((float(sq.var()) / n) / predicted ** 2 + extra ** 2)
    band = Z * rel_se
    assert band <= MAX_BAND, f"{what}: {n} samples give a band of {band:.3f}, too wide to test the model"
    ratio = measured / predicted
    assert abs(ratio - 1) <= band, (f"{what}: measured variance {measured:.4e} = {ratio:.4f} x the model's "
                                    f"{predicted:.4e} (allowed 1 +- {band:.4f})")
    got = float(e.mean())
    assert abs(got - mean) <= Z * math.sqrt(float(e.var()) / n), f"{what}: mean error {got:.3e}, expected {mean:.3e}"
    return ratio


def assert_ratios(ratios: torch.Tensor, what: str, *, z: float = 6.0, extra: float = 0.0):
    """ratios: per-group measured / predicted variances of independent groups (ciphertexts) whose
    samples within a group may be dependent; their mean must be 1 within z standard errors of
    the groups' spread (Student t with G - 1 degrees of freedom: a chance failure below 1e-6
    with z = 6 from G = 48, with z = 5 from G = 300)."""
    r = ratios.double()
    g = r.numel()
    band = z * math.sqrt(float(r.var()) / g + extra ** 2)
    assert band <= MAX_BAND, f"{what}: {g} groups give a band of {band:.3f}, too wide to test the model"
    mean = float(r.mean())
    assert abs(mean - 1) <= band, f"{what}: measured = {mean:.4f} x the key-conditioned model (allowed 1 +- {band:.4f})"
    return mean
