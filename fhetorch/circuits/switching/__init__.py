"""CKKS <-> TFHE scheme switching: the only place importing both schemes (docs/switching.md)."""
from .config import DEFAULT, SwitchConfig, switch_config
from .convert import Switcher, grid_points
from .keys import SwitchKeys, generate_switch_keys

__all__ = ["DEFAULT", "SwitchConfig", "switch_config", "Switcher", "grid_points", "SwitchKeys",
           "generate_switch_keys"]
