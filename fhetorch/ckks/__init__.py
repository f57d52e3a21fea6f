"""fhetorch.ckks, the public CKKS facade: `Context` (torch tensors in, EncryptedTensors out),
presets and custom parameters (ParamsLiteral -> make_params -> Params), bootstrapping and
polynomial evaluation.

This package only re-exports: the scheme lives in fhetorch/_ckks, the circuits in
fhetorch/circuits, the tensor layer in fhetorch/tensor (docs/architecture.md).
"""
from .._ckks.params import HE_STANDARD_128, Params, ParamsLiteral, make_params
from ..circuits.bootstrap_config import BootstrapConfig, bootstrap_params
from ..circuits.presets import PresetInfo, bootstrap_config, preset, presets
from ..tensor import Context
from ..tensor.functions import bootstrap, bootstrap_pair, sort
from . import polynomial

__all__ = ["BootstrapConfig", "Context", "HE_STANDARD_128", "Params", "ParamsLiteral", "PresetInfo", "bootstrap",
           "bootstrap_config", "bootstrap_params", "bootstrap_pair", "make_params", "polynomial", "preset", "presets", "sort"]
