"""ReLU by a TFHE lookup table (nn.compile(..., relu="lut")): every ReLU goes through CKKS <-> TFHE
switching (fhetorch/circuits/switching) instead of a polynomial. The value, divided by its
calibrated bound, is quantised to a grid of 2^bits points covering [-1, 1]; the switch returns a
fresh ciphertext (EvalMod's output level), so a LUT also does a bootstrap's work. Costs: the
input needs the switch's levels (SlotToCoeff's and one); the time is the PBS of every slot
(docs/switching.md).

Two forms (nn.compile(..., lut_form=...)):
- "direct": the LUT gives fn(grid point) on the grid of grid_interval (0 and 1 on it); the error
  is up to half a grid step times fn's slope;
- "product" (where fn(x) = x g(x), g in [0, 1]: ReLU, GELU, SiLU, Hardswish; PRODUCT_OPS): the LUT
  gives only the factor g(grid point), on the grid of FACTOR_INTERVAL (0 a midpoint), and one
  CKKS multiplication takes x times it: x keeps its precision, and ReLU's step [x > 0] is exact
  but for inputs within the switch's noise of 0 (error at most |x| there). One level more than
  the direct form: the product sits one level below the lower of x and the factor.

A ReLU's step in the product form is taken of sharpen(x) rather than x (LUTReLU.sharpen stages of
SHARPEN, 3 levels each, before the switch): an odd polynomial, increasing on [-1, 1] with +-1 fixed,
so the sign is x's, and with slope 35/16 at 0, so the switch's noise near 0 counts 16/35 as much a
stage (two stages: 1/4.79). The switch's noise flips the step of inputs within it of 0; on
CIFAR ResNet-20 that noise, fitted to the encrypted runs, predicts top-1 agreement 99.35 % over
384 images unsharpened and 99.84 % with two stages (scripts/lut_noise_calibration.py, docs/nn.md)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..circuits.bootstrap_config import BootstrapConfig
from ..circuits.switching import switch_config
from ..circuits.switching.keys import tfhe_params
from ..errors import ParameterError
from ..tensor.functions import chebyshev


def grid_interval(bits: int) -> tuple:
    """[1 - (G - 1) / m, 1], G = 2^bits, m = G / 2 - 1: G points 1 / m apart ending at 1, so that 0
    is one of them and [-1, 1] is covered. A layout's empty slots hold 0, and relu(0) must stay 0
    (on [-1, 1] itself, with G even, 0 would round to +-1 / (G - 1) and relu would write
    1 / (G - 1) into them); the top point 1 keeps ReLU's outputs in [-1, 1], so the switch's
    result stays on its level's nominal scale (fhetorch/circuits/switching, encode_outputs)."""
    g = 1 << bits
    m = g // 2 - 1
    return (1.0 - (g - 1) / m, 1.0)


FORMS = ("product", "direct")
# fn(x) = x g(x), g in [0, 1], g(0) = 1/2: relu [x > 0], gelu Phi, silu sigmoid, hardswish relu6(x + 3) / 6
PRODUCT_OPS = ("relu", "gelu", "silu", "hardswish")
# the factor's grid: [-1, 1] with an even number of points, so 0 is a midpoint and a step at 0 is exact
FACTOR_INTERVAL = (-1.0, 1.0)


def factor(fn):
    """g(t) = fn(t) / t for an op of PRODUCT_OPS, 1/2 at t = 0 (the limit of (fn(h) - fn(-h)) / 2h
    for all four), clamped to [0, 1] so that a table of it stays on its level's nominal scale.
    Raises nothing."""
    def g(t: torch.Tensor) -> torch.Tensor:
        zero = t == 0
        safe = torch.where(zero, torch.ones_like(t), t)
        return torch.where(zero, torch.full_like(t, 0.5), fn(safe) / safe).clamp(0.0, 1.0)
    return g


# plan.py's latency model of one LUT layer at tfhe-4bit-p128: the KS + PBS at 42,000 a second (42.4k/s on
# the H100, 42.5k/s on the H200: docs/tfhe.md), both conversions ~0.08 s (ResNet-20 relu="lut": 9.4 s an
# image on the H200 for 19 switches of 16,384 values, session 26, docs/benchmarks.md)
LUT_FIXED_S, LUT_PER_SLOT_S = 0.08, 1 / 42000


def _smooth_step7(t):
    """(35 t - 35 t^3 + 21 t^5 - 5 t^7) / 16: odd, increasing on [-1, 1] (its slope is 35/16 (1 - t^2)^3),
    +-1 at +-1."""
    return (35 * t - 35 * t ** 3 + 21 * t ** 5 - 5 * t ** 7) / 16


# The product form's sharpening stage (degree 7, exact as a Chebyshev series), its levels and slope at 0.
SHARPEN = chebyshev(_smooth_step7, (-1.0, 1.0), 7)
SHARPEN_LEVELS = 3
SHARPEN_SLOPE = 35 / 16
MAX_SHARPEN = 2  # the default's stages where the levels allow: the switch's noise near 0 / 4.79


def sharpen(y: torch.Tensor, stages: int) -> torch.Tensor:
    """`stages` sharpening stages of y in [-1, 1] (the simulation's; the encrypted run evaluates the same
    series). Raises nothing."""
    for _ in range(stages):
        y = SHARPEN(y)
    return y


@dataclass(frozen=True)
class LUTReLU:
    """relu="lut" is LUTReLU(): `bits` of the grid (None: the finest grid of one PBS per value,
    Switcher.default_bits; one bit more takes the full-torus form, two PBS), `tfhe` the TFHE preset
    of the switching keys (None: the CKKS preset's default, keygen(lut=True); e.g. "tfhe-8bit" for
    an 8-bit grid, N = 2^15), `sharpen` the product form's sharpening stages before the step's
    switch (None: as many as a bootstrap's levels leave room for, up to MAX_SHARPEN; 0: none)."""

    bits: int | None = None
    tfhe: str | None = None
    sharpen: int | None = None

    @property
    def lut(self):
        """What cm.keygen passes as keygen(lut=...)."""
        return self.tfhe if self.tfhe is not None else True

    def grid_bits(self, preset: str) -> int:
        """The grid bits for `preset`. Raises ParameterError for more bits than the TFHE set
        holds within the switch's failure bound."""
        cfg = switch_config(preset, self.lut)
        params = tfhe_params(cfg)
        top = cfg.max_bits(params)
        if self.bits is not None and not 2 <= self.bits <= top:
            raise ParameterError(f"nn.compile: a {self.bits}-bit LUT grid needs a larger TFHE ring than {cfg.tfhe} "
                                 f"(up to {top} bits); e.g. LUTReLU(bits={self.bits}, tfhe='tfhe-8bit') (9 bits) or "
                                 "'tfhe-8bit-p128' (10 bits)")
        return self.bits if self.bits is not None else cfg.default_bits(params)

    def sharpen_stages(self, config: BootstrapConfig) -> int:
        """The product form's sharpening stages on a preset of bootstrap config `config`: `sharpen`, or
        the most that leave the step's input, SHARPEN_LEVELS a stage above the switch's levels, within a
        bootstrap's levels (up to MAX_SHARPEN). Raises ParameterError for a negative count or more
        stages than that room."""
        room = (config.user_levels - self.levels_in(config)) // SHARPEN_LEVELS
        if self.sharpen is None:
            return max(0, min(MAX_SHARPEN, room))
        if not 0 <= self.sharpen <= room:
            raise ParameterError(f"nn.compile: LUTReLU(sharpen={self.sharpen}) needs {SHARPEN_LEVELS} levels a stage "
                                 f"before the switch; this preset's bootstraps leave room for {max(room, 0)}: give "
                                 f"sharpen=0..{max(room, 0)} or None")
        return self.sharpen

    @staticmethod
    def levels_in(config: BootstrapConfig) -> int:
        """Levels the switch needs at its input (Switcher.levels)."""
        return config.stc_levels + 1

    @staticmethod
    def level_out(config: BootstrapConfig) -> int:
        """The level a LUT's result sits at (Switcher.output_level)."""
        return config.stc_input_level

    @staticmethod
    def quantise(y: torch.Tensor, bits: int, interval: tuple | None = None) -> torch.Tensor:
        """y in [-1, 1] -> its nearest point of the grid over `interval` (default grid_interval(bits),
        the direct form's; FACTOR_INTERVAL for a product form's factor): what the encrypted run
        computes on."""
        g = (1 << bits) - 1
        lo, hi = interval if interval is not None else grid_interval(bits)
        return lo + torch.round((y.clamp(lo, hi) - lo) / (hi - lo) * g) * (hi - lo) / g


def seconds(slots: int) -> float:
    return LUT_FIXED_S + LUT_PER_SLOT_S * slots
