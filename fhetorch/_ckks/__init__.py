"""The CKKS scheme layer (internal): parameters and presets, encoder, ciphertexts, the scheme
context (keys, encryption, decryption of vectors) and the evaluator's algorithms.

Users reach CKKS through the `fhetorch.ckks` facade (tensors in, EncryptedTensors out);
circuits and the tensor layer build on this package.
"""
from . import evaluator
from .ciphertext import Ciphertext, Plaintext
from .context import CKKSContext, galois_element
from .encoder import Encoder
from .params import HE_STANDARD_128, Params, PresetInfo, make_params, preset, presets

__all__ = ["CKKSContext", "Ciphertext", "Encoder", "HE_STANDARD_128", "Params", "Plaintext", "PresetInfo",
           "evaluator", "galois_element", "make_params", "preset", "presets"]
