"""fhetorch.tfhe end to end on the CPU at toy presets: every LUT exhaustively over its message
space (random functions), batched PBS equal to one-at-a-time PBS bit for bit, mixed LUTs in one
launch, many-LUT, LWE linear ops with overflow tracking, the server context, clear errors."""
import dataclasses
import functools
import random
import warnings

import pytest
import torch

import fhetorch as fhe


@functools.lru_cache(maxsize=None)
def context(name: str, carry: bool = False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.tfhe.preset(name)
        if carry:  # the same toy set read as 2 message + 2 carry bits
            p = fhe.tfhe.make_params(dataclasses.replace(p.literal(), message_bits=2, carry_bits=2,
                                                         name=name + "-carry"), allow_insecure=True)
        return fhe.tfhe.Context(p).keygen()


@pytest.mark.parametrize("name", ["toy-tfhe-2bit", "toy-tfhe-4bit"])
def test_random_luts_exhaustively(name):
    ctx = context(name)
    mm = ctx.params.message_modulus
    rnd = random.Random()
    x = torch.arange(mm).repeat(3)
    ex = ctx.encrypt(x)
    for _ in range(3):
        table = [rnd.randrange(mm) for _ in range(mm)]
        ey = fhe.tfhe.LUT.from_table(torch.tensor(table))(ex)
        assert ctx.decrypt(ey).tolist() == [table[v] for v in x.tolist()], table
    ez = fhe.tfhe.LUT(lambda m: (3 * m + 1) % mm, bits=mm.bit_length() - 1)(ex)
    assert torch.equal(ctx.decrypt(ez), (3 * x + 1) % mm)


def test_batched_pbs_equals_one_at_a_time():
    ctx = context("toy-tfhe-4bit")
    ex = ctx.encrypt(torch.randint(0, 16, (2, 3)))
    lut = fhe.tfhe.LUT(lambda m: m * m % 16, bits=4)
    ey = lut(ex)
    assert ey.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert torch.equal(lut(ex[i, j:j + 1]).data[0], ey.data[i, j])


def test_mixed_luts_in_one_launch():
    ctx = context("toy-tfhe-4bit")
    x = torch.randint(0, 16, (40,))
    luts = [fhe.tfhe.LUT(lambda m: 15 - m, bits=4), fhe.tfhe.LUT(lambda m: m // 2, bits=4),
            fhe.tfhe.LUT(lambda m: (m * 7) % 16, bits=4)]
    idx = torch.randint(0, 3, (40,))
    ey = ctx.apply_lut(ctx.encrypt(x), luts, index=idx)
    want = torch.tensor([luts[i].table[v] for i, v in zip(idx.tolist(), x.tolist())])
    assert torch.equal(ctx.decrypt(ey), want)


def test_many_lut_two_functions_of_one_input():
    ctx = context("toy-tfhe-2bit")
    x = torch.randint(0, 4, (30,))
    low = fhe.tfhe.LUT(lambda m: m % 2, bits=2)(ctx.encrypt(x))  # degree 1: room for 2 functions
    a, b = ctx.apply_many_luts(low, [fhe.tfhe.LUT(lambda m: 3 * m, bits=1), fhe.tfhe.LUT(lambda m: 2 - m, bits=1)])
    assert torch.equal(ctx.decrypt(a), 3 * (x % 2))
    assert torch.equal(ctx.decrypt(b), 2 - x % 2)


def test_linear_ops_with_carries():
    ctx = context("toy-tfhe-4bit", carry=True)
    x, y = torch.randint(0, 4, (50,)), torch.randint(0, 4, (50,))
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    assert torch.equal(ctx.decrypt(ex + ey, carries=True), x + y)
    assert torch.equal(ctx.decrypt(ex - ey), (x - y) % 4)
    assert torch.equal(ctx.decrypt(-ex), (-x) % 4)
    assert torch.equal(ctx.decrypt(ex * 2 + 1), (2 * x + 1) % 4)
    assert torch.equal(ctx.decrypt(3 - ex), (3 - x) % 4)
    carry = fhe.tfhe.LUT(lambda v: v // 4, bits=4)(ex + ey)
    assert torch.equal(ctx.decrypt(carry), (x + y) // 4)
    assert torch.equal(ctx.decrypt(torch.add(ex, ey), carries=True), x + y)


def test_overflow_is_refused():
    ctx = context("toy-tfhe-4bit")
    ex = ctx.encrypt(torch.randint(0, 16, (4,)))
    ey = fhe.tfhe.LUT(lambda m: (3 * m + 1) % 16, bits=4)(ex)
    with pytest.raises(fhe.MessageOverflowError, match="apply a LUT"):
        ey + ex * 2 - 1
    with pytest.raises(fhe.MessageOverflowError):
        -ex  # no carry bits: z - x would set the padding bit
    small = fhe.tfhe.LUT(lambda m: m % 2, bits=4)(ex)
    with pytest.raises(fhe.MessageOverflowError, match="squared weights"):
        small * 3  # degree 3 fits, but 9 > max_noise_level^2
    with pytest.raises(fhe.MessageOverflowError, match="LUT of 2 bits"):
        fhe.tfhe.LUT(lambda m: m, bits=2)(ex)


def test_clear_errors():
    ctx = context("toy-tfhe-4bit")
    with pytest.raises(fhe.EncodingError, match=r"\[0, 16\)"):
        ctx.encrypt(torch.tensor([3, 16]))
    with pytest.raises(fhe.EncodingError, match="integers"):
        ctx.encrypt(torch.tensor([0.5]))
    other = context("toy-tfhe-2bit")
    ex = ctx.encrypt(torch.tensor([1, 2]))
    with pytest.raises(fhe.ContextError, match="another context"):
        other.decrypt(other.encrypt(torch.tensor([1, 2])) + ex)
    with pytest.raises(fhe.ContextError, match="another context"):
        other.decrypt(ex)
    with pytest.raises(fhe.IntegerArgumentError):
        ex + 0.5
    with pytest.raises(fhe.UnsupportedOperationError, match="PBS"):
        ex * ex
    with pytest.raises(fhe.UnsupportedOperationError, match="torch.matmul"):
        torch.matmul(ex, ex)
    with pytest.raises(fhe.ParameterError):
        fhe.tfhe.LUT(lambda m: -1, bits=2)
    with pytest.raises(fhe.ParameterError):
        fhe.tfhe.LUT.from_table([1, 2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        fresh = fhe.tfhe.Context("toy-tfhe-4bit")
        with pytest.raises(fhe.ParameterError):
            fhe.tfhe.Context("no-such-preset")
    with pytest.raises(fhe.ContextError, match="no secret key"):
        fresh.encrypt(torch.tensor([1]))
    with pytest.raises(fhe.MissingKeyError, match="keygen"):
        fresh.public()


def test_server_context_bootstraps_without_secrets():
    ctx = context("toy-tfhe-2bit")
    server = ctx.public()
    assert not server.has_secret_key and ctx.has_secret_key
    ex = ctx.encrypt(torch.tensor([0, 1, 2, 3]))
    ey = fhe.tfhe.LUT(lambda m: (m + 1) % 4, bits=2)(ex)
    assert ctx.decrypt(ey).tolist() == [1, 2, 3, 0]
    with pytest.raises(fhe.ContextError, match="no secret key"):
        server.decrypt(ey)


def test_presets_listed():
    info = fhe.tfhe.presets()
    assert {"tfhe-2bit", "tfhe-4bit", "tfhe-6bit", "tfhe-8bit", "toy-tfhe-4bit"} <= set(info)
