"""Bootstrapping's configuration: where its levels sit in a chain, its EvalMod settings,
and the bootstrappable presets (a scheme literal with the configuration it was made for).

The scheme's parameters know only each level's nominal scale (ParamsLiteral.level_bits);
`bootstrap_params(literal, config)` makes the chain a configuration needs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .._ckks.chain import CHAINS
from .._ckks.params import Params, ParamsLiteral, make_params
from ..errors import ParameterError


@dataclass(frozen=True)
class BootstrapConfig:
    """Where bootstrapping's levels sit in a chain, and its EvalMod settings.

    Levels, bottom to top: 0 .. user_levels at the user scale (a bootstrap returns a
    ciphertext at level `user_levels`); then SlotToCoeff's levels; then EvalMod's; then
    CoeffToSlot's, whose top is the chain's top (the ModRaise target). Values inside
    bootstrapping need more precision than the user scale gives: EvalMod's output (sin 2 pi x
    ~ 2 pi eps) is ~2^-14 of a message coefficient's ModRaised size, its errors are magnified
    by Q_0 / Delta and by the SlotToCoeff DFT (~sqrt(slots)). So CoeffToSlot's levels carry
    2^cts_bits, EvalMod's (and SlotToCoeff's input level) 2^evalmod_bits, SlotToCoeff's
    other levels 2^stc_bits (Cheddar uses 2^55-2^58 inside bootstrapping).

    EvalMod (Han-Ki 2020, Bossuat et al. 2021) evaluates cos(2 pi (x - 1/4) / 2^r) on
    x in [-K, K] by an even polynomial of `cos_degree` in x - 1/4 (a series of half that degree
    in its square: circuits/bootstrap.py), then r double-angle steps give sin(2 pi x);
    `arcsine` adds a degree-3 arcsine correction (2 levels). Degree 54 with 2 double angles
    is within 2^-42 of sin(2 pi x) on [-16, 16], float64's rounding of the series
    (docs/circuits.md). With sparse-secret encapsulation (Bossuat et al. 2022; `ephemeral_weight` > 0) ModRaise runs under a
    Hamming-weight-`ephemeral_weight` secret, which bounds |x| by K = k_range.
    `message_ratio`: log2 of Q_0 / (scale of the message at ModRaise) for 2^15 slots (the
    input is first multiplied by an integer to get there; fewer slots, whose coefficients
    are larger, keep half a bit more per halving of the slot count).
    """

    user_levels: int
    cts_levels: int = 4
    stc_levels: int = 3
    cts_bits: int = 55
    evalmod_bits: int = 60
    stc_bits: int = 50
    k_range: int = 16
    double_angles: int = 2
    cos_degree: int = 54
    arcsine: bool = False
    ephemeral_weight: int = 32
    message_ratio: int = 6

    def __post_init__(self):
        if self.cos_degree < 2 or self.cos_degree % 2:
            fix = f"{self.cos_degree - 1} (the same levels)" if self.cos_degree > 2 else "2 or more"
            raise ParameterError(f"BootstrapConfig: cos_degree must be even and >= 2 (EvalMod's cosine is an even "
                                 f"polynomial), got {self.cos_degree}; use {fix}")

    @property
    def evalmod_levels(self) -> int:
        return (self.cos_degree).bit_length() + self.double_angles + (2 if self.arcsine else 0)

    @property
    def depth(self) -> int:
        """Levels one bootstrap consumes (ModRaise target minus output level)."""
        return self.cts_levels + self.evalmod_levels + self.stc_levels

    @property
    def top(self) -> int:
        return self.user_levels + self.depth

    @property
    def evalmod_input_level(self) -> int:
        return self.top - self.cts_levels

    @property
    def stc_input_level(self) -> int:
        return self.user_levels + self.stc_levels

    def level_bits(self, user_bits: int) -> list:
        """Nominal scale bits of every level 0 .. top. Raises nothing."""
        def bits(lvl):
            if lvl <= self.user_levels:
                return user_bits
            if lvl < self.stc_input_level:
                return self.stc_bits
            if lvl == self.stc_input_level:  # EvalMod's output meets SlotToCoeff's plaintexts, which
                return min(self.evalmod_bits, 60)  # are encoded at this scale in int64 (< 2^62)
            return self.evalmod_bits if lvl <= self.evalmod_input_level else self.cts_bits
        return [bits(lvl) for lvl in range(self.top + 1)]

    def describe(self) -> dict:
        """Plain-data description (serialization). Raises nothing."""
        return dict(self.__dict__)

    def literal(self, scheme: ParamsLiteral) -> ParamsLiteral:
        """The scheme literal of a bootstrappable chain: `scheme` with one level per level of
        this configuration, each at its nominal scale (user levels at the chain's).

        Raises KeyError for a chain make_params does not know (make_params names them)."""
        return replace(scheme, levels=None, level_bits=tuple(self.level_bits(CHAINS[scheme.chain]["scale_bits"])))

    def check(self, params: Params):
        """Raises ParameterError unless `params` has the levels and scales of this configuration."""
        want = tuple(self.level_bits(params.scale_bits))
        if params.level_bits != want:
            raise ParameterError(f"bootstrap: parameters {params.name!r} do not have this configuration's levels "
                                 f"(scale bits {list(want)}); make them with bootstrap_params(literal, config)")


def bootstrap_params(literal: ParamsLiteral, config: BootstrapConfig, *, allow_insecure: bool = False) -> Params:
    """The validated parameters of a bootstrappable chain: user levels at the literal's chain
    scale, bootstrapping's levels above them.

    Raises what make_params raises (ParameterError, SecurityError)."""
    return make_params(config.literal(literal), allow_insecure=allow_insecure)


# name -> (scheme literal, bootstrapping configuration); levels left after a bootstrap = user_levels
BOOTSTRAP_PRESETS = {
    "toy-n13-bts": (ParamsLiteral(log_n=13, chain="rr40", dnum=3, name="toy-n13-bts"),
                    BootstrapConfig(user_levels=6, cts_levels=3, stc_levels=2)),
    # precise: 2^55 / 2^65 / 2^50 inside bootstrapping, 12 levels left at 2^40 (>= 21 bits on
    # the H100; user_levels=13 with evalmod_bits=60 fits too and measured 20.3-20.7 bits)
    "n16-bts40": (ParamsLiteral(log_n=16, chain="rr40", dnum=5, name="n16-bts40"),
                  BootstrapConfig(user_levels=12, evalmod_bits=65)),
    # more levels (17 at 2^35), lower scales inside bootstrapping: less precise
    "n16-bts35": (ParamsLiteral(log_n=16, chain="rr35", dnum=6, name="n16-bts35"),
                  BootstrapConfig(user_levels=17, cts_bits=50, evalmod_bits=55, stc_bits=45)),
}
