"""The CKKS scheme layer (internal): parameters (literal -> validated) and presets, encoder,
ciphertexts, the scheme context and its roles (key generation, encryption, decryption of
vectors) and the evaluator's algorithms.

Users reach CKKS through the `fhetorch.ckks` facade (tensors in, EncryptedTensors out);
circuits and the tensor layer build on this package.
"""
from . import evaluator
from .ciphertext import Ciphertext, Plaintext
from .context import CKKSContext
from .decryptor import Decryptor
from .encoder import Encoder
from .encryptor import Encryptor
from .keygen import KeyGenerator, galois_element
from .params import HE_STANDARD_128, Params, ParamsLiteral, make_params
from .presets import PRESETS, preset

__all__ = ["CKKSContext", "Ciphertext", "Decryptor", "Encoder", "Encryptor", "HE_STANDARD_128", "KeyGenerator",
           "PRESETS", "Params", "ParamsLiteral", "Plaintext", "evaluator", "galois_element", "make_params", "preset"]
