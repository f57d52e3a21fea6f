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


class LUT:
    """A function of an encrypted integer, applied by one programmable bootstrap:
    LUT(fn, bits=4) tabulates fn over [0, 2^bits); LUT.from_table(t) takes the outputs.
    lut(ex) bootstraps every element of ex (one batched PBS) and returns an LWETensor."""

    def __init__(self, fn, bits: int):
        """Raises ParameterError for bits < 1 or outputs that are not non-negative ints."""
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
            raise ParameterError(f"LUT: bits must be an int in [1, 16], got {bits!r}")
        self.bits = bits
        self.table = tuple(_output(fn(m), m) for m in range(1 << bits))

    @classmethod
    def from_table(cls, table) -> "LUT":
        """table: 2^bits outputs (a tensor or sequence of non-negative ints).

        Raises ParameterError if its length is not a power of two or an output is negative."""
        values = [int(v) for v in torch.as_tensor(table).flatten().tolist()]
        n = len(values)
        if n < 2 or n & (n - 1):
            raise ParameterError(f"LUT.from_table: the table needs 2^bits entries, got {n}")
        return cls(lambda m: values[m], bits=n.bit_length() - 1)

    def tables_for(self, message_space: int, functions: int = 1) -> list:
        """The outputs over a PBS input space of message_space / functions values; inputs at or
        beyond 2^bits wrap (v mod 2^bits).

        Raises ParameterError if an output does not fit the message space."""
        if max(self.table) >= message_space:
            raise ParameterError(f"LUT: outputs up to {max(self.table)} do not fit the message space "
                                 f"[0, {message_space})")
        return [self.table[v % len(self.table)] for v in range(message_space // functions)]

    def __call__(self, ex):
        """One batched PBS over every element of ex (an LWETensor).

        Raises ParameterError, MessageOverflowError, MissingKeyError, ContextError as
        Context.bootstrap does."""
        return ex.context.apply_lut(ex, self)


def _output(v, m) -> int:
    if isinstance(v, torch.Tensor):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ParameterError(f"LUT: the function must return non-negative ints, got {v!r} for input {m}")
    return v
