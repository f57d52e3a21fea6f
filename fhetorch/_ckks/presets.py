"""The scheme's named parameter sets, as literals (fhetorch/_ckks/params.py).

Toy presets (`toy-*`) are insecure test sizes and warn whenever used; the others are
within the HE-standard 128-bit bound. The bootstrappable presets pair a literal with a
bootstrapping configuration and live with it in fhetorch/circuits/bootstrap_config.py.
"""
from __future__ import annotations

from ..errors import ParameterError
from .._ring.presets import cached_params, is_toy
from .params import Params, ParamsLiteral, make_params

PRESETS = {
    # insecure test sizes: scale >= 2^30, >= 8 levels
    "toy-n10": ParamsLiteral(log_n=10, chain="rr35", levels=8, dnum=3, name="toy-n10"),
    "toy-n12": ParamsLiteral(log_n=12, chain="rr40", levels=10, dnum=3, name="toy-n12"),
    "toy-n13": ParamsLiteral(log_n=13, chain="rr40", levels=16, dnum=4, name="toy-n13"),
    # 128-bit secure, N = 2^16, most levels within the HE-standard bound
    "n16-rr40": ParamsLiteral(log_n=16, chain="rr40", dnum=4, name="n16-rr40"),
    "n16-rr35": ParamsLiteral(log_n=16, chain="rr35", dnum=4, name="n16-rr35"),
    "n16-dr56": ParamsLiteral(log_n=16, chain="dr56", dnum=4, name="n16-dr56"),
}


def params_of(literal: ParamsLiteral, cache: dict) -> Params:
    """make_params of a preset's literal, once per name (toy presets warn at every use)."""
    return cached_params(literal, make_params, cache, "")


_made: dict[str, Params] = {}


def preset(name: str) -> Params:
    """The named scheme preset's Params (toy presets warn with InsecureParametersWarning).
    Raises ParameterError for a name that is not one of PRESETS."""
    if name not in PRESETS:
        raise ParameterError(f"preset: unknown preset {name!r}; available: {', '.join(PRESETS)}")
    return params_of(PRESETS[name], _made)
