"""CKKS: parameters and presets, encoder, keys, evaluator; `Context` makes EncryptedTensors.

Public facade: `fhetorch.ckks.Context` is fhetorch.tensor.Context (tensor/ sits above ckks/;
it is re-exported here lazily so the implementation modules keep their layering).
"""
from . import evaluator
from .ciphertext import Ciphertext, Plaintext
from .context import CKKSContext, galois_element
from .encoder import Encoder
from .params import HE_STANDARD_128, Params, PresetInfo, make_params, preset, presets

__all__ = ["CKKSContext", "Ciphertext", "Context", "Encoder", "HE_STANDARD_128", "Params", "Plaintext", "PresetInfo",
           "evaluator", "galois_element", "make_params", "preset", "presets"]


def __getattr__(name):
    if name == "Context":
        from ..tensor import Context

        return Context
    if name in ("bootstrap", "bootstrap_pair"):  # circuits sits above ckks: re-exported lazily
        from ..circuits import bootstrap as _bts

        return getattr(_bts, name)
    if name == "polynomial":  # fhetorch.ckks.polynomial re-exports fhetorch.circuits (a layer above)
        import importlib

        return importlib.import_module(".polynomial", __name__)
    raise AttributeError(f"module 'fhetorch.ckks' has no attribute {name!r}")
