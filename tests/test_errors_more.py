"""More bad input, each a clear FHEError subclass (issue 10, items 5, 6 and 10): constants too
large for the level, rescales that are not meaningful, scales and integer arguments that make
no sense, truth values of encrypted tensors, contexts loaded into contexts, meta and sparse
tensors. Each test asserts the class and a piece of the message that says what to do."""
import io
import math

import numpy as np
import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev


def _rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


def _usable(ctx, level: int) -> float:
    """The largest scaled magnitude a level accepts: a quarter of its modulus (_ckks/context.py check_fits)."""
    return 2.0 ** (math.log2(ctx.basis(level).product) - 2)


def _relabel(ex, scale):
    """ex's ciphertext with another scale label (what a crafted or corrupted value looks like)."""
    return fhe.EncryptedTensor(ex.ctx, ex.ciphertext.replace(scale=scale), ex.shape)


# --- item 5: scalars checked like tensors ----------------------------------------------------
@pytest.mark.parametrize("op,name", [(lambda e, c: e + c, "add"), (lambda e, c: c + e, "add"),
                                     (lambda e, c: e - c, "sub"), (lambda e, c: torch.add(e, c), "add"),
                                     (lambda e, c: e.sub(c), "sub")],
                         ids=["add", "radd", "sub", "torch.add", "Tensor.sub"])
def test_constant_too_large_for_level_0(ctx_n10, op, name):
    ex = ctx_n10.encrypt(_rand(4), level=0)
    with pytest.raises(fhe.EncodingError) as e:
        op(ex, 1e5)
    msg = str(e.value)
    assert msg.startswith(f"{name}: constant too large for level 0") and "higher level" in msg, msg
    with pytest.raises(fhe.EncodingError, match="too large for level 0"):
        ex + torch.full((4,), 1e5)  # the tensor operand: the same class


def test_largest_constant_that_fits(ctx_n10):
    """The bound is a quarter of the level's modulus, for a tensor as for a scalar: the largest
    constant under it adds exactly, one just above it raises."""
    ex = ctx_n10.encrypt(x := _rand(16), level=0)
    c_max = math.floor(_usable(ctx_n10, 0) / ex.scale)  # ~8193 at toy-n10's level 0
    for c in (c_max, -c_max):
        torch.testing.assert_close(ctx_n10.decrypt(ex + c).cpu(), x + c, rtol=0, atol=1e-6)
        torch.testing.assert_close(ctx_n10.decrypt(ex - c).cpu(), x - c, rtol=0, atol=1e-6)
        torch.testing.assert_close(ctx_n10.decrypt(ex + torch.full((16,), float(c))).cpu(), x + c, rtol=0, atol=1e-6)
    over = c_max * 1.001
    for f in (lambda: ex + over, lambda: ex - over, lambda: ex + torch.full((16,), over)):
        with pytest.raises(fhe.EncodingError, match="too large for level 0"):
            f()


def test_integer_multiplier_bound(ctx_n10):
    """Integers multiply without a level: the integer times the scale must fit the level."""
    ex = ctx_n10.encrypt(x := _rand(16), level=0)
    k = math.floor(_usable(ctx_n10, 0) / ex.scale)
    torch.testing.assert_close(ctx_n10.decrypt(ex * k).cpu(), x * k, rtol=0, atol=1e-3)
    with pytest.raises(fhe.EncodingError, match="multiply: constant too large for level 0"):
        ex * (k + 1)
    with pytest.raises(fhe.EncodingError, match="multiply: constant too large for level 0"):
        100000 * ex  # decrypted off by ~6.5e4 before


def test_constant_multiplier_bound(ctx_n10):
    """A non-integer constant costs a rescale: it times the scales must fit the level it multiplies at."""
    ex = ctx_n10.encrypt(x := _rand(16), level=1)
    s = ev._target_scale_factor(ctx_n10, ex.ciphertext)
    bound = _usable(ctx_n10, 1) / (s * ex.scale)
    c = 0.999 * bound
    torch.testing.assert_close(ctx_n10.decrypt(ex * c).cpu(), x * c, rtol=0, atol=1e-3)
    for f in (lambda: ex * (1.001 * bound), lambda: ex * complex(0.5, 1.001 * bound),
              lambda: ex * torch.full((16,), 1.001 * bound)):
        with pytest.raises(fhe.EncodingError, match="multiply: .*too large for level 1"):
            f()


def test_constant_added_to_a_plaintext_product(ctx_n10):
    ex = ctx_n10.encrypt(x := _rand(16), level=1)
    y = _rand(16)
    prod = ex * y  # level 0
    c_max = math.floor(_usable(ctx_n10, 0) / prod.scale)
    torch.testing.assert_close(ctx_n10.decrypt(prod + c_max).cpu(), x * y + c_max, rtol=0, atol=1e-5)
    with pytest.raises(fhe.EncodingError, match="add: constant too large for level 0"):
        prod + 1e5


# --- item 6: rescale only where it means something ----------------------------------------------
@pytest.mark.parametrize("level", [None, 3, 1])
def test_rescale_of_a_nominal_ciphertext(ctx_n10, level):
    ex = ctx_n10.encrypt(_rand(16), level=level)
    with pytest.raises(fhe.ScaleError) as e:
        ex.rescale()  # scale 2^0 and an error ~1e3 before
    msg = str(e.value)
    assert msg.startswith("rescale: would leave scale 2^0.0") and "drop_level()" in msg, msg
    assert "rescale_result=False" in msg


def test_rescale_of_a_deferred_product(ctx_n10):
    """The meaningful rescale still works: a product whose rescale was deferred."""
    x, y = _rand(ctx_n10.slots), _rand(ctx_n10.slots)
    a, b = ctx_n10.encrypt_vector(x, level=4), ctx_n10.encrypt_vector(y, level=4)
    prod = ev.mul(ctx_n10, a, b, rescale_result=False)
    et = fhe.EncryptedTensor(ctx_n10, prod, (ctx_n10.slots,)).rescale()
    assert et.level == 3 and ev.same_scale(et.scale, ctx_n10.nominal_scale(3))
    torch.testing.assert_close(ctx_n10.decrypt(et).cpu(), x * y, rtol=0, atol=1e-6)


def test_drop_level_of_a_scale_it_cannot_land_on(ctx_n10):
    """Two unrescaled products (scale ~2^105): dropping would multiply by round(2^-35) = 0."""
    a = ctx_n10.encrypt_vector(_rand(ctx_n10.slots), level=4)
    p = ev.mul(ctx_n10, ev.mul(ctx_n10, a, a, rescale_result=False), a, rescale_result=False)
    with pytest.raises(fhe.ScaleError, match="drop_level: .* rescale it first"):
        ev.drop_level(ctx_n10, p)


# --- item 10: scales that make no sense --------------------------------------------------------
@pytest.mark.parametrize("scale", [2.0**-3, 0.0, -(2.0**35), math.nan, math.inf], ids=["2^-3", "0", "neg", "nan", "inf"])
def test_operand_scale_makes_no_sense(ctx_n10, scale):
    ex = ctx_n10.encrypt(_rand(4), level=3)
    bad = _relabel(ex, scale)
    for name, f in (("add", lambda: bad + ex), ("add", lambda: ex + bad), ("sub", lambda: bad - 1.0),
                    ("multiply", lambda: bad * ex), ("multiply", lambda: bad * 0.5), ("multiply", lambda: bad * 3),
                    ("multiply", lambda: bad * _rand(4)), ("drop_level", lambda: bad.drop_level()),
                    ("decrypt", lambda: ctx_n10.decrypt(bad))):
        with pytest.raises(fhe.ScaleError) as e:
            f()
        assert str(e.value).startswith(f"{name}: the ciphertext's scale") and "finite number >= 1" in str(e.value)


@pytest.mark.parametrize("scale", [2.0**-3, 0.0, -1.0, math.nan, math.inf])
def test_encode_scale_makes_no_sense(ctx_n10, scale):
    with pytest.raises(fhe.ScaleError, match="encode: scale .* is not a finite number >= 1"):
        ctx_n10.encode(_rand(4), scale=scale)


# --- item 10: integer arguments ------------------------------------------------------------------
BAD_INTS = [1.5, 2.0, True, False, "1", None, torch.tensor(1.0), torch.tensor(True), np.float64(1.0)]
BAD_IDS = ["1.5", "2.0", "True", "False", "str", "None", "float-tensor", "bool-tensor", "np.float64"]


@pytest.mark.parametrize("level", [v for v in BAD_INTS if v is not None], ids=[i for i in BAD_IDS if i != "None"])
def test_level_must_be_an_int(ctx_n10, level):
    x = _rand(4)
    for what, f in (("encrypt", lambda: ctx_n10.encrypt(x, level=level)),
                    ("encode", lambda: ctx_n10.encrypt_vector(x, level=level)),
                    ("encode", lambda: ctx_n10.encode(x, level=level))):
        with pytest.raises(fhe.IntegerArgumentError) as e:
            f()
        assert str(e.value).startswith(f"{what}: level must be an int"), str(e.value)
        assert isinstance(e.value, TypeError)


@pytest.mark.parametrize("levels", BAD_INTS, ids=BAD_IDS)
def test_drop_level_count_must_be_an_int(ctx_n10, levels):
    ex = ctx_n10.encrypt(_rand(4))
    with pytest.raises(fhe.IntegerArgumentError, match="drop_level: levels must be an int"):
        ex.drop_level(levels)


@pytest.mark.parametrize("level", [-1, 9, 100])
def test_encode_level_out_of_range(ctx_n10, level):
    with pytest.raises(fhe.LevelError, match=r"encode: level must be in \[0, 8\]"):
        ctx_n10.encode(_rand(4), level=level)


def test_integer_like_levels_work(ctx_n10):
    x = _rand(4)
    for level in (np.int64(2), torch.tensor(2)):
        ex = ctx_n10.encrypt(x, level=level)
        assert ex.level == 2 and type(ex.level) is int
        assert ex.drop_level(np.int32(1)).level == 1
    torch.testing.assert_close(ctx_n10.decrypt(ex).cpu(), x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("step", [2.5, 2.0, True, "1"], ids=["2.5", "2.0", "True", "str"])
def test_rotation_step_must_be_an_int(ctx_n10, step):
    ex = ctx_n10.encrypt(_rand(16))
    for what, f in (("rotate", lambda: ex.rotate(step)), ("rotate", lambda: ev.rotate(ctx_n10, ex.ciphertext, step)),
                    ("roll", lambda: ex.roll(step)), ("roll", lambda: ex.roll([step], [0])),
                    ("roll", lambda: ex.roll(1, step))):
        with pytest.raises(fhe.IntegerArgumentError) as e:
            f()
        assert str(e.value).startswith(f"{what}: ") and "must be an int" in str(e.value)


def test_keygen_rotation_step_must_be_an_int(make_context):
    ctx = make_context("toy-n10", fresh=True, power_of_two_rotations=False, conjugation=False, relinearization=False)
    with pytest.raises(fhe.IntegerArgumentError, match="keygen: a rotation step must be an int, got 2.5"):
        ctx.keygen(rotations=[3, 2.5], power_of_two_rotations=False, conjugation=False, relinearization=False)


# --- item 10: an encrypted value has no truth value -------------------------------------------
def test_truth_value_of_an_encrypted_tensor(ctx_n10):
    for ex in (ctx_n10.encrypt(_rand(4)), ctx_n10.encrypt(torch.tensor(1.0)), ctx_n10.encrypt(_rand(ctx_n10.slots + 1))):
        for f in (lambda: bool(ex), lambda: 1 if ex else 0, lambda: ex and 1, lambda: not ex):
            with pytest.raises(fhe.EncryptedValueError, match=r"no truth value .* decrypt it first"):
                f()
        for kind in (float, int, complex):
            with pytest.raises(fhe.EncryptedValueError, match=f"{kind.__name__}.*decrypt it first"):
                kind(ex)


# --- item 10: a context file loaded into a context ----------------------------------------------
def test_load_a_context_file_into_a_context(ctx_n10, ctx_n12):
    f = io.BytesIO()
    fhe.save(ctx_n10, f)
    for ctx in (ctx_n10, ctx_n12):
        f.seek(0)
        with pytest.raises(fhe.SerializationError, match=r"holds a context.* load it without one"):
            fhe.load(f, ctx)
    f.seek(0)
    with pytest.warns(fhe.InsecureParametersWarning):
        assert fhe.load(f).key_id == ctx_n10.key_id  # the way that works


# --- item 10: meta and sparse tensors ---------------------------------------------------------------
META = torch.zeros(4, device="meta", dtype=torch.float64)
SPARSE = torch.tensor([0.0, 0.5, 0.0, -0.25], dtype=torch.float64).to_sparse()


@pytest.mark.parametrize("t,hint", [(META, "meta tensor"), (SPARSE, "to_dense")], ids=["meta", "sparse"])
def test_meta_and_sparse_tensors(ctx_n10, t, hint):
    ex = ctx_n10.encrypt(_rand(*t.shape))
    big = ctx_n10.encrypt(_rand(ctx_n10.slots + 4))  # two ciphertexts: operands go chunk by chunk
    cases = [("encrypt", lambda: ctx_n10.encrypt(t)), ("encode", lambda: ctx_n10.encode(t)),
             ("add", lambda: ex + t), ("sub", lambda: ex - t), ("mul", lambda: ex * t), ("add", lambda: t + ex),
             ("add", lambda: big + t)]
    for what, f in cases:
        with pytest.raises(fhe.EncodingError) as e:
            f()
        assert str(e.value).startswith(f"{what}: got") and hint in str(e.value), str(e.value)


# --- item 10: shapes -------------------------------------------------------------------------------
def test_shape_errors_are_fhe_errors(ctx_n10):
    ea, eb = ctx_n10.encrypt(_rand(4)), ctx_n10.encrypt(_rand(5))
    for f, match in ((lambda: ea + eb, "same shape"), (lambda: ea * _rand(3), "does not broadcast"),
                     (lambda: ea @ torch.ones(5, 2), "does not match")):
        with pytest.raises(fhe.ShapeError, match=match) as e:
            f()
        assert isinstance(e.value, ValueError)  # existing `except ValueError` code keeps working


def test_product_of_operands_at_tiny_scales(ctx_n10):
    """Operands relabelled to scale 2^10: their product, rescaled, would sit at 2^-15."""
    ea, eb = (_relabel(ctx_n10.encrypt(_rand(4), level=3), 2.0**10) for _ in range(2))
    with pytest.raises(fhe.ScaleError, match=r"multiply: would leave scale 2\^-15.0 at level 2 \(the operands' scales"):
        ea * eb
