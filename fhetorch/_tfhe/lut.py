"""Test polynomials: a function of the message as the body of a trivial GLWE ciphertext.

With one padding bit, value v in [0, p) (p = message_space) has phase ~ v * delta, which the
modulus switch maps to ~ v * box (box = N / p). The test polynomial holds f(v) * delta on
coefficients [v * box - box/2, v * box + box/2), so noise up to half a box either side reads the
same value; the first half box wraps negacyclically to the end, negated. Many-LUT: with
values below p / c (c functions, c a power of two), function i occupies coefficients
[i N / c, (i + 1) N / c), and the PBS extracts coefficient i N / c for output i.
"""
from __future__ import annotations

import torch

from ..errors import ParameterError


def test_polynomial(tables: list, message_space: int, big_n: int, delta: int, q: int) -> torch.Tensor:
    """(N,) int64 in [0, q) for c = len(tables) functions (c a power of two), each a list of
    outputs f(v) for v in [0, message_space / c)."""
    c = len(tables)
    if c < 1 or c & (c - 1):
        raise ParameterError(f"test_polynomial: the number of functions must be a power of two, got {c}")
    space = message_space // c
    box = big_n // message_space
    if box < 2 or space < 1:
        raise ParameterError(f"test_polynomial: N = {big_n} leaves no room for {message_space} values")
    j = torch.arange(big_n)
    region, local = j // (big_n // c), j % (big_n // c)
    v = (local + box // 2) // box
    t = torch.tensor([[int(x) for x in tab] for tab in tables], dtype=torch.int64)  # (c, space)
    inside = v < space
    # past the last value of function i: the noise-negative side of function i + 1's value 0
    nxt = region + 1
    wrap = nxt >= c
    val = torch.where(inside, t[region, v.clamp(max=space - 1)], t[nxt % c, 0])
    val = val * delta % q
    return torch.where(~inside & wrap, (q - val) % q, val)
