"""The PBS failure rate against the noise model's p_fail, at toy-tfhe-4bit-noisy (a key switch
noisy enough that a PBS fails with probability ~ 2^-4.4): random 4-bit messages, fresh under
the big key, through the identity LUT; the count of wrong outputs must lie within 4 binomial
standard deviations of count * p_fail.

p_fail is noise.p_fail(params, input_variance=...), the model's own function, with the input
variance moved by what this key's weights and key-switching-key noise add beyond their
expectations (tests/_tfhe/measure.py): one key is one draw, and its key-switching-key noise
alone moves p_fail by ~ 4 %.

Where a PBS fails is decided at the modulus-switch output: the fast test counts the decisions
of 8192 ciphertexts (key switch and modulus switch only) and checks that real PBS return exactly
the decided outputs, wrong ones included; the slow one runs 2000 PBS through the public API
(one batched call) and counts their wrong outputs.

The secure presets' claims (128-bit security, modelled p_fail <= 2^-64, <= 2^-128 for the -p128
ones) are tests/_tfhe/test_params.py::test_secure_presets and
tests/_tfhe/test_noise_model.py::test_secure_preset_p_fail_claims; the model's p_fail is checked
there against TFHE-rs's stated p_fail of the cited parameter sets.
"""
import math

import pytest
import torch

import fhetorch as fhe
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe import noise

from _tfhe.measure import conditioned_input_variance, context, fresh_messages, switched_phase

NOISY = "toy-tfhe-4bit-noisy"
SIGMAS = 4.0


def _p_fail(ctx) -> float:
    v_in = noise.fresh_glwe_variance(ctx.params)
    return noise.p_fail(ctx.params, input_variance=conditioned_input_variance(ctx, v_in))


def _assert_binomial(wrong: int, count: int, p: float, what: str):
    mean, sd = count * p, math.sqrt(count * p * (1 - p))
    assert abs(wrong - mean) <= SIGMAS * sd, (f"{what}: {wrong} wrong of {count}, the model expects {mean:.1f} "
                                              f"+- {SIGMAS * sd:.1f} (p_fail {p:.4f})")


def _decided(ctx, ks: torch.Tensor, tv: torch.Tensor) -> torch.Tensor:
    """The message a PBS returns for the key-switched ciphertexts ks: coefficient 0 of
    X^(-phase~) tv, decoded (the blind rotation's own noise is 2^-40 of a message step)."""
    big_n = ctx.params.N
    _, phase = switched_phase(ctx, ks)
    value = torch.where(phase < big_n, tv[phase % big_n], ctx.modulus.neg(tv[phase % big_n]))
    return ctx.decode(value) % ctx.params.message_modulus


def test_failures_are_decided_at_the_modulus_switch():
    ctx = context(NOISY)
    mm = ctx.params.message_modulus
    m = fresh_messages(ctx, 8192, seed=21)
    ex = ctx.encrypt(m)
    ks = alg.keyswitch_lwe_ciphertext(ctx.keyswitch_key, ex.data, ctx.modulus)
    identity = fhe.tfhe.LUT(lambda v: v, bits=4)
    out = _decided(ctx, ks, ctx._test_polynomials([identity.tables_for(mm)]))
    wrong = out != m
    _assert_binomial(int(wrong.sum()), m.numel(), _p_fail(ctx), f"{NOISY}, decisions at the modulus switch")

    pick = torch.cat((torch.nonzero(wrong).flatten()[:24], torch.nonzero(~wrong).flatten()[:24]))
    got = ctx.decrypt(identity(ex[pick]))
    assert torch.equal(got, out[pick]), "a PBS must return the decided message, wrong or right"


@pytest.mark.slow
def test_failure_rate_of_2000_pbs():
    ctx = context(NOISY)
    m = fresh_messages(ctx, 2000, seed=22)
    ex = ctx.encrypt(m)
    identity = fhe.tfhe.LUT(lambda v: v, bits=4)
    got = ctx.decrypt(identity(ex))  # one batched PBS
    _assert_binomial(int((got != m).sum()), m.numel(), _p_fail(ctx), f"{NOISY}, 2000 PBS")
    ks = alg.keyswitch_lwe_ciphertext(ctx.keyswitch_key, ex.data, ctx.modulus)
    tv = ctx._test_polynomials([identity.tables_for(ctx.params.message_modulus)])
    assert torch.equal(got, _decided(ctx, ks, tv)), "every PBS must return the message decided at the modulus switch"
