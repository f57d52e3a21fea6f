"""The user API of ARCHITECTURE.md's contract: ctx.encrypt / decrypt, EncryptedTensor arithmetic
with torch semantics, torch function dispatch, torch.roll, levels and scales, public contexts.

Every result is compared with the same computation on float64 / complex128 plaintext tensors.
Bounds are about 10x the errors measured on CPU: toy-n12 (scale 2^40) ~6e-10 for additions,
~1.6e-8 after a multiplication or rotation; toy-n10 (scale 2^35) ~1.3e-7 after a roll.
"""
import math

import pytest
import torch

import fhetorch as fhe
from fhetorch import EncryptedTensor

B12_ADD = 1e-8  # toy-n12, fresh or after additions (measured <= 6e-10)
B12_MUL = 1.5e-7  # toy-n12, after a multiplication, rotation or roll (measured <= 1.6e-8)
B10_MUL = 1.5e-6  # toy-n10, after a rotation or roll (two rotations and a mask; measured <= 1.3e-7)


def _rand(*shape, complex_=False, dtype=None):
    x = torch.rand(*shape, dtype=torch.float64) * 2 - 1
    if complex_:
        x = torch.complex(x, torch.rand(*shape, dtype=torch.float64) * 2 - 1)
    return x if dtype is None else x.to(dtype)


# --- encrypt / decrypt ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1000,), (2048,), (5, 7), (32, 64), (2, 3, 4), (1,), (3, 1, 5)])
def test_encrypt_shapes(ctx_n12, shape, assert_close):
    x = _rand(*shape)
    ex = ctx_n12.encrypt(x)
    assert isinstance(ex, EncryptedTensor)
    assert ex.shape == torch.Size(shape) and isinstance(ex.shape, torch.Size)
    assert ex.numel() == x.numel() and ex.dim() == len(shape) and len(ex) == shape[0]
    assert ex.device == ctx_n12.device
    assert ex.level == ctx_n12.max_level
    z = ctx_n12.decrypt(ex)
    assert z.dtype == torch.float64 and z.shape == x.shape and z.device == ctx_n12.device
    assert_close(z, x, B12_ADD, f"encrypt/decrypt {shape}")


def test_encrypt_float32_upcast(ctx_n12, assert_close):
    x = _rand(100, dtype=torch.float32)
    z = ctx_n12.decrypt(ctx_n12.encrypt(x))
    assert z.dtype == torch.float64
    assert_close(z, x.to(torch.float64), B12_ADD, "float32 input")


@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64])
def test_encrypt_complex(ctx_n12, dtype, assert_close):
    x = _rand(4, 25, complex_=True, dtype=dtype)
    ex = ctx_n12.encrypt(x)
    assert ex.is_complex() and ex.dtype == torch.complex128
    z = ctx_n12.decrypt(ex)
    assert z.dtype == torch.complex128 and z.shape == x.shape
    assert_close(z, x.to(torch.complex128), B12_ADD, f"{dtype} input")


def test_encrypt_at_level(ctx_n12, assert_close):
    x = _rand(64)
    ex = ctx_n12.encrypt(x, level=3)
    assert ex.level == 3
    assert_close(ctx_n12.decrypt(ex), x, B12_ADD, "encrypt at level 3")


# --- arithmetic ---------------------------------------------------------------------------------
def test_contract_expression(ctx_n12, assert_close):
    x, y = _rand(1000), torch.rand(1000, dtype=torch.float64)
    ex, ey = ctx_n12.encrypt(x), ctx_n12.encrypt(y)
    ez = ex * ey + 0.5 * ex - 1.0
    assert isinstance(ez, EncryptedTensor) and ez.shape == (1000,)
    assert ez.level == ex.level - 1
    z = ctx_n12.decrypt(ez)
    assert z.dtype == torch.float64
    assert_close(z, x * y + 0.5 * x - 1.0, B12_MUL, "ex * ey + 0.5 * ex - 1.0")


def _operand(kind, shape):
    """A plaintext operand and its value as a plaintext tensor."""
    if kind == "int":
        return 3, 3
    if kind == "float":
        return -0.75, -0.75
    if kind == "complex":
        return 0.5 - 0.25j, 0.5 - 0.25j
    if kind == "tensor":
        t = _rand(*shape)
        return t, t
    if kind == "row":  # broadcast along the first dimension
        t = _rand(shape[-1])
        return t, t
    if kind == "column":
        t = _rand(shape[0], 1)
        return t, t
    if kind == "0-d":
        t = torch.tensor(1.25, dtype=torch.float64)
        return t, t
    if kind == "float32":
        t = _rand(*shape, dtype=torch.float32)
        return t, t.to(torch.float64)
    if kind == "complex-tensor":
        t = _rand(*shape, complex_=True)
        return t, t
    if kind == "int-tensor":
        t = torch.randint(-3, 4, shape)
        return t, t.to(torch.float64)
    raise AssertionError(kind)


OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
KINDS = ["int", "float", "complex", "tensor", "row", "column", "0-d", "float32", "complex-tensor", "int-tensor"]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", ["enc-first", "plain-first"])
def test_plaintext_operands(ctx_n12, op, kind, order, assert_close):
    shape = (6, 10)
    x = _rand(*shape)
    ex = ctx_n12.encrypt(x)
    p, pv = _operand(kind, shape)
    f = OPS[op]
    got = f(ex, p) if order == "enc-first" else f(p, ex)
    want = f(x, pv) if order == "enc-first" else f(pv, x)
    assert isinstance(got, EncryptedTensor), type(got)
    assert got.shape == shape
    z = ctx_n12.decrypt(got)
    assert z.dtype == (torch.complex128 if kind.startswith("complex") else torch.float64)
    assert_close(z, want, B12_MUL if op == "*" else B12_ADD, f"{order} {kind} {op}")


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_encrypted_operands(ctx_n12, op, complex_, assert_close):
    x, y = _rand(3, 7, complex_=complex_), _rand(3, 7, complex_=complex_)
    ex, ey = ctx_n12.encrypt(x), ctx_n12.encrypt(y)
    got = OPS[op](ex, ey)
    assert got.is_complex() == complex_
    assert_close(ctx_n12.decrypt(got), OPS[op](x, y), B12_MUL, f"enc {op} enc")


def test_mixed_real_complex(ctx_n12, assert_close):
    x, y = _rand(50), _rand(50, complex_=True)
    ex, ey = ctx_n12.encrypt(x), ctx_n12.encrypt(y)
    for got, want in ((ex + ey, x + y), (ex * ey, x * y), (ey - ex, y - x)):
        assert got.is_complex()
        assert_close(ctx_n12.decrypt(got), want, B12_MUL, "real with complex")


def test_different_levels_match(ctx_n12, assert_close):
    x, y = _rand(100), _rand(100)
    ex, ey = ctx_n12.encrypt(x), ctx_n12.encrypt(y).drop_level(4)
    for got, want in ((ex + ey, x + y), (ey - ex, y - x), (ex * ey, x * y)):
        assert got.level <= ey.level
        assert_close(ctx_n12.decrypt(got), want, B12_MUL, "operands at different levels")


def test_negation_and_chains(ctx_n12, assert_close):
    x = _rand(300) * 0.9
    ex = ctx_n12.encrypt(x)
    ez = -ex
    assert_close(ctx_n12.decrypt(ez), -x, B12_ADD, "-ex")
    ez, want = ex, x
    for _ in range(4):
        ez, want = ez * ez - 0.25, want * want - 0.25
    assert ez.level == ex.level - 4
    assert_close(ctx_n12.decrypt(ez), want, B12_MUL, "four squarings")
    sq = ex.square()
    assert_close(ctx_n12.decrypt(sq), x * x, B12_MUL, "square()")


@pytest.mark.parametrize("operand", [True, torch.tensor(True)], ids=["bool", "bool-tensor"])
def test_bool_operand(ctx_n10, operand, assert_close):
    x = _rand(8)
    ex = ctx_n10.encrypt(x)
    try:
        got = ex * operand
    except (TypeError, ValueError, fhe.FHEError):
        return  # a clear error is acceptable too
    assert_close(ctx_n10.decrypt(got), x * operand, B10_MUL, "ex * True")


# --- torch function dispatch -------------------------------------------------------------------------
def test_torch_functions(ctx_n12, assert_close):
    x, y, t = _rand(4, 16), _rand(4, 16), _rand(16)
    ex, ey = ctx_n12.encrypt(x), ctx_n12.encrypt(y)
    cases = [
        (torch.add(ex, ey), x + y), (torch.add(ex, t), x + t), (torch.add(t, ex), t + x),
        (torch.add(ex, 2.5), x + 2.5),
        (torch.add(ex, ey, alpha=2), x + 2 * y), (torch.add(ex, t, alpha=2), x + 2 * t),
        (torch.add(ex, ey, alpha=0.5), x + 0.5 * y),
        (torch.sub(ex, ey), x - y), (torch.sub(t, ex), t - x), (torch.sub(ex, t), x - t),
        (torch.sub(ex, ey, alpha=3), x - 3 * y), (torch.sub(t, ex, alpha=2), t - 2 * x),
        (torch.add(t, ex, alpha=0.5), t + 0.5 * x),
        (torch.mul(ex, ey), x * y), (torch.mul(ex, t), x * t), (torch.mul(t, ex), t * x),
        (torch.mul(ex, 3), x * 3), (torch.multiply(ex, ey), x * y), (torch.subtract(ex, ey), x - y),
        (torch.neg(ex), -x), (torch.negative(ex), -x),
        (ex.add(ey), x + y), (ex.sub(t), x - t), (ex.mul(ey), x * y), (ex.neg(), -x),
        (ex.add(ey, alpha=2), x + 2 * y), (ex.sub(ey, alpha=2), x - 2 * y),
    ]
    for i, (got, want) in enumerate(cases):
        assert isinstance(got, EncryptedTensor), i
        assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"torch function case {i}")


@pytest.mark.parametrize("fn", [lambda e: torch.sin(e), lambda e: torch.exp(e),
                                lambda e: torch.matmul(e, torch.eye(8, dtype=torch.float64)),
                                lambda e: torch.cumsum(e, 1), lambda e: torch.div(2.0, e)],
                         ids=["sin", "exp", "matmul", "cumsum", "div"])
def test_unsupported_torch_function(ctx_n12, fn, request):
    ex = ctx_n12.encrypt(_rand(8, 8))
    name = request.node.callspec.id
    with pytest.raises(NotImplementedError, match=name):
        fn(ex)


# --- division, powers, mean, shapes: torch semantics where an exact encrypted form exists -----------
@pytest.mark.parametrize("divisor", ["int", "float", "complex", "tensor", "row", "numpy"])
def test_division_by_plaintext(ctx_n12, divisor, assert_close):
    import numpy as np
    x = _rand(4, 16)
    d = {"int": 4, "float": -2.5, "complex": 0.5 - 2j, "tensor": _rand(4, 16) + 3,
         "row": torch.arange(1, 17, dtype=torch.float64), "numpy": np.full((4, 16), 8.0)}[divisor]
    ex = ctx_n12.encrypt(x)
    want = x / torch.as_tensor(d)
    torch_fns = () if divisor == "numpy" else (torch.div(ex, d), torch.true_divide(ex, d), torch.divide(ex, d))
    for got in (ex / d, ex.div(d)) + torch_fns:  # torch's functions take no numpy arrays
        assert isinstance(got, EncryptedTensor) and got.level == ex.level - 1
        assert got.is_complex() == (divisor == "complex")
        assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"ex / {divisor}")
    assert (ex / 1).level == ex.level and (ex / -1).level == ex.level  # an integer reciprocal: no level
    assert_close(ctx_n12.decrypt(ex / -1), -x, B12_ADD, "ex / -1")


def test_division_errors(ctx_n12):
    ex = ctx_n12.encrypt(_rand(8))
    t = _rand(8)
    t[3] = 0
    for bad in (lambda: ex / 0, lambda: ex / 0.0, lambda: ex / t, lambda: torch.div(ex, torch.zeros(8))):
        with pytest.raises(fhe.EncodingError, match="div: .*zero"):
            bad()
    for bad in (lambda: 1 / ex, lambda: ex / ex, lambda: torch.div(t, ex)):
        with pytest.raises(fhe.UnsupportedOperationError, match="div: an encrypted divisor .*chebyshev"):
            bad()
    with pytest.raises(fhe.UnsupportedOperationError, match="rounding_mode='floor'"):
        torch.div(ex, 2, rounding_mode="floor")


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5, 6, 7])
def test_integer_powers(ctx_n12, k, assert_close):
    x = _rand(5, 7, complex_=k == 3)
    ex = ctx_n12.encrypt(x)
    depth = math.ceil(math.log2(k)) if k > 1 else 0
    for got in (ex ** k, torch.pow(ex, k), ex.pow(float(k))):
        assert isinstance(got, EncryptedTensor) and got.shape == x.shape
        assert got.level == ex.level - depth, f"x ** {k} should use ceil(log2 k) levels"
        assert_close(ctx_n12.decrypt(got), x ** k, B12_MUL * max(1, k), f"x ** {k}")
    if k == 2:
        assert_close(ctx_n12.decrypt(torch.square(ex)), x * x, B12_MUL, "torch.square")


def test_power_errors(ctx_n12):
    ex = ctx_n12.encrypt(_rand(8))
    for bad in (lambda: ex ** -1, lambda: ex ** 0.5, lambda: ex ** True, lambda: torch.pow(ex, 2.5)):
        with pytest.raises(fhe.UnsupportedOperationError, match="pow: only integer exponents >= 0"):
            bad()
    for bad in (lambda: 2 ** ex, lambda: torch.pow(2.0, ex)):
        with pytest.raises(fhe.UnsupportedOperationError, match="pow: an encrypted exponent"):
            bad()
    low = ctx_n12.encrypt(_rand(8), level=1)
    with pytest.raises(fhe.LevelError):
        low ** 3  # depth 2 from level 1


@pytest.mark.parametrize("shape", [(6,), (4, 16), (3, 5, 2)])
def test_mean(ctx_n12, shape, assert_close):
    x = _rand(*shape)
    ex = ctx_n12.encrypt(x)
    for got in (ex.mean(), torch.mean(ex), ex.mean(dim=tuple(range(len(shape))))):
        assert got.shape == () and got.level == ex.level - 1
        assert_close(ctx_n12.decrypt(got), x.mean(), B12_MUL, f"mean {shape}")
    kept = ex.mean(keepdim=True, dim=list(range(len(shape))))
    assert kept.shape == (1,) * len(shape)
    with pytest.raises(fhe.ShapeError, match="mean: dim"):
        ex.mean(len(shape))


@pytest.mark.parametrize("shape,dims", [((3, 4, 5), 0), ((3, 4, 5), -1), ((3, 4, 5), (0, 2)), ((3, 4, 5), (1, 2)),
                                        ((6, 10), 1), ((7,), 0), ((2, 3, 2, 3), (1, 3))])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_over_dimensions(ctx_n12, shape, dims, keepdim, assert_close):
    x = _rand(*shape, complex_=len(shape) == 2)
    ex = ctx_n12.encrypt(x)
    for got, want, name in ((ex.sum(dims, keepdim), x.sum(dims, keepdim), "sum"),
                            (torch.sum(ex, dims, keepdim=keepdim), x.sum(dims, keepdim), "torch.sum"),
                            (ex.mean(dims, keepdim), x.mean(dims, keepdim), "mean"),
                            (torch.mean(ex, dim=dims, keepdim=keepdim), x.mean(dims, keepdim), "torch.mean")):
        assert isinstance(got, EncryptedTensor) and got.shape == want.shape, (name, got.shape, want.shape)
        assert got.level == ex.level - 1
        assert_close(ctx_n12.decrypt(got), want, B12_MUL * 8, f"{name} over {dims} of {shape}")
    row = torch.rand(x.sum(dims, keepdim).shape, dtype=torch.float64)
    assert_close(ctx_n12.decrypt(ex.sum(dims, keepdim) + row), x.sum(dims, keepdim) + row, B12_MUL * 8,
                 "a partial sum is a fresh packing: it adds to plaintexts and takes rolls")


@pytest.mark.parametrize("index", [1, -1, (1, 2), (1, 2, 3), (slice(None), 1), (slice(1, 3), slice(None), slice(None, None, 2)),
                                   (Ellipsis, 0), (None, 0), (torch.tensor([2, 0, 2]),), (0, slice(None, None, -1))],
                         ids=str)
def test_indexing(ctx_n12, index, assert_close):
    x = _rand(3, 4, 5)
    ex = ctx_n12.encrypt(x)
    if isinstance(index, tuple) and any(isinstance(i, slice) and i.step is not None and i.step < 0 for i in index):
        with pytest.raises(ValueError):  # torch has no negative steps; the encrypted tensor says the same
            ex[index]
        return
    want = x[index]
    got = ex[index]
    assert got.shape == want.shape and got.level == ex.level - 1
    assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"x[{index}]")
    # the result is a fresh flat packing: arithmetic and a roll on it follow torch
    more = got * 2 + want
    assert_close(ctx_n12.decrypt(more), 3 * want, B12_MUL * 4, f"x[{index}] * 2 + plain")


def test_indexing_edges(ctx_n12, assert_close):
    x = _rand(3, 4)
    ex = ctx_n12.encrypt(x)
    assert ex[:] is ex and ex[...] is ex  # nothing moves: no level
    with pytest.raises(IndexError):
        ex[3]
    with pytest.raises(fhe.ShapeError, match="selection is empty"):
        ex[1:1]
    rows = list(ctx_n12.encrypt(x[:, 0]))  # iteration follows torch: along dimension 0
    assert len(rows) == 3
    assert_close(torch.stack([ctx_n12.decrypt(r) for r in rows]), x[:, 0], B12_MUL, "iteration")


@pytest.mark.parametrize("shape,op", [((3, 4, 5), ("transpose", 0, 2)), ((3, 4, 5), ("permute", 2, 0, 1)),
                                      ((6, 10), ("T",)), ((6, 10), ("t",)), ((5,), ("t",)), ((4, 6), ("swapaxes", 0, 1))])
def test_transpose_permute(ctx_n12, shape, op, assert_close):
    x = _rand(*shape)
    ex = ctx_n12.encrypt(x)
    name, *args = op
    if name == "T":
        got, want = ex.T, x.T
    elif name == "swapaxes":
        got, want = torch.swapaxes(ex, *args), torch.swapaxes(x, *args)
    else:
        got, want = getattr(ex, name)(*args), getattr(x, name)(*args)
        alt = getattr(torch, name)(ex, *args) if name != "permute" else torch.permute(ex, args)
        assert_close(ctx_n12.decrypt(alt), want, B12_MUL, f"torch.{name}")
    assert got.shape == want.shape
    assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"{name}{tuple(args)} of {shape}")


@pytest.mark.parametrize("case", ["rows", "columns", "three", "complex", "stack0", "stack-1"])
def test_cat_and_stack(ctx_n12, case, assert_close):
    a, b = _rand(3, 4), _rand(2, 4)
    c, z = _rand(3, 5), _rand(3, 4, complex_=True)
    parts, fn, args = {"rows": ([a, b], torch.cat, (0,)), "columns": ([a, c], torch.cat, (1,)),
                       "three": ([a, b, a], torch.concat, (0,)), "complex": ([a, z], torch.cat, (-1,)),
                       "stack0": ([a, a * 0.5], torch.stack, (0,)), "stack-1": ([a, z], torch.stack, (-1,))}[case]
    want = fn(parts, *args)
    got = fn([ctx_n12.encrypt(p) for p in parts], *args)
    assert isinstance(got, EncryptedTensor) and got.shape == want.shape and got.is_complex() == want.is_complex()
    assert got.level == ctx_n12.max_level - 1
    assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"{case}")
    assert_close(ctx_n12.decrypt(torch.roll(got, 1, 0)), torch.roll(want, 1, 0), B10_MUL, f"{case}, rolled")


def test_cat_errors(ctx_n12):
    ea, eb = ctx_n12.encrypt(_rand(3, 4)), ctx_n12.encrypt(_rand(2, 4))
    with pytest.raises(fhe.ShapeError, match="cat: Sizes of tensors must match"):
        torch.cat([ea, eb], 1)
    with pytest.raises(fhe.ShapeError, match="stack: "):
        torch.stack([ea, eb])
    with pytest.raises(fhe.UnsupportedOperationError, match="encrypt plaintext parts first"):
        torch.cat([ea, _rand(3, 4)])
    big = ctx_n12.encrypt(_rand(ctx_n12.slots // 2 + 1))
    with pytest.raises(fhe.ShapeError, match="more than the 2048 slots"):
        torch.cat([big, big])


def test_rearrangement_limits(ctx_n12):
    big = ctx_n12.encrypt(_rand(32, 64))  # a 32 x 64 transpose needs ~2000 diagonals
    with pytest.raises(fhe.UnsupportedOperationError, match="diagonals .* more than 1024"):
        big.T
    with pytest.raises(fhe.ShapeError, match="t: expects a tensor of at most 2"):
        ctx_n12.encrypt(_rand(2, 2, 2)).t()
    multi = ctx_n12.encrypt(_rand(2 * ctx_n12.slots))
    with pytest.raises(fhe.ShapeError, match="spans 2"):
        multi[0]


def test_numpy_operands_defer_to_the_tensor(ctx_n12, assert_close):
    import numpy as np
    x, a = _rand(3, 4), np.linspace(-1, 1, 12).reshape(3, 4)
    ex, at = ctx_n12.encrypt(x), torch.from_numpy(a)
    cases = [(a + ex, at + x), (a - ex, at - x), (a * ex, at * x), (ex + a, x + at), (np.float64(2.5) * ex, 2.5 * x)]
    for i, (got, want) in enumerate(cases):
        assert isinstance(got, EncryptedTensor), i
        assert_close(ctx_n12.decrypt(got), want, B12_MUL, f"numpy case {i}")


def test_positive_and_no_comparisons(ctx_n12, assert_close):
    x = _rand(8)
    ex = ctx_n12.encrypt(x)
    assert (+ex) is ex and torch.positive(ex) is ex
    for op, f in (("<", lambda: ex < 0), ("<=", lambda: ex <= ex), (">", lambda: ex > 0), ("<", lambda: 0 > ex), (">=", lambda: ex >= x),
                  ("==", lambda: ex == 0), ("!=", lambda: ex != ex)):
        with pytest.raises(fhe.UnsupportedOperationError, match=f"comparison {op} .*sign"):
            f()
    with pytest.raises(fhe.UnsupportedOperationError, match="abs of an EncryptedTensor .*chebyshev"):
        abs(ex)
    assert len({ex, ex}) == 1  # hashable by identity, as torch.Tensor


@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((24,), (2, -1, 3)),
                                       ((5, 7), (7, 5))])
def test_reshape_view_flatten(ctx_n12, shape, new, assert_close):
    x = _rand(*shape)
    ex = ctx_n12.encrypt(x)
    for got in (ex.reshape(new), ex.reshape(*new), ex.view(*new), torch.reshape(ex, new)):
        assert got.shape == x.reshape(new).shape and got.level == ex.level
        assert_close(ctx_n12.decrypt(got), x.reshape(new), B12_ADD, f"reshape {shape} -> {new}")
    r = ex.reshape(new)
    assert_close(ctx_n12.decrypt(torch.roll(r, 1, 0)), torch.roll(x.reshape(new), 1, 0), B10_MUL, "roll after reshape")
    flats = [(torch.flatten(ex), x.flatten())]
    if x.dim() > 1:
        flats += [(ex.flatten(1), x.flatten(1)), (torch.flatten(ex, 0, -2), x.flatten(0, -2))]
    for got, want in flats:
        assert got.shape == want.shape
        assert_close(ctx_n12.decrypt(got), want, B12_ADD, f"flatten {shape}")
    with pytest.raises(fhe.ShapeError, match="reshape: .*encrypted shape"):
        ex.reshape(x.numel() + 1)
    with pytest.raises(fhe.ShapeError, match="flatten: .*encrypted shape"):
        ex.flatten(5)


def test_clone_has_its_own_data(ctx_n12, assert_close):
    x = _rand(10)
    ex = ctx_n12.encrypt(x)
    for c in (ex.clone(), torch.clone(ex)):
        assert c is not ex and c.ciphertext.data.data_ptr() != ex.ciphertext.data.data_ptr()
        assert_close(ctx_n12.decrypt(c), x, B12_ADD, "clone")


def test_bootstrap_needs_a_bootstrappable_preset(ctx_n12):
    ex = ctx_n12.encrypt(_rand(8))
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        ex.bootstrap()


# --- torch.roll ---------------------------------------------------------------------------------------
def _check_roll(ctx, x, shifts, dims, assert_close, bound=B10_MUL):
    ex = ctx.encrypt(x)
    want = torch.roll(x, shifts, dims) if dims is not None else torch.roll(x, shifts)
    for got in ((torch.roll(ex, shifts, dims) if dims is not None else torch.roll(ex, shifts)),
                ex.roll(shifts, dims)):
        assert isinstance(got, EncryptedTensor) and got.shape == x.shape
        n_dims = 1 if dims is None or isinstance(dims, int) else len(dims)
        assert got.level >= ex.level - n_dims, "a roll costs at most one level per dimension"
        assert_close(ctx.decrypt(got), want, bound, f"roll {tuple(x.shape)} by {shifts} along {dims}")


@pytest.mark.parametrize("n", [512, 256, 16, 1, 100, 300, 7])
@pytest.mark.parametrize("shift", [1, -1, 3, -5, 37, 1001, -100003])
def test_roll_1d(ctx_n10, n, shift, assert_close):
    _check_roll(ctx_n10, _rand(n), shift, 0, assert_close)


@pytest.mark.parametrize("n", [512, 100])
def test_roll_1d_default_dims(ctx_n10, n, assert_close):
    _check_roll(ctx_n10, _rand(n), -7, None, assert_close)


def test_roll_full_packing_one_rotation(ctx_n10, assert_close):
    """numel == slots: a roll of the whole vector is one rotation and uses no level."""
    x = _rand(ctx_n10.slots)
    ex = ctx_n10.encrypt(x)
    r = torch.roll(ex, 5)
    assert r.level == ex.level
    assert_close(ctx_n10.decrypt(r), torch.roll(x, 5), B10_MUL, "roll of a full packing")


@pytest.mark.parametrize("shape", [(8, 16), (5, 7), (16, 3), (1, 9)])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
@pytest.mark.parametrize("shift", [1, -2, 3, 50])
def test_roll_2d(ctx_n10, shape, dim, shift, assert_close):
    _check_roll(ctx_n10, _rand(*shape), shift, dim, assert_close)


@pytest.mark.parametrize("shape", [(8, 16), (5, 7)])
@pytest.mark.parametrize("shift", [3, -11])
def test_roll_2d_flattened(ctx_n10, shape, shift, assert_close):
    _check_roll(ctx_n10, _rand(*shape), shift, None, assert_close)


@pytest.mark.parametrize("shape", [(4, 8, 16), (3, 5, 6)])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("shift", [1, -3])
def test_roll_3d(ctx_n10, shape, dim, shift, assert_close):
    _check_roll(ctx_n10, _rand(*shape), shift, dim, assert_close)


@pytest.mark.parametrize("shifts,dims", [((1, 2), (0, 1)), ((-3, 1), (1, 0)), ((2,), (0,)), ((1, 1), (1, 1))])
def test_roll_tuples(ctx_n10, shifts, dims, assert_close):
    _check_roll(ctx_n10, _rand(5, 6), shifts, dims, assert_close)


def test_roll_keyword_arguments(ctx_n10, assert_close):
    x = _rand(6, 5)
    ex = ctx_n10.encrypt(x)
    assert_close(ctx_n10.decrypt(torch.roll(ex, shifts=2, dims=1)), torch.roll(x, shifts=2, dims=1), B10_MUL,
                 "torch.roll with keywords")


def test_roll_complex_and_n12(ctx_n12, assert_close):
    x = _rand(10, 30, complex_=True)
    _check_roll(ctx_n12, x, 4, 1, assert_close, B12_MUL)
    _check_roll(ctx_n12, x, -1, 0, assert_close, B12_MUL)


def test_roll_errors(ctx_n10):
    ex = ctx_n10.encrypt(_rand(4, 5))
    with pytest.raises(IndexError):
        torch.roll(ex, 1, 2)
    with pytest.raises(fhe.ShapeError, match="roll: shifts and dims"):
        torch.roll(ex, (1, 2), (0,))


# --- raw rotation -------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 3, -3, 5, 100, -511])
def test_rotate_full_packing(ctx_n10, k, assert_close):
    x = _rand(ctx_n10.slots)
    ex = ctx_n10.encrypt(x)
    r = ex.rotate(k)
    assert r.level == ex.level and r.shape == ex.shape
    assert_close(ctx_n10.decrypt(r), torch.roll(x, -k), B10_MUL, f"rotate({k}): slot i <- slot i + k")


def test_rotate_n12(ctx_n12, assert_close):
    x = _rand(ctx_n12.slots, complex_=True)
    ex = ctx_n12.encrypt(x)
    for k in (3, -1000, 7):
        assert_close(ctx_n12.decrypt(ex.rotate(k)), torch.roll(x, -k), B12_MUL, f"rotate({k})")


def test_rotate_power_of_two_numel(ctx_n12, assert_close):
    """numel a power of two: the packing has exactly numel slots, rotate is cyclic over them."""
    x = _rand(4, 16)
    ex = ctx_n12.encrypt(x)
    assert ex.slots == 64
    r = ex.rotate(5)
    assert_close(ctx_n12.decrypt(r), torch.roll(x.flatten(), -5).reshape(4, 16), B12_MUL, "rotate(5) of 64 slots")


# --- levels and scales -----------------------------------------------------------------------------------
def test_level_scale_drop_level(ctx_n12, assert_close):
    x = _rand(200)
    ex = ctx_n12.encrypt(x)
    assert isinstance(ex.level, int) and ex.level == ctx_n12.max_level == 10
    assert isinstance(ex.scale, float)
    assert abs(math.log2(ex.scale) - 40) < 0.01, "scale is a value (about 2**40), not a bit count"
    ed = ex.drop_level(2)
    assert isinstance(ed, EncryptedTensor) and ed is not ex
    assert ed.level == ex.level - 2 and ex.level == ctx_n12.max_level  # ex unchanged
    assert abs(math.log2(ed.scale) - 40) < 0.01
    assert_close(ctx_n12.decrypt(ed), x, B12_MUL, "drop_level(2)")
    em = ex * ex
    assert em.level == ex.level - 1 and abs(math.log2(em.scale) - 40) < 0.01
    assert (ex + ex).level == ex.level and (ex * 2).level == ex.level
    assert (ex * 0.5).level == ex.level - 1


def test_conj(ctx_n12, assert_close):
    x = _rand(3, 33, complex_=True)
    ex = ctx_n12.encrypt(x)
    ec = ex.conj()
    assert ec.is_complex() and ec.level == ex.level
    assert_close(ctx_n12.decrypt(ec), x.conj(), B12_MUL, "conj()")
    assert_close(ctx_n12.decrypt(ex.mul_i()), 1j * x, B12_ADD, "mul_i()")


def test_conj_of_real_is_identity(ctx_n12, assert_close):
    x = _rand(10)
    assert_close(ctx_n12.decrypt(ctx_n12.encrypt(x).conj()), x, B12_MUL, "conj() of real")


# --- contexts ---------------------------------------------------------------------------------------
def test_public_context_computes_but_cannot_decrypt(ctx_n12, assert_close):
    server = ctx_n12.public()
    assert server.secret_key is None and ctx_n12.secret_key is not None
    x, y = _rand(40), _rand(40)
    ex = ctx_n12.encrypt(x)  # client encryption, sent to the server
    ey = server.encrypt(y)  # public-key encryption on the server
    ez = torch.roll(ex * ey + 1.0, 1)
    with pytest.raises(fhe.ContextError, match="decrypt"):
        server.decrypt(ez)
    with pytest.raises(fhe.ContextError):
        server.decrypt(ex)
    assert_close(ctx_n12.decrypt(ez), torch.roll(x * y + 1.0, 1), 5 * B12_MUL, "client decrypts server result")
    with pytest.raises(fhe.ContextError):
        server.keygen(rotations=[9])


def test_public_copies_encrypt_with_fresh_randomness(ctx_n10):
    x = _rand(64)
    a, b = ctx_n10.public().encrypt(x), ctx_n10.public().encrypt(x)
    assert not torch.equal(a.ciphertext.data, b.ciphertext.data)


def test_context_to_same_device(ctx_n12, device, assert_close):
    x = _rand(30)
    c2 = ctx_n12.to(device)
    assert c2.device == ctx_n12.device
    ex = c2.encrypt(x)
    back = ex.to(device)
    assert back.device == device
    assert_close(ctx_n12.decrypt(back), x, B12_ADD, "ctx.to(device)")
    assert_close(ctx_n12.to("cpu").decrypt(ex.to("cpu")), x, B12_ADD, "ctx.to('cpu')")
    assert ex.cpu().device.type == "cpu"


@pytest.mark.cuda
def test_context_to_cuda_and_back(ctx_n12, assert_close):
    x, y = _rand(300), _rand(300)
    cpu = ctx_n12.to("cpu")
    gpu = cpu.to("cuda")
    assert gpu.device.type == "cuda"
    ex = cpu.encrypt(x).to("cuda")
    assert ex.device.type == "cuda"
    ez = ex * gpu.encrypt(y) + 1.0
    assert_close(gpu.decrypt(ez).cpu(), x * y + 1.0, B12_MUL, "computed on cuda")
    back = ez.cpu()
    assert back.device.type == "cpu"
    assert_close(cpu.decrypt(back), x * y + 1.0, B12_MUL, "moved back to cpu")
