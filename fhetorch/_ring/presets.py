"""What the schemes' preset tables share: the toy-* naming rule and make_params once per name.

Each scheme (fhetorch/_ckks/presets.py, fhetorch/_tfhe/presets.py) keeps its own literals and
citations; this is only the caching and the warning, written once.
"""
from __future__ import annotations

import warnings

from ..errors import InsecureParametersWarning, warn


def is_toy(name: str) -> bool:
    """Insecure test presets are named toy-*."""
    return name.startswith("toy-")


def cached_params(literal, make_params, cache: dict, scheme: str = ""):
    """make_params(literal) once per literal.name, kept in cache; a toy preset warns
    (InsecureParametersWarning) at every use. Raises what make_params raises."""
    name = literal.name
    p = cache.get(name)
    if p is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureParametersWarning)
            p = cache[name] = make_params(literal, allow_insecure=is_toy(name))
    if is_toy(name):
        warn(f"{scheme}preset {name!r} is insecure (toy size); use it for tests only")
    return p
