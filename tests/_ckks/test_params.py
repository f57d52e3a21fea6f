"""Parameters and presets: literal -> validated, security bounds, prime chains, rational
rescaling, warnings, bootstrappable chains."""
import dataclasses
import math
import re
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks.presets import PRESETS
from fhetorch.circuits.bootstrap_config import BOOTSTRAP_PRESETS
from fhetorch.ckks import HE_STANDARD_128, ParamsLiteral, PresetInfo, make_params

TOY = ["toy-n10", "toy-n12", "toy-n13"]
SECURE = ["n16-rr40", "n16-rr35", "n16-dr56"]
ALL = TOY + SECURE


def _params(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.ckks.preset(name)


def _is_prime(n: int) -> bool:
    """Trial division (n < 2^31), independent of fhetorch's Miller-Rabin."""
    odd = torch.arange(3, max(3, math.isqrt(n) + 1), 2, dtype=torch.int64)
    return n == 2 or (n > 2 and n % 2 == 1 and bool((n % odd != 0).all()))


def test_he_standard_table():
    # HE standard, ternary secret, sigma 3.2, 128-bit classical; 2^16 as libraries extrapolate
    assert HE_STANDARD_128 == {10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772}


def test_presets_listed_with_fields():
    ps = fhe.ckks.presets()
    for name in ALL:
        assert name in ps, f"preset {name} missing from presets()"
    for name, info in ps.items():
        assert isinstance(info, PresetInfo)
        assert info.name == name
        assert info.N & (info.N - 1) == 0 and info.N >= 1024
        assert info.slots == info.N // 2
        assert isinstance(info.levels, int) and info.levels >= 1
        assert isinstance(info.dnum, int) and info.dnum >= 1
        assert info.scale_bits in (35, 40, 56, 60)
        assert info.security_bits in (0, 128)
        p = _params(name)
        assert p.max_level == info.levels and p.n == info.N and p.dnum == info.dnum
        assert abs(p.log_pq - info.log_pq) < 0.01


@pytest.mark.parametrize("name", SECURE)
def test_secure_presets_within_he_standard(name):
    info = fhe.ckks.presets()[name]
    assert info.N == 2**16
    assert info.security_bits == 128
    assert info.log_pq <= HE_STANDARD_128[int(math.log2(info.N))]
    p = _params(name)
    assert p.hamming_weight is None, "secure presets use dense ternary secrets"
    assert p.log_pq <= HE_STANDARD_128[p.log_n]
    # secure presets do not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", fhe.InsecureParametersWarning)
        fhe.ckks.preset(name)


@pytest.mark.parametrize("name", ["n16-rr40", "n16-rr35"])
def test_secure_rr_presets_take_most_levels(name):
    p = _params(name)
    with pytest.raises(fhe.ParameterError):
        make_params(p.log_n, chain=p.chain, levels=p.max_level + 1, dnum=p.dnum)
    assert p.scale_bits == int(name[-2:])


@pytest.mark.parametrize("name", TOY)
def test_toy_presets(name):
    info = fhe.ckks.presets()[name]
    assert info.security_bits == 0
    assert info.scale_bits >= 30
    assert info.levels >= 8
    with pytest.warns(fhe.InsecureParametersWarning):
        fhe.ckks.preset(name)


@pytest.mark.parametrize("name", ["toy-n12", "toy-n10"])
def test_toy_context_warns(name):
    with pytest.warns(fhe.InsecureParametersWarning):
        fhe.ckks.Context(name)


def test_unknown_preset():
    with pytest.raises(fhe.ParameterError, match="toy-n12"):  # lists the available ones
        fhe.ckks.preset("toy-n99")


def test_make_params_over_bound_raises_with_advice():
    with pytest.raises(fhe.ParameterError) as e:
        make_params(12, chain="rr40", levels=10)
    msg = str(e.value)
    assert "make_params" in msg
    assert "109" in msg  # the bound it exceeds
    assert "fewer levels" in msg and "larger N" in msg and "allow_insecure" in msg
    assert isinstance(e.value, fhe.FHEError)


def test_make_params_allow_insecure_warns():
    with pytest.warns(fhe.InsecureParametersWarning):
        p = make_params(12, chain="rr40", levels=10, allow_insecure=True)
    assert p.security_bits == 0
    assert p.max_level == 10


def test_make_params_sparse_secret_is_insecure():
    with pytest.raises(fhe.ParameterError):
        make_params(16, chain="rr40", levels=5, hamming_weight=64)


def test_make_params_default_levels_are_secure():
    with warnings.catch_warnings():
        warnings.simplefilter("error", fhe.InsecureParametersWarning)
        p = make_params(14, chain="rr40")
    assert p.security_bits == 128
    assert p.log_pq <= HE_STANDARD_128[14]
    with pytest.warns(fhe.InsecureParametersWarning):
        more = make_params(14, chain="rr40", levels=p.max_level + 1, allow_insecure=True)
    assert more.log_pq > HE_STANDARD_128[14]


@pytest.mark.parametrize("bad", [dict(log_n=12, chain="nope", levels=3), dict(log_n=9, levels=3),
                                 dict(log_n=12, levels=3, dnum=0), dict(log_n=12, levels=0)])
def test_make_params_rejects_invalid(bad):
    with pytest.raises(fhe.ParameterError):
        make_params(allow_insecure=True, **bad)


@pytest.mark.parametrize("name", ALL)
def test_primes_ntt_friendly_distinct(name):
    p = _params(name)
    two_n = 2 * p.n
    everything = list(p.primes) + list(p.special_primes)
    assert len(set(everything)) == len(everything), "primes are not distinct"
    for q in everything:
        assert q < 2**31, f"prime {q} is not below 2^31"
        assert q % two_n == 1, f"prime {q} is not 1 mod 2N"
        assert _is_prime(q), f"{q} is not prime"
    assert abs(p.log_pq - sum(math.log2(q) for q in everything)) < 1e-9
    # key switching: alpha limbs per digit, dnum digits cover the chain, P above every digit
    assert p.alpha * p.dnum >= len(p.primes) > p.alpha * (p.dnum - 1)
    log_p = sum(math.log2(q) for q in p.special_primes)
    for j in range(p.dnum):
        digit = p.primes[j * p.alpha:(j + 1) * p.alpha]
        assert log_p >= sum(math.log2(q) for q in digit)


@pytest.mark.parametrize("name", ALL)
def test_level_scales_nominal(name):
    p = _params(name)
    assert len(p.level_scales) == p.max_level + 1 == len(p.level_limbs)
    for lvl, s in enumerate(p.level_scales):
        assert abs(math.log2(s) - p.scale_bits) <= 0.2, f"level {lvl}: scale 2^{math.log2(s):.3f}"


def _logq(p, lvl):
    return sum(math.log2(p.primes[i]) for i in p.limbs(lvl))


@pytest.mark.parametrize("name", ALL)
def test_levels_cost_about_scale_bits(name):
    p = _params(name)
    for lvl in range(1, p.max_level + 1):
        r = p.limbs(lvl)
        assert 0 <= r.start < r.stop <= len(p.primes)
        step = _logq(p, lvl) - _logq(p, lvl - 1)
        assert abs(step - p.scale_bits) < 1.0, f"level {lvl - 1} -> {lvl} costs {step:.2f} bits"
        # a product at level l rescaled lands on level l-1's nominal scale:
        #   scale[l-1] = scale[l]^2 * A / D, D / A = Q_l / Q_(l-1)
        lhs = math.log2(p.level_scales[lvl - 1])
        rhs = 2 * math.log2(p.level_scales[lvl]) - step
        assert abs(lhs - rhs) < 1e-6
    # level 0 leaves room above the scale for the message
    assert _logq(p, 0) >= p.scale_bits + 8


@pytest.mark.parametrize("name", ["toy-n10", "toy-n12", "toy-n13", "n16-rr40", "n16-rr35"])
def test_rational_rescaling_adds_primes(name):
    """Rescaling from some level adds primes the upper level lacks (Cheddar's rational rescaling)."""
    p = _params(name)
    adds = [lvl for lvl in range(1, p.max_level + 1) if set(p.limbs(lvl - 1)) - set(p.limbs(lvl))]
    assert adds, "no level transition adds primes: rational rescaling is not used"
    # with ~25/30-bit primes, a 35/40-bit scale is only reachable rationally
    assert p.scale_bits in (35, 40)
    assert max(math.log2(q) for q in p.primes) < 31


# --- literal -> validated -------------------------------------------------------------------
def test_literal_docstring_lists_every_field_and_default():
    doc = ParamsLiteral.__doc__
    for f in dataclasses.fields(ParamsLiteral):
        assert re.search(rf"^\s*{f.name}\s", doc, re.M), f"ParamsLiteral's docstring does not describe {f.name}"
        if f.default is not dataclasses.MISSING:
            shown = f'"{f.default}"' if isinstance(f.default, str) else repr(f.default)
            assert f"{shown} (default)" in doc, f"ParamsLiteral's docstring does not give {f.name}'s default {shown}"


def test_make_params_from_a_literal_or_its_fields():
    lit = ParamsLiteral(12, chain="rr35", levels=5, dnum=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = make_params(lit, allow_insecure=True)
        assert p == make_params(12, chain="rr35", levels=5, dnum=2, allow_insecure=True)
        assert make_params(lit, levels=4, allow_insecure=True).max_level == 4  # fields replace the literal's
    assert lit.levels == 5, "validation does not change the literal"
    assert p.max_level == 5 and p.dnum == 2 and p.chain == "rr35" and p.level_bits is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.dnum = 3


@pytest.mark.parametrize("name", ALL + ["toy-n13-bts", "n16-bts40", "n16-bts35"])
def test_params_rebuild_from_their_literal(name):
    p = _params(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        again = make_params(p.literal(), allow_insecure=name.startswith("toy-"))
    assert again == p and again.describe() == p.describe()


def test_presets_are_literals():
    assert PRESETS and all(isinstance(lit, ParamsLiteral) and lit.name == n for n, lit in PRESETS.items())
    for name, (lit, cfg) in BOOTSTRAP_PRESETS.items():
        assert isinstance(lit, ParamsLiteral) and isinstance(cfg, fhe.ckks.BootstrapConfig) and lit.name == name
    assert set(fhe.ckks.presets()) == set(PRESETS) | set(BOOTSTRAP_PRESETS)


def test_per_level_scales():
    bits = (40, 40, 40, 50, 55, 55, 45)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = make_params(13, level_bits=bits, dnum=3, allow_insecure=True)
    assert p.max_level == len(bits) - 1 and p.level_bits == bits
    for lvl, b in enumerate(bits):
        assert abs(math.log2(p.level_scales[lvl]) - b) < 0.2, (lvl, math.log2(p.level_scales[lvl]))
    with pytest.raises(fhe.ParameterError, match="level_bits"):
        make_params(13, level_bits=bits, levels=3, allow_insecure=True)


def test_bootstrapping_configuration_lives_in_circuits():
    """Params carry each level's scale, not bootstrapping; a configuration checks its chain."""
    p = _params("toy-n13-bts")
    assert not hasattr(p, "bootstrap") and "bootstrap" not in p.describe()
    cfg = fhe.ckks.bootstrap_config("toy-n13-bts")
    assert p.level_bits == tuple(cfg.level_bits(p.scale_bits)) and p.max_level == cfg.top
    assert fhe.ckks.bootstrap_config("toy-n12") is None
    other = dataclasses.replace(cfg, stc_levels=cfg.stc_levels + 1)
    with pytest.raises(fhe.ParameterError, match="levels"):
        other.check(p)
    with pytest.raises(fhe.ParameterError, match="levels"):
        fhe.ckks.Context(params=p, bootstrap=other)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        made = fhe.ckks.bootstrap_params(BOOTSTRAP_PRESETS["toy-n13-bts"][0], cfg, allow_insecure=True)
    assert made == p


@pytest.mark.parametrize("name", ALL + sorted(BOOTSTRAP_PRESETS))
def test_key_limbs_cover_every_level_below(name):
    """A level's limbs are a window of the chain, so a key serving levels 0 .. L holds the limbs up
    to the highest stop among them, which can lie above level L's own stop."""
    p = _params(name)
    for top in range(p.max_level + 1):
        key = p.key_limbs(top)
        assert key.start == 0 and key.stop >= p.limbs(top).stop
        assert all(p.limbs(lvl).stop <= key.stop for lvl in range(top + 1))
        assert key.stop in {p.limbs(lvl).stop for lvl in range(top + 1)}  # no more than that
    with pytest.raises(fhe.LevelError):
        p.key_limbs(p.max_level + 1)


def test_some_presets_have_levels_ending_below_a_lower_one():
    """The case key_limbs exists for (ResNet-20 at n16-bts35 with a 13-level ReLU ran a conv at level 2
    with a key made for level 4, whose stop is below level 2's)."""
    p = _params("n16-bts35")
    assert any(p.limbs(lvl).stop < p.limbs(lvl - 1).stop for lvl in range(1, p.max_level + 1))
