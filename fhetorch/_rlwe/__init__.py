"""Scheme-agnostic RLWE: keys, key switching (hybrid, dnum digits), modulus switching."""
from .keys import (PublicKey, SecretKey, SwitchingKey, gen_public, gen_secret, gen_switching, gen_switching_level, small_poly,
                   switching_key_bytes)
from .keyswitch import digits, key_switch, key_switch_inner, mod_up, mod_up_key_switch_inner, switch_modulus, tensor_key_switch_inner
from .plans import ModulusPlans

__all__ = ["ModulusPlans", "PublicKey", "SecretKey", "SwitchingKey", "digits", "gen_public", "gen_secret", "gen_switching",
           "gen_switching_level", "switching_key_bytes", "key_switch", "key_switch_inner", "mod_up",
           "mod_up_key_switch_inner", "small_poly", "switch_modulus", "tensor_key_switch_inner"]
