"""Scheme switching's configuration: the TFHE parameter set of the lookup tables, the three
gadget decompositions of the ring-side key switches, and the LUT grid's failure bound.

The LUT grid: a LUT over an interval [lo, hi] quantises its input to G = 2^bits points; the PBS
reads the point from a window of N / G test-polynomial coefficients, and the modulus switch to
2N (sqrt(n / 48) coefficients of noise with the centered switch), the key switch and the CKKS
noise must stay inside half a window. That is the TFHE noise model's failure probability of a
2^bits message space with no linear operations before the PBS (max_noise_level 1), so a grid of
`bits` is offered only where that probability is at most 2^log2_p_fail_max (default 2^-40 per
value): 4 bits at N = 2^11, 6 at 2^13, 8 at 2^15, 9 at 2^16 with n ~ 900-1300 (docs/switching.md).

That grid sits on half the torus (a padding bit: the test polynomial is negacyclic). The
full-torus grid has one bit more at the same failure probability: 2G points over the whole torus
are as far apart as G points on half of it. A point u + G of its second half reads the negated
value of point u, so fn is split as a(u) + s b(u) (s = +1 on the first half, -1 on the second)
and two tables of each function go through the PBS (fhetorch/circuits/switching/convert.py).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

from ..._tfhe.params import TFHEParams, make_params
from ..._tfhe.presets import PRESETS as TFHE_PRESETS
from ...errors import InsecureParametersWarning, ParameterError


# The packing's decomposition (base_log, level) where a TFHE set takes a coarser one than the default
# (8, 6): its noise stays far below the PBS output's that it is added to (measured at N_t = 2^11, 1024 leaves,
# session 27: tfhe-4bit-p128's packing adds 2^-21.0 of q at (12, 3), 2^-24.6 at (8, 6), against the PBS
# output's 2^-14.7: 0.016 % of its variance), for 10 NTTs a key switch instead of 16. The larger rings keep
# (8, 6): tfhe-6bit's PBS output is 2^-20.8, and (12, 3) would add 2.7x that variance.
PACKING = {"tfhe-4bit-p128": (12, 3)}


@dataclass(frozen=True)
class SwitchConfig:
    """tfhe              the TFHE preset whose keys evaluate the LUTs (its n, N, noise, PBS and KS)
    to_lwe            (base_log, level) of the key switch from the CKKS secret to the TFHE GLWE
                      key embedded in the CKKS ring (s -> z(X^(N / N_t)))
    to_ckks           (base_log, level) of the key switch back (z(X^(N / N_t)) -> s)
    packing           (base_log, level) of the packing's automorphism key switches (ring N_t); default
                      PACKING's entry for the TFHE set, else (8, 6)
    to_ckks_noise_width  the noise width (Irwin-Hall of 4 uniforms on [-w, w]) of the key
                      switching back, an RLWE key under the CKKS secret (std ~4 for w = 3)
    log2_p_fail_max   the failure bound of a LUT grid point (see the module docstring)
    """

    tfhe: str
    to_lwe: tuple = (12, 4)
    to_ckks: tuple = (12, 4)
    packing: tuple | None = None
    to_ckks_noise_width: int = 3
    log2_p_fail_max: float = -40.0

    def __post_init__(self):  # the default made explicit, so saved keys name their decomposition
        if self.packing is None:
            object.__setattr__(self, "packing", PACKING.get(self.tfhe, (8, 6)))

    def tfhe_literal(self):
        if self.tfhe not in TFHE_PRESETS:
            raise ParameterError(f"switching: unknown TFHE preset {self.tfhe!r}; available: {', '.join(TFHE_PRESETS)}")
        return TFHE_PRESETS[self.tfhe]

    def grid_params(self, base: TFHEParams, bits: int) -> TFHEParams:
        """base with a message space of 2^bits, no carry, max_noise_level 1: its log2_p_fail is the
        grid's. Raises ParameterError where the ring has no room for 2^bits windows."""
        lit = replace(base.literal(), message_bits=bits, carry_bits=0, max_noise_level=1, log2_p_fail_max=0.0,
                      name=f"{base.name}:grid{bits}")
        with warnings.catch_warnings():  # an insecure base warned when it was made; its grids need not again
            warnings.simplefilter("ignore", InsecureParametersWarning)
            return make_params(lit, allow_insecure=not base.is_secure)

    def default_bits(self, base: TFHEParams) -> int:
        """The largest half-torus grid (bits: one table per function) within log2_p_fail_max."""
        best = 0
        for bits in range(1, base.log_n):
            try:
                p = self.grid_params(base, bits)
            except ParameterError:
                break
            if p.log2_p_fail > self.log2_p_fail_max:
                break
            best = bits
        return best

    def max_bits(self, base: TFHEParams) -> int:
        """The largest grid within log2_p_fail_max: the full-torus one, a bit above default_bits."""
        top = self.default_bits(base)
        return top + 1 if top else 0

    def grid_failure(self, base: TFHEParams, bits: int) -> TFHEParams:
        """The TFHEParams whose log2_p_fail is a `bits` grid's (the full-torus grid above
        default_bits reads as the half-torus grid of one bit less). Raises ParameterError where the
        ring has no room."""
        return self.grid_params(base, bits - 1 if bits > self.default_bits(base) else bits)


# the CKKS preset -> its switching configuration (ctx.keygen(lut=True)); other TFHE presets by name
DEFAULT = {
    "toy-n13-bts": SwitchConfig(tfhe="toy-tfhe-4bit"),
    "n16-bts40": SwitchConfig(tfhe="tfhe-4bit-p128"),
    "n16-bts35": SwitchConfig(tfhe="tfhe-4bit-p128"),
}


def switch_config(ckks_preset: str, lut) -> SwitchConfig:
    """lut=True: the preset's default; a TFHE preset name: that set with default decompositions;
    a SwitchConfig as given. Raises ParameterError otherwise."""
    if isinstance(lut, SwitchConfig):
        return lut
    if lut is True:
        if ckks_preset in DEFAULT:
            return DEFAULT[ckks_preset]
        return SwitchConfig(tfhe="tfhe-4bit-p128")
    if isinstance(lut, str):
        cfg = SwitchConfig(tfhe=lut)
        cfg.tfhe_literal()
        return cfg
    raise ParameterError(f"keygen: lut must be True, a TFHE preset name or a SwitchConfig, got {lut!r}")
