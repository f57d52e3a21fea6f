"""The keys of scheme switching (ctx.keygen(lut=True)), made on the client from the CKKS secret s
and a fresh TFHE key set; what the server holds has no secret:

- the TFHE evaluation keys (bootstrapping key, LWE key switch from the GLWE key z to the LWE key);
- to_lwe: a GLWE key switch in the CKKS ring from s to z(X^r), r = N / N_t (z embedded at every
  r-th coefficient), modulo the TFHE modulus q. As r independent GLWE samples of ring N_t under z
  with the TFHE preset's GLWE noise it is as secure as the bootstrapping key;
- to_ckks: the key switch back, RLWE encryptions under s of G_j z(X^r) modulo q (< the CKKS
  preset's Q P, at the CKKS noise size: no less secure than the CKKS keys);
- packing: key switches tau_g(z) -> z in ring N_t for the LWE packing (fhetorch/_tfhe/glwe.py;
  encryptions of a function of z under z: the circular-security assumption TFHE's bootstrapping
  key already makes).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..._tfhe import glwe as _glwe
from ..._tfhe.context import TFHEContext
from ..._tfhe.entities import GlweKeyswitchKey, GlweSecretKey
from ..._tfhe.presets import params_of
from ..._tfhe.ring import TFHERing
from ...errors import ContextError, ParameterError
from .config import SwitchConfig

_PARAMS: dict = {}


@dataclass
class SwitchKeys:
    config: SwitchConfig
    tfhe: TFHEContext  # public: evaluation keys only
    ring: TFHERing  # the CKKS ring degree over the TFHE modulus
    to_lwe: GlweKeyswitchKey
    to_ckks: GlweKeyswitchKey
    packing: dict  # {g: GlweKeyswitchKey}

    @property
    def stride(self) -> int:
        """r = N / N_t: z(X^r) is the TFHE GLWE key inside the CKKS ring."""
        return self.ring.n // self.tfhe.params.N

    @property
    def nbytes(self) -> int:
        t = self.tfhe
        ks = [self.to_lwe, self.to_ckks, *self.packing.values()]
        return (t.bootstrap_key.data.nbytes + t.keyswitch_key.data.nbytes + sum(k.data.nbytes for k in ks))

    def to(self, device) -> "SwitchKeys":
        device = torch.device(device)
        t = self.tfhe
        tctx = TFHEContext(t.params, device)
        tctx.bootstrap_key = replace(t.bootstrap_key, data=t.bootstrap_key.data.to(device))
        tctx.keyswitch_key = replace(t.keyswitch_key, data=t.keyswitch_key.data.to(device))
        tctx.key_id = t.key_id
        mv = lambda k: GlweKeyswitchKey(k.data.to(device), k.base_log, k.level)  # noqa: E731
        return SwitchKeys(self.config, tctx, TFHERing(self.ring.log_n, self.ring.moduli, device), mv(self.to_lwe),
                          mv(self.to_ckks), {g: mv(k) for g, k in self.packing.items()})


def tfhe_params(config: SwitchConfig):
    return params_of(config.tfhe_literal(), _PARAMS)


def secret_coefficients(ctx) -> torch.Tensor:
    """The CKKS secret's coefficients (N,) int64 in {-1, 0, 1}. Raises ContextError without it."""
    if ctx.secret_key is None:
        raise ContextError("keygen(lut=True): this context holds no secret key; generate keys on the client")
    b = ctx.basis(0)
    limbs = ctx.params.limbs(0)
    digits = ctx.ring.crt_digits(ctx.secret_key.s.narrow(0, limbs.start, len(limbs)).contiguous(), b)
    return digits[..., 0, :].to(torch.int64)  # |s_i| <= 1 < q_0 / 2: the first digit is the value


def check_compatible(ctx, params) -> None:
    """Raises ParameterError unless the TFHE set fits the CKKS ring (k = 1, N_t | N)."""
    n, nt = ctx.params.n, params.N
    if params.k != 1:
        raise ParameterError(f"switching: the TFHE set {params.name} has k = {params.k}; the switch needs k = 1")
    if nt > n or n % nt:
        raise ParameterError(f"switching: the TFHE ring N_t = {nt} must divide the CKKS ring N = {n}")


def generate_switch_keys(ctx, config: SwitchConfig) -> SwitchKeys:
    """Every key the switch needs, from ctx's secret (the client's). Raises ContextError without
    the secret, ParameterError for a TFHE set that does not fit the CKKS ring."""
    params = tfhe_params(config)
    check_compatible(ctx, params)
    s = secret_coefficients(ctx).to(ctx.device)
    tctx = TFHEContext(params, ctx.device).keygen()
    n, r = ctx.params.n, ctx.params.n // params.N
    ring = TFHERing(ctx.params.log_n, params.moduli, ctx.device)
    z = tctx.glwe_key.data[0]
    z_big = torch.zeros(n, dtype=torch.int64, device=ctx.device)
    z_big[::r] = z
    sampler = tctx.sampler
    to_lwe = _glwe.generate_glwe_keyswitch_key(sampler, ring, s, GlweSecretKey(z_big.view(1, n)), *config.to_lwe,
                                               params.glwe_noise_width)
    to_ckks = _glwe.generate_glwe_keyswitch_key(sampler, ring, z_big, GlweSecretKey(s.view(1, n)), *config.to_ckks,
                                                config.to_ckks_noise_width)
    packing = _glwe.generate_packing_keys(sampler, tctx.ring, tctx.glwe_key, *config.packing, params.glwe_noise_width)
    return SwitchKeys(config, tctx.public(), ring, to_lwe, to_ckks, packing)
