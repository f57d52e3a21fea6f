"""Bad input gets a clear error, never a silent wrong answer (ARCHITECTURE.md, "Choices that
decide safety"): each error is a subclass of fhetorch.FHEError (ValueError where the API says
so) and its message names the operation."""
import math

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev


def _rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


def test_error_hierarchy():
    for cls in (fhe.ParameterError, fhe.LevelError, fhe.ScaleError, fhe.MissingKeyError, fhe.ContextError,
                fhe.EncodingError, fhe.SerializationError):
        assert issubclass(cls, fhe.FHEError)
    assert issubclass(fhe.InsecureParametersWarning, UserWarning)
    assert str(fhe.MissingKeyError("rotate: no key")) == "rotate: no key"  # not quoted like KeyError


# --- levels and scales ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["mul", "square", "mul_values", "mul_scalar"])
def test_level_exhausted(ctx_n12, op):
    x = _rand(20)
    ex, ey = ctx_n12.encrypt(x, level=0), ctx_n12.encrypt(x, level=0)
    call = {"mul": lambda: ex * ey, "square": lambda: ex.square(), "mul_values": lambda: ex * x,
            "mul_scalar": lambda: 0.5 * ex}[op]
    with pytest.raises(fhe.LevelError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith("multiply"), msg
    assert "needs 1 level" in msg and "level 0" in msg


def test_level_exhausted_after_a_chain(ctx_n10):
    ex = ctx_n10.encrypt(_rand(10))
    for _ in range(ctx_n10.max_level):
        ex = ex * ex
    assert ex.level == 0
    with pytest.raises(fhe.LevelError, match="multiply"):
        ex * ex


def test_drop_level_too_far(ctx_n12):
    ex = ctx_n12.encrypt(_rand(10), level=2)
    with pytest.raises(fhe.LevelError, match="drop_level: needs 3 level"):
        ex.drop_level(3)


def test_rescale_at_level_0(ctx_n12):
    with pytest.raises(fhe.LevelError, match="rescale"):
        ctx_n12.encrypt(_rand(10), level=0).rescale()


def test_scale_mismatch_at_level_0_user(ctx_n12):
    e = ctx_n12.encrypt(_rand(10), level=0)
    ex = fhe.EncryptedTensor(ctx_n12, e.ciphertext.replace(scale=e.scale * 3), e.shape)  # level 0, not the nominal scale
    ey = ctx_n12.encrypt(_rand(10), level=0)
    for op, f in (("add", lambda: ex + ey), ("sub", lambda: ex - ey), ("add", lambda: torch.add(ey, ex))):
        with pytest.raises(fhe.ScaleError, match=op) as e:
            f()
        assert "level 0" in str(e.value)


def test_scale_mismatch_at_level_0_scheme(ctx_n12):
    x = _rand(ctx_n12.slots)
    a, b = ctx_n12.encrypt_vector(x, level=0), ctx_n12.encrypt_vector(x, level=0)
    prod = ev.relinearize(ctx_n12, ev.mul_raw(ctx_n12, a, b))  # scale ~2^80 at level 0
    for op in ("add", "sub"):
        with pytest.raises(fhe.ScaleError, match=op):
            getattr(ev, op)(ctx_n12, prod, a)


# --- keys ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bare_ctx(make_context):
    """toy-n10 with secret, public keys only: no rotation, relinearisation or conjugation keys."""
    return make_context("toy-n10", power_of_two_rotations=False, relinearization=False, conjugation=False)


@pytest.mark.parametrize("step", [3, -1, 5, 100])
def test_missing_rotation_key(bare_ctx, step):
    ex = bare_ctx.encrypt(_rand(bare_ctx.slots))
    with pytest.raises(fhe.MissingKeyError) as e:
        ex.rotate(step)
    msg = str(e.value)
    assert msg.startswith("rotate") and f"step {step}" in msg
    assert f"rotations=[{step}]" in msg  # says how to get it
    assert isinstance(e.value, fhe.FHEError)


def test_missing_rotation_key_in_roll(bare_ctx):
    ex = bare_ctx.encrypt(_rand(bare_ctx.slots))
    with pytest.raises(fhe.MissingKeyError, match="rotate: no key for step -1"):
        torch.roll(ex, 1)


def test_missing_relinearization_key(bare_ctx):
    ex = bare_ctx.encrypt(_rand(10))
    with pytest.raises(fhe.MissingKeyError, match="relinearize"):
        ex * ex


def test_missing_conjugation_key(bare_ctx):
    ex = bare_ctx.encrypt(torch.complex(_rand(10), _rand(10)))
    with pytest.raises(fhe.MissingKeyError, match="conjugate"):
        ex.conj()


def test_keygen_on_public_context(ctx_n10):
    with pytest.raises(fhe.ContextError, match="keygen"):
        ctx_n10.public().keygen(rotations=[9])


# --- values -------------------------------------------------------------------------------
def test_too_many_values(ctx_n10):
    """More values than slots span several ciphertexts; operations that need one say so."""
    assert not ctx_n10.encrypt(_rand(ctx_n10.slots)).multi  # exactly full: one ciphertext
    ex = ctx_n10.encrypt(_rand(ctx_n10.slots + 1))
    assert ex.multi and ex.count == 2 and ex.ciphertext.data.shape[0] == 2  # one batched ciphertext
    with pytest.raises(fhe.ShapeError) as e:
        ex.rotate(1)
    msg = str(e.value)
    assert msg.startswith("rotate:") and "spans 2" in msg and str(ctx_n10.slots + 1) in msg and str(ctx_n10.slots) in msg
    with pytest.raises(fhe.ShapeError, match="spans"):
        ex @ torch.ones(ctx_n10.slots + 1, 3)


def test_empty_tensor(ctx_n10):
    with pytest.raises(fhe.EncodingError, match="encrypt"):
        ctx_n10.encrypt(torch.zeros(0))


@pytest.mark.parametrize("level", [-1, 9, 100])
def test_encrypt_level_out_of_range(ctx_n10, level):
    with pytest.raises(fhe.LevelError, match="encrypt: level must be in"):
        ctx_n10.encrypt(_rand(4), level=level)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_non_finite_in_encrypt(ctx_n10, bad, complex_):
    x = _rand(3, 4)
    if complex_:
        x = torch.complex(x, _rand(3, 4))
        x[1, 2] = complex(0.5, bad)
    else:
        x[1, 2] = bad
    with pytest.raises(fhe.EncodingError, match="NaN or inf"):
        ctx_n10.encrypt(x)


PLAIN_BAD = {
    "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "complex nan": complex(math.nan, 1.0),
    "complex inf": complex(0.0, math.inf), "0-d nan tensor": torch.tensor(math.nan),
    "tensor with inf": torch.tensor([1.0, 2.0, math.inf, 4.0]),
    "tensor with nan": torch.tensor([[math.nan], [0.0], [1.0]]),
}


@pytest.mark.parametrize("op,name", [(lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"),
                                     (lambda a, b: a * b, "mul"), (lambda a, b: b + a, "add"),
                                     (lambda a, b: torch.mul(b, a), "mul")],
                         ids=["add", "sub", "mul", "radd", "torch.mul"])
@pytest.mark.parametrize("bad", list(PLAIN_BAD))
def test_non_finite_plaintext_operand(ctx_n10, op, name, bad):
    ex = ctx_n10.encrypt(_rand(3, 4))
    with pytest.raises(fhe.EncodingError, match=name):
        op(ex, PLAIN_BAD[bad])


def test_values_too_large_for_level_0(ctx_n12):
    x = torch.full((8,), 1e6, dtype=torch.float64)
    try:
        ex = ctx_n12.encrypt(x, level=0)
    except fhe.EncodingError:
        return  # the clear error this test asks for
    z = ctx_n12.decrypt(ex)
    assert torch.allclose(z, x, rtol=1e-6), f"silent wrong answer: encrypted {x[0].item()}, decrypted {z[0].item()}"


@pytest.mark.parametrize("op", ["add", "mul"])
def test_constant_too_large(ctx_n10, op):
    ex = ctx_n10.encrypt(_rand(4))
    with pytest.raises(fhe.FHEError, match=op):
        ex + 1e300 if op == "add" else ex * 1e300


# --- contexts and shapes ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def other_ctx(make_context):
    """Same preset as ctx_n10, other keys."""
    return make_context("toy-n10", fresh=True, power_of_two_rotations=False, conjugation=False)


@pytest.mark.parametrize("op,name", [(lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"),
                                     (lambda a, b: a * b, "mul"), (lambda a, b: torch.add(a, b), "add"),
                                     (lambda a, b: torch.mul(b, a), "mul")],
                         ids=["add", "sub", "mul", "torch.add", "torch.mul"])
def test_operands_from_different_contexts(ctx_n10, other_ctx, ctx_n12, op, name):
    x = _rand(16)
    ea, eb, ec = ctx_n10.encrypt(x), other_ctx.encrypt(x), ctx_n12.encrypt(x)
    with pytest.raises(fhe.ContextError, match=name):
        op(ea, eb)  # same parameters, other keys
    with pytest.raises(fhe.ContextError, match=name):
        op(ea, ec)  # other parameters


def test_decrypt_with_other_context(ctx_n10, other_ctx, ctx_n12):
    ea = ctx_n10.encrypt(_rand(16))
    for ctx in (other_ctx, ctx_n12):
        with pytest.raises(fhe.ContextError, match="decrypt"):
            ctx.decrypt(ea)


def test_decrypt_without_secret_key(ctx_n10):
    server = ctx_n10.public()
    ex = server.encrypt(_rand(16))
    with pytest.raises(fhe.ContextError, match="decrypt") as e:
        server.decrypt(ex)
    assert "secret key" in str(e.value)
    with pytest.raises(fhe.ContextError, match="decrypt"):
        server.decrypt_vector(ex.ciphertext)


def test_decrypt_not_an_encrypted_tensor(ctx_n10):
    with pytest.raises(fhe.ContextError, match="decrypt"):
        ctx_n10.decrypt(_rand(4))


@pytest.mark.parametrize("shapes", [((5, 7), (7, 5)), ((35,), (5, 7)), ((4,), (8,)), ((2, 3), (2, 3, 1))])
@pytest.mark.parametrize("op,name", [(lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"),
                                     (lambda a, b: a * b, "mul")], ids=["add", "sub", "mul"])
def test_encrypted_operands_of_different_shapes(ctx_n10, shapes, op, name):
    ea, eb = ctx_n10.encrypt(_rand(*shapes[0])), ctx_n10.encrypt(_rand(*shapes[1]))
    with pytest.raises(ValueError, match=f"{name}: encrypted operands must have the same shape"):
        op(ea, eb)


def test_plaintext_not_broadcastable(ctx_n10):
    ex = ctx_n10.encrypt(_rand(5, 7))
    for t in (_rand(5), _rand(7, 5), _rand(2, 5, 7)):
        with pytest.raises(ValueError, match="broadcast"):
            ex + t
        with pytest.raises(ValueError, match="broadcast"):
            ex * t


@pytest.mark.parametrize("fn,name", [(torch.sin, "sin"), (torch.tanh, "tanh"), (torch.abs, "abs"),
                                     (lambda e: torch.matmul(e, torch.eye(4)), "matmul")])
def test_unsupported_operations(ctx_n10, fn, name):
    ex = ctx_n10.encrypt(_rand(4, 4))
    with pytest.raises(NotImplementedError, match=name):
        fn(ex)


def test_bootstrap_on_a_non_bootstrappable_preset(ctx_n10):
    with pytest.raises(fhe.ParameterError, match="n16-bts40"):
        ctx_n10.encrypt(_rand(4)).bootstrap()


@pytest.mark.cuda
def test_operands_on_different_devices(ctx_n10):
    x = _rand(16)
    cpu, gpu = ctx_n10.to("cpu"), ctx_n10.to("cuda")
    with pytest.raises(fhe.ContextError, match="add"):
        cpu.encrypt(x) + gpu.encrypt(x)
