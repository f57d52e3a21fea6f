"""Checks of user arguments shared by the layers above: integers (levels, level counts,
rotation steps) and the tensors values come in.

Integers are strict on purpose: True is not level 1 and 2.5 is not step 2 (int() would
silently make them so). Anything with __index__ (int, numpy and 0-d torch integers) is accepted.
"""
from __future__ import annotations

import operator

import torch

from ..errors import EncodingError, IntegerArgumentError, LevelError


def as_int(value, what: str, name: str) -> int:
    """`value` as an int, or IntegerArgumentError for a bool, a float or another non-integer."""
    is_bool = isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)
    try:
        if not is_bool:
            return operator.index(value)
    except TypeError:
        pass
    raise IntegerArgumentError(f"{what}: {name} must be an int, got {value!r} ({type(value).__name__})")


def as_level(value, top: int, what: str, name: str = "level") -> int:
    """`value` as a level in [0, top]: IntegerArgumentError for a non-integer, LevelError out of range."""
    level = as_int(value, what, name)
    if not 0 <= level <= top:
        raise LevelError(f"{what}: {name} must be in [0, {top}], got {level}")
    return level


def check_dense(t: torch.Tensor, what: str):
    """Values must be a dense tensor holding data: a meta tensor has none, a sparse one packs
    differently (both fail deep inside torch otherwise)."""
    if t.is_meta:
        raise EncodingError(f"{what}: got a meta tensor (a shape without values); pass a tensor holding values, on "
                            "the CPU or a GPU")
    if t.layout != torch.strided:
        raise EncodingError(f"{what}: got a tensor of layout {t.layout}; pass a dense tensor (t.to_dense())")
