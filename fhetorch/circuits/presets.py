"""Every named preset: the scheme's (fhetorch/_ckks/presets.py) and the bootstrappable ones
(fhetorch/circuits/bootstrap_config.py), with the table `fhetorch.ckks.presets()` reports."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from .._ckks import presets as scheme
from .._ckks.params import Params
from ..errors import InsecureParametersWarning, ParameterError
from .bootstrap_config import BOOTSTRAP_PRESETS, BootstrapConfig


@dataclass(frozen=True)
class PresetInfo:
    name: str
    N: int
    log_pq: float
    dnum: int
    levels: int
    scale_bits: int
    slots: int
    security_bits: int  # 0 for toy presets
    bootstrappable: bool = False
    levels_after_bootstrap: int | None = None


def names() -> list:
    return list(scheme.PRESETS) + list(BOOTSTRAP_PRESETS)


_made: dict[str, Params] = {}


def preset(name: str) -> Params:
    """The named preset's Params, scheme or bootstrappable (toy presets warn with
    InsecureParametersWarning). Raises ParameterError for an unknown name."""
    if name in BOOTSTRAP_PRESETS:
        literal, config = BOOTSTRAP_PRESETS[name]
        return scheme.params_of(config.literal(literal), _made)
    if name in scheme.PRESETS:
        return scheme.params_of(scheme.PRESETS[name], _made)
    raise ParameterError(f"preset: unknown preset {name!r}; available: {', '.join(names())}")


def bootstrap_config(name: str) -> BootstrapConfig | None:
    """The bootstrapping configuration of a named preset (None: not bootstrappable). Raises nothing."""
    entry = BOOTSTRAP_PRESETS.get(name)
    return entry[1] if entry else None


def info(params: Params, config: BootstrapConfig | None = None) -> PresetInfo:
    """The summary of parameters (bootstrappable with `config`)."""
    return PresetInfo(params.name, params.n, round(params.log_pq, 2), params.dnum, params.max_level,
                      params.scale_bits, params.slots, params.security_bits, config is not None,
                      config.user_levels if config else None)


def presets() -> dict:
    """All presets as {name: PresetInfo}. Raises nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return {name: info(preset(name), bootstrap_config(name)) for name in names()}
