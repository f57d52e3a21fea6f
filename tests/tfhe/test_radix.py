"""Radix integers against Python integers on fresh random inputs (with the edge values 0,
2^bits - 1 and carries across every block) at toy-tfhe-4bit read as 2 message + 2 carry bits
(max_noise_level 4, as tfhe-4bit): every 8-bit operation; 16- and 32-bit add, compare and
multiply on a few values; wave and PBS counts as docs/tfhe.md states them; composition in a
user circuit; clear errors."""
import functools
import random
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._tfhe import radix


@functools.lru_cache(maxsize=None)
def context():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.tfhe.Context(fhe.tfhe.preset("toy-tfhe-4bit").with_message_bits(2, max_noise_level=4)).keygen()


def operands(bits: int, n: int):
    """n pairs: (2^bits - 1, 1) (a carry through every block), (0, 2^bits - 1), then random."""
    top = (1 << bits) - 1
    x = [top, 0] + [random.randrange(top + 1) for _ in range(n - 2)]
    y = [1, top] + [random.randrange(top + 1) for _ in range(n - 2)]
    return x[:n], y[:n]


BINARY = {
    "add": (lambda a, b: a + b, lambda x, y, m: (x + y) % m),
    "sub": (lambda a, b: a - b, lambda x, y, m: (x - y) % m),
    "mul": (lambda a, b: a * b, lambda x, y, m: x * y % m),
    "and": (lambda a, b: a & b, lambda x, y, m: x & y),
    "or": (lambda a, b: a | b, lambda x, y, m: x | y),
    "xor": (lambda a, b: a ^ b, lambda x, y, m: x ^ y),
    "max": (lambda a, b: a.max(b), lambda x, y, m: max(x, y)),
    "min": (lambda a, b: a.min(b), lambda x, y, m: min(x, y)),
    "eq": (lambda a, b: a == b, lambda x, y, m: int(x == y)),
    "ne": (lambda a, b: a != b, lambda x, y, m: int(x != y)),
    "lt": (lambda a, b: a < b, lambda x, y, m: int(x < y)),
    "le": (lambda a, b: a <= b, lambda x, y, m: int(x <= y)),
    "gt": (lambda a, b: a > b, lambda x, y, m: int(x > y)),
    "ge": (lambda a, b: a >= b, lambda x, y, m: int(x >= y)),
}


def check(op: str, bits: int, x: list, y: list):
    ctx = context()
    enc, want = BINARY[op]
    out = enc(ctx.encrypt_int(torch.tensor(x), bits), ctx.encrypt_int(torch.tensor(y), bits))
    got = ctx.decrypt_int(out) if isinstance(out, fhe.tfhe.RadixTensor) else ctx.decrypt(out)
    assert got.tolist() == [want(a, b, 1 << bits) for a, b in zip(x, y)], (op, x, y)


def test_encrypt_decrypt_round_trip_any_shape():
    ctx = context()
    x = torch.randint(0, 1 << 32, (2, 3))
    x[0, 0] = (1 << 32) - 1
    r = ctx.encrypt_int(x, bits=32)
    assert r.shape == (2, 3) and r.blocks.shape == (2, 3, 16)
    assert torch.equal(ctx.decrypt_int(r), x)
    assert torch.equal(ctx.decrypt_int(r[1]), x[1])


@pytest.mark.parametrize("op", list(BINARY))
def test_8bit(op):
    x, y = operands(8, 3)
    if op in ("eq", "ne"):
        y[2] = x[2]  # an equal pair
    check(op, 8, x, y)


def test_8bit_equal_operands_compare():
    v = random.randrange(256)
    for op in ("le", "gt", "max"):
        check(op, 8, [v, 0], [v, 0])


def test_8bit_scalar_ops():
    ctx = context()
    x, _ = operands(8, 3)
    r = ctx.encrypt_int(torch.tensor(x), 8)
    for k in (random.randrange(256), 255):
        assert ctx.decrypt_int(r + k).tolist() == [(v + k) % 256 for v in x], k
        assert ctx.decrypt_int(r - k).tolist() == [(v - k) % 256 for v in x], k
    for k in (0, 4, random.randrange(256)):
        assert ctx.decrypt_int(r * k).tolist() == [v * k % 256 for v in x], k


@pytest.mark.parametrize("op", ["add", "lt", "eq", "mul"])
def test_16bit(op):
    x, y = operands(16, 2)
    check(op, 16, x, y)


@pytest.mark.parametrize("op", ["add", "ge"])
def test_32bit_add_compare(op):
    check(op, 32, *operands(32, 2))


def test_32bit_multiply():
    x, y = random.randrange(1 << 32), random.randrange(1 << 32)
    check("mul", 32, [x], [y])


def stats(op: str, bits: int) -> tuple:
    ctx = context()
    a, b = ctx.encrypt_int(torch.tensor([1]), bits), ctx.encrypt_int(torch.tensor([2]), bits)
    c = {"add": radix.ADD, "mul": radix.MUL, "lt": radix.COMPARE["lt"], "eq": radix.COMPARE["eq"]}[op]
    s = c.plan(a, b).stats
    return s["waves"], s["pbs"]


def test_waves_and_pbs_as_documented():
    """The counts of docs/tfhe.md (tfhe-4bit's max_noise_level 4): a 32-bit add is 6 waves."""
    assert [stats("add", b) for b in (8, 16, 32)] == [(4, 13), (5, 36), (6, 91)]
    assert [stats("lt", b) for b in (8, 16, 32)] == [(3, 7), (4, 15), (5, 31)]
    assert [stats("eq", b) for b in (8, 16, 32)] == [(2, 5), (2, 9), (3, 19)]
    assert [stats("mul", b) for b in (8, 16, 32)] == [(8, 39), (10, 141), (14, 520)]


def test_radix_ops_compose_in_a_circuit(monkeypatch):
    """(a + b) * c and a max in one circuit: one plan whose waves merge the ops' waves."""
    ctx = context()
    x, y, z = (random.randrange(256) for _ in range(3))
    a, b, c = (ctx.encrypt_int(torch.tensor([v]), 8) for v in (x, y, z))
    f = fhe.tfhe.circuit(lambda a, b, c: ((a + b) * c, a.max(c)))
    calls = []
    real = ctx.apply_lut
    monkeypatch.setattr(ctx, "apply_lut", lambda ex, lut, index=None: calls.append(1) or real(ex, lut, index=index))
    prod, big = f(a, b, c)
    assert ctx.decrypt_int(prod).item() == (x + y) * z % 256 and ctx.decrypt_int(big).item() == max(x, z)
    assert f.stats["waves"] == len(calls) == 4 + 8  # the max runs beside the add and the product
    assert f.stats["pbs"] == 13 + 39 + 15


def test_clear_errors():
    ctx = context()
    with pytest.raises(fhe.ParameterError, match="multiple of message_bits"):
        ctx.encrypt_int(torch.tensor([1]), bits=7)
    with pytest.raises(fhe.EncodingError, match=r"\[0, 2\^8\)"):
        ctx.encrypt_int(torch.tensor([256]), bits=8)
    with pytest.raises(fhe.EncodingError, match="integers"):
        ctx.encrypt_int(torch.tensor([1.5]), bits=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        no_carry = fhe.tfhe.Context("toy-tfhe-4bit").keygen()
    with pytest.raises(fhe.ParameterError, match="message_bits=2"):
        no_carry.encrypt_int(torch.tensor([1]), bits=8)
    a, b = ctx.encrypt_int(torch.tensor([1]), 8), ctx.encrypt_int(torch.tensor([1]), 16)
    with pytest.raises(fhe.ShapeError, match="8 and 16 bits"):
        a + b
    with pytest.raises(fhe.IntegerArgumentError):
        a + 1.5
    with pytest.raises(fhe.UnsupportedOperationError, match="encrypt_int"):
        a < 3
    with pytest.raises(fhe.UnsupportedOperationError, match="truth value"):
        bool(a)
    with pytest.raises(fhe.ContextError, match="another context"):
        a + fhe.tfhe.RadixTensor(no_carry.encrypt(torch.tensor([[1, 1, 1, 1]])), 8)
