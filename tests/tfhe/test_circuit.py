"""fhe.tfhe.circuit on the CPU at a toy preset (2 message + 2 carry bits): the LWETensor shape
operations a circuit needs, tracing into waves (waves = the DAG's PBS depth, one apply_lut call
per wave), circuit = eager bit for bit, any batch shape, bivariate LUTs exhaustively, errors."""
import functools
import random
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._tfhe.circuit import TracedLWE


@functools.lru_cache(maxsize=None)
def context(name="toy-tfhe-4bit", nu=4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.tfhe.Context(fhe.tfhe.preset(name).with_message_bits(2, max_noise_level=nu)).keygen()


def counted(ctx, monkeypatch):
    """Counts ctx.apply_lut calls (and the ciphertexts of each)."""
    calls = []
    real = ctx.apply_lut

    def apply_lut(ex, lut, *, index=None):
        calls.append(ex.numel())
        return real(ex, lut, index=index)
    monkeypatch.setattr(ctx, "apply_lut", apply_lut)
    return calls


def lut(fn):
    return fhe.tfhe.LUT(fn, bits=4)


# ----------------------------------------------------------------------------- shape operations

def test_shape_ops_follow_torch():
    ctx = context()
    x = torch.randint(0, 4, (2, 3, 4))
    ex = ctx.encrypt(x)

    def dec(e):
        return ctx.decrypt(e, carries=True)
    assert torch.equal(dec(ex[1, :, ::2]), x[1, :, ::2])
    assert torch.equal(dec(ex[..., torch.tensor([3, 0])]), x[..., [3, 0]])
    assert torch.equal(dec(ex.reshape(6, -1)), x.reshape(6, -1))
    assert torch.equal(dec(ex.view(4, 6)), x.view(4, 6))
    assert torch.equal(dec(torch.flatten(ex, 1)), x.flatten(1))
    assert torch.equal(dec(ex.flatten()), x.flatten())
    assert torch.equal(dec(ex.unsqueeze(-1)), x.unsqueeze(-1))
    assert torch.equal(dec(ex[:1].squeeze(0)), x[0])
    assert torch.equal(dec(ex.transpose(0, -1)), x.transpose(0, -1))
    assert torch.equal(dec(ex.permute(2, 0, 1)), x.permute(2, 0, 1))
    assert torch.equal(dec(torch.stack([ex, ex], dim=-1)), torch.stack([x, x], -1))
    assert torch.equal(dec(torch.cat([ex, ex[:, :1]], dim=1)), torch.cat([x, x[:, :1]], 1))
    assert (len(ex), ex.shape, ex.numel(), ex.ndim, ex.size(-1)) == (2, (2, 3, 4), 24, 3, 4)
    with pytest.raises(TypeError):
        len(ex[0, 0, 0])
    with pytest.raises(IndexError):
        ex.unsqueeze(5)


def test_sum_tracks_degree_and_noise():
    ctx = context()
    x = torch.randint(0, 4, (3, 4))
    ex = ctx.encrypt(x)
    s = torch.sum(ex, dim=-1)  # 4 terms: degree 4 * 3, noise level 4
    assert (s.degree, s.noise_level) == (12, 4)
    assert torch.equal(ctx.decrypt(s, carries=True), x.sum(-1))
    s = ex[:2, :2].sum((0, 1), keepdim=True)
    assert s.shape == (1, 1) and torch.equal(ctx.decrypt(s, carries=True), x[:2, :2].sum((0, 1), keepdim=True))
    with pytest.raises(fhe.MessageOverflowError, match="LWETensor.sum"):
        ex.sum()  # 12 terms of up to 3
    stacked = torch.stack([ex[:, 0] * 2, ex[:, 1]])  # the largest degree and noise level
    assert (stacked.degree, stacked.noise_level) == (6, 4)


def test_other_torch_functions_raise_naming_the_op():
    ex = context().encrypt(torch.tensor([1, 2]))
    calls = {"matmul": lambda: torch.matmul(ex, ex), "exp": lambda: torch.exp(ex),
             "where": lambda: torch.where(torch.tensor([True, False]), ex, ex)}
    for name, call in calls.items():
        with pytest.raises(fhe.UnsupportedOperationError, match=f"torch.{name}"):
            call()
    with pytest.raises(fhe.ContextError, match="another context"):
        torch.cat([ex, context(nu=3).encrypt(torch.tensor([1]))])


# ----------------------------------------------------------------------------- waves

def chain(a, b):
    """Three PBS deep on one path, one deep on another: 3 waves; 5 PBS nodes."""
    s = a + b  # level 0
    c = lut(lambda v: v // 4)(s)  # wave 1
    m = lut(lambda v: v % 4)(s)  # wave 1, the same input: same launch
    d = lut(lambda v: (3 - v) % 4)(c + m)  # wave 2
    e = lut(lambda v: (v * 3) % 4)(d * 2 + b)  # wave 3
    return torch.stack([e, m]), lut(lambda v: v ^ 1)(a)  # the last LUT: wave 1


def eager_chain(x, y):
    s = x + y
    c, m = s // 4, s % 4
    d = (3 - (c + m)) % 4
    return torch.stack([(d * 2 + y) * 3 % 4, m]), x ^ 1


def test_waves_equal_the_pbs_depth_and_one_apply_lut_each(monkeypatch):
    ctx = context()
    x, y = torch.randint(0, 4, (5,)), torch.randint(0, 4, (5,))
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    c = fhe.tfhe.circuit(chain)
    plan = c.plan(ex, ey)
    assert plan.stats["waves"] == 3
    assert plan.stats["pbs_per_wave"] == [15, 5, 5] and plan.stats["luts_per_wave"] == [3, 1, 1]
    calls = counted(ctx, monkeypatch)
    (out, flipped) = c(ex, ey)
    assert calls == [15, 5, 5]  # one launch per wave, every ciphertext of the wave in it
    want, want_flipped = eager_chain(x, y)
    assert torch.equal(ctx.decrypt(out), want) and torch.equal(ctx.decrypt(flipped), want_flipped)


def test_circuit_equals_eager_bit_for_bit():
    ctx = context()
    ex, ey = ctx.encrypt(torch.randint(0, 4, (2, 3))), ctx.encrypt(torch.randint(0, 4, (2, 3)))
    (out, flipped), (eout, eflipped) = fhe.tfhe.circuit(chain)(ex, ey), chain(ex, ey)
    assert torch.equal(out.data, eout.data) and torch.equal(flipped.data, eflipped.data)
    assert (out.degree, out.noise_level) == (eout.degree, eout.noise_level)


def test_any_batch_shape_and_plans_cached_per_signature():
    ctx = context()
    c = fhe.tfhe.circuit(chain)
    for shape in ((1,), (2, 2), ()):
        x, y = torch.randint(0, 4, shape), torch.randint(0, 4, shape)
        out, flipped = c(ctx.encrypt(x), ctx.encrypt(y))
        want, want_flipped = eager_chain(x, y)
        assert out.shape == want.shape and torch.equal(ctx.decrypt(out), want)
        assert torch.equal(ctx.decrypt(flipped), want_flipped)
    assert len(c._plans) == 3 and c.stats["pbs"] == 5


def test_levelization_is_asap_on_random_dags(monkeypatch):
    """Random DAGs of LUTs and sums: waves = the longest PBS path, one launch per wave, values
    as computed on plaintexts."""
    ctx = context()
    rnd = random.Random()
    calls = counted(ctx, monkeypatch)
    for _ in range(2):
        ops = []
        for _ in range(6):  # (kind, operands, table) over the values so far
            kind = rnd.choice(["lut", "lut", "sum"])
            ops.append((kind, [rnd.randrange(2 + len(ops)) for _ in range(2)], [rnd.randrange(4) for _ in range(16)]))

        def run(a, b, on_plain):
            vals, depth = [a, b], [0, 0]
            for kind, (i, j), table in ops:
                if kind == "lut":
                    vals.append(torch.tensor(table)[vals[i]] if on_plain else fhe.tfhe.LUT.from_table(table)(vals[i]))
                    depth.append(depth[i] + 1)
                else:  # a clean sum: both operands below 4 when they are LUT outputs or inputs
                    vals.append((vals[i] + vals[j]) % 4 if on_plain else lut(lambda v: v % 4)(vals[i] + vals[j]))
                    depth.append(max(depth[i], depth[j]) + 1)
            return vals[-1], depth[-1]
        x, y = torch.randint(0, 4, (3,)), torch.randint(0, 4, (3,))
        want, depth = run(x, y, True)
        calls.clear()
        c = fhe.tfhe.circuit(lambda a, b: run(a, b, False)[0])
        out = c(ctx.encrypt(x), ctx.encrypt(y))
        assert torch.equal(ctx.decrypt(out), want)
        assert c.stats["waves"] == depth == len(calls)


def test_bivariate_luts_exhaustively():
    ctx = context()
    x, y = torch.arange(4).repeat_interleave(4), torch.arange(4).repeat(4)
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    table = [[random.randrange(4) for _ in range(4)] for _ in range(4)]
    fn = lambda a, b: table[a][b]  # noqa: E731
    want = torch.tensor([table[a][b] for a, b in zip(x.tolist(), y.tolist())])
    assert torch.equal(ctx.decrypt(fhe.tfhe.apply_bivariate(fn, ex, ey)), want)
    c = fhe.tfhe.circuit(lambda a, b: fhe.tfhe.apply_bivariate(fn, a, b))
    assert torch.equal(ctx.decrypt(c(ex, ey)), want)
    assert c.stats["waves"] == 2  # 4 a + b has noise level 17 > 4^2: a is first scaled by a PBS
    roomy = context(nu=5)  # noise level 17 <= 25: one wave
    c(roomy.encrypt(x), roomy.encrypt(y))
    assert c.stats["waves"] == 1


def test_circuits_compose_and_inline():
    ctx = context()
    inner = fhe.tfhe.circuit(lambda a: lut(lambda v: (v + 1) % 4)(a))
    outer = fhe.tfhe.circuit(lambda a, b: (inner(a), inner(b)))
    x, y = torch.randint(0, 4, (4,)), torch.randint(0, 4, (4,))
    u, v = outer(ctx.encrypt(x), ctx.encrypt(y))
    assert torch.equal(ctx.decrypt(u), (x + 1) % 4) and torch.equal(ctx.decrypt(v), (y + 1) % 4)
    assert outer.stats["waves"] == 1 and outer.stats["pbs"] == 8


# ----------------------------------------------------------------------------- errors

def test_overflow_is_caught_at_trace_time(monkeypatch):
    ctx = context()
    calls = counted(ctx, monkeypatch)
    ex = ctx.encrypt(torch.tensor([1, 2]))

    def too_many(a):
        b = lut(lambda v: v % 4 + 1)(a)
        return b + b + b + b + b + b  # degree 24
    with pytest.raises(fhe.MessageOverflowError, match="beyond the message space"):
        fhe.tfhe.circuit(too_many)(ex)
    with pytest.raises(fhe.MessageOverflowError, match="squared weights"):
        fhe.tfhe.circuit(lambda a: lut(lambda v: v % 2)(a) * 5)(ex)
    assert calls == []  # nothing ran


def test_clear_errors():
    ctx, other = context(), context(nu=3)
    ex, eo = ctx.encrypt(torch.tensor([1])), other.encrypt(torch.tensor([1]))
    with pytest.raises(fhe.ContextError, match="another context"):
        fhe.tfhe.circuit(lambda a, b: a + b)(ex, eo)
    with pytest.raises(fhe.ContextError, match="not an argument"):
        fhe.tfhe.circuit(lambda a: a + ex)(ctx.encrypt(torch.tensor([2])))
    with pytest.raises(fhe.UnsupportedOperationError, match="torch.matmul"):
        fhe.tfhe.circuit(lambda a: torch.matmul(a, a))(ex)
    with pytest.raises(fhe.UnsupportedOperationError, match="PBS"):
        fhe.tfhe.circuit(lambda a: a * a)(ex)
    with pytest.raises(fhe.UnsupportedOperationError, match="truth value"):
        fhe.tfhe.circuit(lambda a: a if a else a)(ex)
    with pytest.raises(fhe.UnsupportedOperationError, match="not been traced"):
        fhe.tfhe.circuit(lambda a: a).stats
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        keyless = fhe.tfhe.Context(ctx.params)
    with pytest.raises(fhe.MissingKeyError, match="keygen"):
        fhe.tfhe.circuit(lambda a: lut(lambda v: v)(a))(fhe.tfhe.LWETensor(keyless, ex.data, 3))
    traced = []
    fhe.tfhe.circuit(lambda a: traced.append(a) or a)(ex)
    assert isinstance(traced[0], TracedLWE) and traced[0].shape == (1,) and traced[0].degree == 3


def test_message_bits_split_keeps_the_noise_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        for name in ("tfhe-4bit", "toy-tfhe-4bit"):
            p = fhe.tfhe.preset(name)
            s = p.with_message_bits(2)
            assert (s.message_bits, s.carry_bits, s.delta, s.log2_p_fail) == (2, 2, p.delta, p.log2_p_fail)
            assert s.security_bits == p.security_bits and s.name == f"{name}:2+2"
        ctx = fhe.tfhe.Context("toy-tfhe-4bit", message_bits=2)
        assert ctx.params.message_modulus == 4 and ctx.params.carry_bits == 2
        with pytest.raises(fhe.ParameterError, match="message_bits"):
            fhe.tfhe.preset("tfhe-4bit").with_message_bits(5)
        with pytest.raises(fhe.ParameterError, match="fail a PBS"):
            fhe.tfhe.preset("tfhe-4bit").with_message_bits(2, max_noise_level=32)  # 2^-61.1 > 2^-64
