"""Encrypted bitonic sort (fhetorch/circuits/sort.py): the encrypted network against the same
network on plaintext (plain_sort, within CKKS noise) and against torch.sort within the stated
bound, on fresh random inputs, near-ties and equal values, both directions, n = 1 and 2, the
level plan against the run, and the errors. The toy runs use a shallow sign (stage depth 6 =
toy-n13-bts's levels after a bootstrap) so they take seconds; the default composite's precision
at 2^14 values is checked on plaintext (the encrypted network equals it within noise).
"""
import math
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch.circuits import sort as S

TOY = "toy-n13-bts"
SHALLOW = dict(degrees=(7, 3), eps=2.0**-3)  # depth 3 + 2, + 1 for the product: 6 levels a stage
NOISE = 1e-4  # CKKS noise of the toy runs against plain_sort (measured ~1e-5)


@pytest.fixture(scope="module")
def bctx(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context(TOY, device)
    return ctx.keygen(bootstrap=True, bootstrap_slots=[2, 8])


def _rand(n, gen):
    return torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1


def _check(ctx, x, out, bs, assert_close):
    got = ctx.decrypt(out) if isinstance(out, fhe.EncryptedTensor) else ctx.decrypt_vector(out).real[: x.numel()]
    want = torch.sort(x, descending=bs.descending).values
    assert_close(got, bs.plain(x), NOISE, "encrypted vs plain_sort")
    assert_close(got, want, bs.error_bound() + NOISE, "encrypted vs torch.sort")


def test_network_counts_and_exact_sign_sorts(seed):
    for n in (1, 2, 4, 64, 1024):
        assert len(S.network(n)) == round(math.log2(n) * (math.log2(n) + 1) / 2)
    x = torch.rand(256, dtype=torch.float64) * 2 - 1
    for descending in (False, True):  # with the exact sign the network is torch.sort
        y = S.plain_sort(x, [torch.sign], descending=descending)
        assert float((y - torch.sort(x, descending=descending).values).abs().max()) < 1e-12


@pytest.mark.parametrize("sign", [(S.SORT_DEGREES, S.SORT_EPS), *S.SORT_SIGN.values()])
def test_default_composite_gives_12_bits_at_2_14_values(seed, sign):
    """The plaintext simulation that chose SORT_DEGREES / SORT_EPS and the presets' SORT_SIGN:
    >= 12 bits on uniform values on average, and no input far below. The precision depends on the
    input (its closest pairs): the depth-16 sign measured 12.24 bits on average over 30 seeds, 11.87 at
    the least, 3 of 30 below 12; so the mean of four fresh inputs is held to 12 (~3 sigma) and each
    to 11.5."""
    stages, _ = S.composite_sign_series(*sign)
    bits = []
    for _ in range(4):
        x = torch.rand(2**14, dtype=torch.float64) * 2 - 1
        err = float((S.plain_sort(x, stages) - torch.sort(x).values).abs().max())
        assert err <= S.error_bound(2**14, stages)
        bits.append(-math.log2(err))
    assert min(bits) >= 11.5 and sum(bits) / len(bits) >= 12.0, bits


def test_preset_sign_and_its_level_plan():
    """n16-bts40 sorts with its own sign (depth 16): three 12-level windows per two stages, 52 + 104
    bootstraps at 2^14 values where the general default (depth 17) needs 1 + 206; a given sign wins."""
    assert S.sort_sign("toy-n12") == (S.SORT_DEGREES, S.SORT_EPS)
    assert S.sort_sign("n16-bts40") == S.SORT_SIGN["n16-bts40"]
    assert S.sort_sign("n16-bts40", (7, 3), 0.125) == ((7, 3), 0.125)
    ctx = fhe.ckks.Context("n16-bts40", "cpu")  # no keys: the plan needs levels only
    top = ctx.bootstrap_config.user_levels
    bs = S.BitonicSort(ctx, 2**14)
    assert bs.stage_depth == 17
    plan = bs.plan(top, ctx.max_level)
    assert (plan.bootstraps, plan.pair_bootstraps) == (52, 104)
    general = S.BitonicSort(ctx, 2**14, degrees=S.SORT_DEGREES, eps=S.SORT_EPS).plan(top, ctx.max_level)
    assert (general.bootstraps, general.pair_bootstraps) == (1, 206)


def test_plain_sort_bound_holds_on_adversarial_inputs(seed):
    """Near-ties at the sign's eps, equal values and extremes: within error_bound for any input."""
    stages, _ = S.composite_sign_series((7, 3), 2.0**-3)
    n = 64
    bound = S.error_bound(n, stages)
    base = torch.rand(n // 4, dtype=torch.float64) * 1.6 - 0.8
    near = torch.cat([base, base + 2.0**-4, base - 2.0**-5, base])  # gaps at eps / 2 and exact ties
    for x in (near[torch.randperm(n)], torch.ones(n), torch.tensor([-1.0, 1.0] * (n // 2))):
        err = float((S.plain_sort(x, stages) - torch.sort(x).values).abs().max())
        assert err <= bound, (err, bound)
    same = torch.full((n,), float(base[0]), dtype=torch.float64)
    assert float((S.plain_sort(same, stages) - same).abs().max()) < 1e-12  # D = 0: equal values are exact


def test_sort_without_bootstrapping(ctx_n12, assert_close, seed):
    """toy-n12 (10 levels): n = 2 is one stage (1 + 6 + 1 levels), both directions."""
    x = torch.tensor([0.7, -0.2], dtype=torch.float64) * torch.sign(torch.randn(1, dtype=torch.float64))
    for descending in (False, True):
        bs = S.BitonicSort(ctx_n12, 2, descending=descending, **SHALLOW)
        out = fhe.ckks.sort(ctx_n12.encrypt(x), descending=descending, **SHALLOW)
        _check(ctx_n12, x, out, bs, assert_close)
        assert out.level == ctx_n12.max_level - 2 - bs.stage_depth  # the maps onto [-1/2, 1/2] and back: a level each


def test_sort_with_bootstraps_matches_plan(bctx, assert_close, seed):
    """n = 8, near-ties and an exact tie, from the top level: 3 stages fit, the other 3 and the map back bootstrap."""
    gen = torch.Generator().manual_seed(seed)
    x = _rand(8, gen)
    x[3] = x[5] + 0.01
    x[6] = x[1]
    bs = S.BitonicSort(bctx, 8, **SHALLOW)
    ex = bctx.encrypt(x)
    out = bs(ex.ciphertext)
    plan = bs.plan(bctx.bootstrap_config.user_levels, ex.level)
    assert (bs.counts.bootstraps, bs.counts.pair_bootstraps, bs.counts.rotations) == (
        plan.bootstraps, plan.pair_bootstraps, plan.rotations)
    assert plan.bootstraps == 4 and plan.pair_bootstraps == 0  # 3 stages and the map back onto [a, b]
    _check(bctx, x, out, bs, assert_close)


def test_pair_bootstrap_inside_a_stage(bctx, assert_close, seed):
    """A sign deeper than the levels a bootstrap leaves (7 + 1 > 6): the stage refreshes its partial
    sign and x together (bootstrap_pair), torch.sort dispatches to it, descending too."""
    gen = torch.Generator().manual_seed(seed)
    x = _rand(2, gen)
    bs = S.BitonicSort(bctx, 2, degrees=(7, 7), eps=2.0**-4, descending=True)
    ex = bctx.encrypt(x).drop_level(bctx.max_level - bctx.bootstrap_config.user_levels)
    out = bs(ex.ciphertext)
    assert bs.counts.pair_bootstraps == 1 and bs.counts.bootstraps == 0
    assert bs.plan(bctx.bootstrap_config.user_levels, ex.level).pair_bootstraps == 1
    _check(bctx, x, out, bs, assert_close)


def test_torch_sort_values_and_indices(bctx, ctx_n12, assert_close, seed):
    """torch.sort runs the default composite (18 levels a stage: n = 2 fits toy-n13-bts's top)."""
    x = torch.rand(2, dtype=torch.float64) - 0.5
    ex = bctx.encrypt(x)
    r = torch.sort(ex, descending=True)
    assert r[0] is r.values
    bs = S.BitonicSort(bctx, 2, descending=True)
    _check(bctx, x, r.values, bs, assert_close)
    with pytest.raises(fhe.UnsupportedOperationError, match="fhetorch.ckks.sort"):
        r.indices
    with pytest.raises(fhe.UnsupportedOperationError, match="indices"):
        _, _ = torch.sort(ex)
    one = ctx_n12.encrypt(torch.tensor([0.3], dtype=torch.float64))
    assert_close(ctx_n12.decrypt(torch.msort(one)), torch.tensor([0.3], dtype=torch.float64), 1e-6, "n = 1")


def test_errors(ctx_n12, make_context):
    ex = ctx_n12.encrypt(torch.rand(6, dtype=torch.float64))
    with pytest.raises(fhe.ShapeError, match="power of two"):
        fhe.ckks.sort(ex)
    with pytest.raises(fhe.ShapeError, match="1-D"):
        fhe.ckks.sort(ctx_n12.encrypt(torch.rand(2, 4, dtype=torch.float64)))
    with pytest.raises(fhe.ShapeError):
        fhe.ckks.sort(ctx_n12.encrypt(torch.rand(2 * ctx_n12.slots, dtype=torch.float64)))
    with pytest.raises(fhe.ShapeError, match="do not fit"):
        S.BitonicSort(ctx_n12, 2 * ctx_n12.slots)
    with pytest.raises(fhe.ApproximationError):
        fhe.ckks.sort(ctx_n12.encrypt(torch.rand(4, dtype=torch.float64)), interval=(1, -1))
    with pytest.raises(fhe.ContextError):
        fhe.ckks.sort(torch.rand(4))
    # toy-n12 has 10 levels: 4 values (3 stages of 6) run out, and it does not bootstrap
    with pytest.raises(fhe.LevelError, match="does not bootstrap"):
        fhe.ckks.sort(ctx_n12.encrypt(torch.rand(4, dtype=torch.float64)), **SHALLOW)
    # a bootstrappable preset without the bootstrapping keys
    ctx = make_context(TOY)
    with pytest.raises(fhe.MissingKeyError, match=r"keygen\(bootstrap=True"):
        fhe.ckks.sort(ctx.encrypt(torch.rand(8, dtype=torch.float64)).drop_level(ctx.max_level - 2), **SHALLOW)


def test_margin_absorbs_noise_at_the_interval_ends(seed):
    """Values at the interval's ends plus noise (2^-8 here; a bootstrap adds ~2^-13 at n16-bts35)
    give differences just above 1, where the composite sign diverges (~d^2 per stage, compounded:
    overflow without the margin); inside the margin the network stays within its bound."""
    stages, _ = S.composite_sign_series(S.SORT_DEGREES, S.SORT_EPS)
    x = torch.where(torch.rand(64) < 0.5, 1.0, -1.0).to(torch.float64)
    x[:2] = torch.tensor([1.0, -1.0], dtype=torch.float64)
    noisy = x * (1 + 2.0**-8)
    err = float((S.plain_sort(noisy, stages) - torch.sort(noisy).values).abs().max())
    assert err <= S.error_bound(64, stages), err


def test_values_at_the_interval_ends_encrypted(bctx, assert_close):
    """The same end to end: differences of exactly +-1 plus the toy preset's noise."""
    x = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    bs = S.BitonicSort(bctx, 8)
    ct = bctx.encrypt_vector(x.to(torch.complex128).to(bctx.device), slots=8)
    _check(bctx, x, bs(ct), bs, assert_close)
