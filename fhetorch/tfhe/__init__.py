"""fhetorch.tfhe, the public TFHE facade: `Context` (integer tensors in, LWETensors out),
`LUT` (programmable bootstrapping of any function of a small message), presets and custom
parameters (TFHEParamsLiteral -> make_params -> TFHEParams).

    tctx = fhe.tfhe.Context(preset="toy-tfhe-4bit", device="cpu")
    tctx.keygen()
    ex = tctx.encrypt(torch.randint(0, 16, (100,)))
    ey = fhe.tfhe.LUT(lambda m: (3 * m + 1) % 16, bits=4)(ex)   # one batched PBS
    tctx.decrypt(ey)

This package only re-exports: the scheme lives in fhetorch/_tfhe (docs/architecture.md).
"""
from .._tfhe.circuit import Circuit, CircuitPlan, apply_bivariate, circuit
from .._tfhe.context import TFHEContext as Context
from .._tfhe.lut import LUT
from .._tfhe.lwe_tensor import LWETensor
from .._tfhe.params import TFHEParams, TFHEParamsLiteral, make_params
from .._tfhe.presets import preset, presets
from .._tfhe.radix import RadixTensor

__all__ = ["Circuit", "CircuitPlan", "Context", "LUT", "LWETensor", "RadixTensor", "TFHEParams", "TFHEParamsLiteral",
           "apply_bivariate", "circuit", "make_params", "preset", "presets"]
