"""fhetorch.ckks, the public CKKS facade: `Context` (torch tensors in, EncryptedTensors out),
presets and custom parameters, bootstrapping and polynomial evaluation.

This package only re-exports: the scheme lives in fhetorch/_ckks, the circuits in
fhetorch/circuits, the tensor layer in fhetorch/tensor (docs/architecture.md).
"""
from .._ckks.params import HE_STANDARD_128, Params, PresetInfo, make_params, preset, presets
from ..tensor import Context
from ..tensor.functions import bootstrap, bootstrap_pair
from . import polynomial

__all__ = ["Context", "HE_STANDARD_128", "Params", "PresetInfo", "bootstrap", "bootstrap_pair", "make_params",
           "polynomial", "preset", "presets"]
