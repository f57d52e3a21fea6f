"""Scheme-agnostic RLWE: keys, key switching (hybrid, dnum digits), modulus switching."""
from .keys import (PublicKey, SecretKey, SwitchingKey, gen_public, gen_secret, gen_switching, gen_switching_level,
                   small_poly, switching_key_bytes)
# The function keyswitch lives in the module of the same name: fhetorch._rlwe.keyswitch is
# the module (import the function from it); the other key-switching functions are here too.
from .keyswitch import digits, keyswitch_inner, mod_up, mod_up_keyswitch_inner, switch_modulus
from .tables import ModulusTables

__all__ = ["ModulusTables", "PublicKey", "SecretKey", "SwitchingKey", "digits", "gen_public", "gen_secret",
           "gen_switching", "gen_switching_level", "keyswitch_inner", "mod_up", "mod_up_keyswitch_inner", "small_poly",
           "switch_modulus", "switching_key_bytes"]
