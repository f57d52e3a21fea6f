"""The centered modulus switch (algorithms.center_modulus_switch, noise.modulus_switch_variance,
noise.window_offset): its integer recipe against exact Python integers, the measured rounding
error of the switched phase in both modes against the noise model, and whole PBS in both modes."""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import pytest
import torch

from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import noise
from fhetorch._tfhe.context import TFHEContext
from fhetorch._tfhe.entities import LweSecretKey
from fhetorch._tfhe.lut import LUT
from fhetorch._tfhe.lwe_tensor import LWETensor
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.params import make_params
from fhetorch._tfhe.presets import PRESETS
from fhetorch.errors import InsecureParametersWarning

from .inputs import MODULI, Q, rand_mod_q

MODULUS = Modulus(MODULI)


def toy(mode: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return make_params(replace(PRESETS["toy-tfhe-4bit"], modulus_switch_type=mode, **kw), allow_insecure=True)


def centred(x: int, m: int) -> int:
    x %= m
    return x - m if x > m // 2 else x


def reference_center(row: list, log_modulus: int, ternary: bool = False) -> list:
    """The centered body correction with exact Python integers, from its definition:
    body + round(E[s] sum_i (round(a~_i q / 2N) - a_i)) - round(q / 4N), a~_i = round(2N a_i / q) mod 2N."""
    two_n = 1 << log_modulus
    *a, b = row
    total = 0
    for x in a:
        switched = (2 * two_n * x + Q) // (2 * Q) % two_n  # round(2N x / q) mod 2N
        t = centred((2 * switched * Q + two_n) // (2 * two_n) - x, Q)  # round(a~ q / 2N) - a
        assert abs(t) <= Q / (2 * two_n) + 1
        total += t
    mean = 0 if ternary else (total + 1) // 2  # round(total / 2)
    return a + [(b + mean - (Q + two_n) // (2 * two_n)) % Q]


@pytest.mark.parametrize("log_modulus, n, seed", [(11, 32, 1), (12, 918, 2), (17, 64, 3)])
def test_center_modulus_switch_matches_exact_integers(log_modulus, n, seed):
    gen = torch.Generator().manual_seed(seed)
    ct = rand_mod_q(gen, 40, n + 1)
    two_n = 1 << log_modulus
    # the edges: a = 0, q - 1, and values on both sides of a rounding boundary of the switch
    edge = torch.tensor([0, Q - 1, Q // two_n // 2, Q // two_n // 2 + 1, Q - Q // two_n // 2, 1], dtype=torch.int64)
    ct[0, : edge.numel()] = edge
    for ternary in (False, True):
        dist = "ternary" if ternary else "binary"
        out = alg.center_modulus_switch(ct, MODULUS, log_modulus, dist)
        assert out.dtype == torch.int64 and out.shape == ct.shape
        assert out.tolist() == [reference_center(row, log_modulus, ternary) for row in ct.tolist()]


def switched_phase_error(params, key: torch.Tensor, samples: int, seed: int) -> torch.Tensor:
    """e = phase~ - 2N phase / q (centred mod 2N, in 2N steps) of `samples` random ciphertexts
    under `key`, after the PBS's modulus switch (centered first when the parameters say so)."""
    gen = torch.Generator().manual_seed(seed)
    n, log_2n = params.lwe_dimension, params.log_n + 1
    two_n = 1 << log_2n
    ct = rand_mod_q(gen, samples, n + 1)
    phase = alg.decrypt_lwe_ciphertext(MODULUS, LweSecretKey(key), ct)
    if params.modulus_switch_type == "centered":
        ct = alg.center_modulus_switch(ct, MODULUS, log_2n, params.secret_distribution)
    sw = alg.modulus_switch(ct, MODULUS, log_2n)
    switched = (sw[:, -1] - (sw[:, :-1] * key).sum(-1)) % two_n
    e = switched.double() - phase.double() * (two_n / Q)
    return torch.remainder(e + two_n / 2, two_n) - two_n / 2


@pytest.mark.parametrize("weight", [16, 5])
def test_measured_modulus_switch_error_matches_the_model(weight):
    """Sample mean and variance of the switched phase's rounding error, standard and centered, at
    toy-tfhe-4bit (n = 32, 2N = 2048), against window_offset and modulus_switch_variance: standard
    (1 + |s|) / 12 steps^2 (|s| the key's weight; the model's n E[s^2] = 16 is the balanced key),
    centered (1 + n / 4) / 12 whatever the key. Bands: 5 standard errors of each estimate."""
    samples = 60000
    gen = torch.Generator().manual_seed(weight)
    key = torch.zeros(32, dtype=torch.int64)
    key[torch.randperm(32, generator=gen)[:weight]] = 1
    measured = {}
    for mode in ("standard", "centered"):
        p = toy(mode)
        two_n = 2 * p.polynomial_size
        e = switched_phase_error(p, key, samples, seed=weight + 7)
        # the standard switch's error is centred on v box, half a step above the window's centre;
        # the centered one subtracts round(q / 4N), i.e. half a step
        shift = 0.0 if mode == "standard" else -((Q + two_n) // (2 * two_n)) * two_n / Q
        assert noise.window_offset(p) * two_n == pytest.approx(0.5 if mode == "standard" else 0.0)
        d = e - shift
        var = float((d * d).mean())
        m4 = float((d**4).mean())
        band = 5 * math.sqrt((m4 - var * var) / samples)
        assert abs(float(d.mean())) < 5 * math.sqrt(var / samples)
        model = noise.modulus_switch_variance(p) * two_n**2
        if mode == "standard":
            model *= (1 + weight) / (1 + 16)  # the model's key is the average one: E[|s|] = n/2
        assert abs(var - model) < band, (mode, var, model, band)
        measured[mode] = var
    if weight == 16:  # the balanced key: 9/17 of the standard variance; a light key can lose
        assert measured["centered"] < 0.6 * measured["standard"]


@pytest.mark.parametrize("mode", ["standard", "centered"])
def test_pbs_in_both_modes_is_exact(mode):
    """Every input of a random 4-bit LUT through a KS-PBS, with either modulus switch."""
    p = toy(mode)
    ctx = TFHEContext(p, seed=5).keygen()
    gen = torch.Generator().manual_seed(11)
    table = torch.randint(0, 16, (16,), generator=gen)
    x = torch.arange(16).repeat(4)
    out = ctx.decrypt(LUT.from_table(table)(ctx.encrypt(x)))
    assert torch.equal(out, table[x])


@pytest.mark.parametrize("mode", ["standard", "centered"])
def test_decision_window_through_the_pbs(mode):
    """Noiseless (trivial) ciphertexts v delta + x q / 2N under the big key go through the KS-PBS
    exactly (zero masks: no key-switching or mask-rounding error), so the identity LUT shows the
    decision window around each value v, in steps of the 2N torus, half a box = 32 steps: the
    standard switch reads v on [-32.5, 31.5), the centered one on [-32, 32)."""
    p = toy(mode)
    ctx = TFHEContext(p, seed=3).keygen()
    two_n, big = 2 * p.polynomial_size, p.big_lwe_dimension
    v = torch.arange(1, 15)
    lut = LUT(lambda m: m, bits=4)

    def read(steps: float) -> torch.Tensor:
        body = (v * p.delta + round(steps * Q / two_n)) % Q
        data = alg.trivial_lwe_ciphertext(body, big)
        return ctx.decrypt(lut(LWETensor(ctx, data, 15)))

    inside = (-31.75, 31.25) if mode == "standard" else (-31.75, 31.75)
    outside = (-32.75, 31.75) if mode == "standard" else (-32.25, 32.25)
    for steps in inside:
        assert torch.equal(read(steps), v), steps
    assert torch.equal(read(outside[0]), v - 1) and torch.equal(read(outside[1]), v + 1)


def test_centered_switch_halves_the_binary_model_term():
    p, c = toy("standard"), toy("centered")
    two_n2 = (2 * p.polynomial_size) ** 2
    assert noise.modulus_switch_variance(p) * two_n2 * 12 == pytest.approx((1 + 32 / 2) * (1 - 1 / Q**2))
    assert noise.modulus_switch_variance(c) * two_n2 * 12 == pytest.approx((1 + 32 / 4) * (1 - 1 / Q**2))
    # ternary secrets have mean 0: centering leaves the variance, and only removes the half step
    t = replace(c, secret_distribution="ternary")
    assert noise.modulus_switch_variance(t) == noise.modulus_switch_variance(replace(p, secret_distribution="ternary"))
    assert noise.window_offset(t) == 0.0 and noise.window_offset(p) == 1 / (4 * p.polynomial_size)
