"""The tensor layer's wrappers of the circuits (fhetorch/tensor/functions.py) and the boundary
between the two: circuits take and return Ciphertexts and never touch an EncryptedTensor; the
wrappers accept tensors, EncryptedTensors and power bases and give the same values.

Values are fresh uniform draws; bounds as in tests/circuits/test_polynomial.py (toy-n12, scale
2^40: about 10x the measured errors).
"""
import ast
import pathlib

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev
from fhetorch._ckks.ciphertext import Ciphertext
from fhetorch.circuits import approximations as A
from fhetorch.circuits import bootstrap as cbts
from fhetorch.circuits import polynomial as cpoly
from fhetorch.circuits.chebyshev import interpolate
from fhetorch.tensor import functions

P = fhe.ckks.polynomial
CIRCUITS = pathlib.Path(fhe.__file__).resolve().parent / "circuits"
BOUND = 3e-7  # max |encrypted - plaintext| on [-1, 1] (measured 2.5e-8)


def _uniform(n, lo=-1.0, hi=1.0):
    return torch.rand(n, dtype=torch.float64) * (hi - lo) + lo


# --- the boundary -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(CIRCUITS.rglob("*.py")), ids=lambda p: str(p.relative_to(CIRCUITS)))
def test_circuits_never_touch_the_tensor_layer(path):
    """No tensor-layer helper (`_like`, `.ciphertext`, `.ciphertexts`), no duck typing on them
    (hasattr / getattr with their names) and no type-name string comparison in the circuits."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("_like", "ciphertext", "ciphertexts", "__name__"), \
                f"circuits/{path.relative_to(CIRCUITS)}:{node.lineno} uses .{node.attr}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
            names = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
            assert not {"_like", "ciphertext", "ctx", "layout"} & set(names), \
                f"circuits/{path.relative_to(CIRCUITS)}:{node.lineno} duck-types on {names}"


def test_facade_reexports_the_tensor_layer_wrappers():
    assert fhe.ckks.bootstrap is functions.bootstrap and fhe.ckks.bootstrap_pair is functions.bootstrap_pair
    for name in ("chebyshev", "sigmoid", "sign", "relu", "power_basis", "from_coefficients", "ChebyshevFunction",
                 "Composite", "HEFunction"):
        assert getattr(P, name) is getattr(functions, name), name
    assert P.PowerBasis is cpoly.PowerBasis and P.evaluate is cpoly.evaluate and P.cost is cpoly.cost


# --- one function, four kinds of input ------------------------------------------------------------
def test_same_values_on_every_input(ctx_n12, assert_close):
    ctx = ctx_n12
    f = P.chebyshev(torch.exp, (-1, 1), 7)
    x = _uniform(ctx.slots)
    ct = ctx.encrypt_vector(x)
    by_circuit = cpoly.evaluate(ctx, ct, interpolate(torch.exp, (-1, 1), 7))  # the circuit, on a Ciphertext
    assert isinstance(by_circuit, Ciphertext)
    by_method = f.evaluate(ctx, ct)
    on_basis = f(P.PowerBasis(ctx, ct))  # a Ciphertext's basis gives a Ciphertext
    assert isinstance(on_basis, Ciphertext)
    et = ctx.encrypt(x)
    on_tensor = f(et)
    assert isinstance(on_tensor, fhe.EncryptedTensor) and on_tensor.shape == et.shape
    for out in (by_circuit, by_method, on_basis):
        assert out.level == ct.level - f.depth
        assert_close(ctx.decrypt_vector(out).real, f(x), BOUND, "exp degree 7 on a Ciphertext")
    assert_close(ctx.decrypt(on_tensor), f(x), BOUND, "exp degree 7 on an EncryptedTensor")
    assert_close(f(x), torch.exp(x), 1e-5, "the interpolant")  # degree 7 on [-1, 1]: 2.2e-6 in theory


def test_a_bare_ciphertext_needs_its_context(ctx_n12):
    ct = ctx_n12.encrypt_vector(_uniform(8), slots=8)
    with pytest.raises(fhe.ContextError, match=r"\.evaluate\(ctx, ct\)"):
        P.chebyshev(torch.exp, (-1, 1), 3)(ct)
    with pytest.raises(fhe.ContextError, match="bootstrap: a Ciphertext needs its context"):
        fhe.ckks.bootstrap(ct)
    with pytest.raises(fhe.ContextError, match="bootstrap_pair"):
        fhe.ckks.bootstrap_pair(ct, ct)


def test_composite_wrapper_and_circuit_agree(ctx_n12, assert_close):
    """A two-stage composite times its input (a small ReLU-like chain): the wrapper, the circuit
    on the folded series, and the plaintext chain give the same values."""
    ctx = ctx_n12
    g = P.chebyshev(torch.tanh, (-1, 1), 3)
    h = P.chebyshev(torch.sin, (-1, 1), 3)
    comp = P.Composite([g, h], times_input=True, scale=0.5, offset=0.5)
    want_series = [g.series, h.series.scaled(0.5, 0.5)]
    assert [s.coeffs.tolist() for s in comp.stage_series] == [s.coeffs.tolist() for s in want_series]
    x = _uniform(64, -0.9, 0.9)
    plain = cpoly.plain_composite(x, want_series, times_input=True)
    assert torch.equal(comp(x), plain)
    assert_close(plain, x * (0.5 * torch.sin(torch.tanh(x)) + 0.5), 0.02, "degree-3 chain vs the functions")
    assert comp.depth == cpoly.composite_cost(want_series, times_input=True).depth == 2 + 2 + 1
    ex = ctx.encrypt(x)
    ey = comp(ex)
    ct = cpoly.evaluate_composite(ctx, ctx.encrypt_vector(x, slots=64), want_series, times_input=True)
    assert ex.level - ey.level == comp.depth and ct.level == ey.level
    assert_close(ctx.decrypt(ey), plain, BOUND, "composite on an EncryptedTensor")
    assert_close(ctx.decrypt_vector(ct).real, plain, BOUND, "composite circuit on a Ciphertext")


def test_composite_refuses_before_any_work(ctx_n12, monkeypatch):
    ctx = ctx_n12

    def boom(*a, **k):
        raise AssertionError("work done before the level check")

    ct = ctx.encrypt_vector(_uniform(8), slots=8, level=3)
    monkeypatch.setattr(ev, "mul", boom)
    with pytest.raises(fhe.LevelError, match=r"sign\[15, 15, 27\]: needs 13 level"):
        P.sign().evaluate(ctx, ct)


def test_approximation_wrappers_are_the_circuits_series():
    assert P.sigmoid(5).series is A.sigmoid_series(5)
    stages, err = A.composite_sign_series()
    s, r = P.sign(), P.relu()
    assert [st.coeffs.tolist() for st in s.stages] == [q.coeffs.tolist() for q in stages]
    assert s.sign_error == r.sign_error == err
    assert [q.coeffs.tolist() for q in r.stage_series] == [q.coeffs.tolist() for q in A.relu_series()[0]]
    assert r.times_input and not s.times_input


# --- bootstrapping wrappers: what they refuse before any work ------------------------------------
def test_bootstrap_wrappers_refuse(ctx_n10):
    ex = ctx_n10.encrypt(_uniform(4))
    with pytest.raises(fhe.ParameterError, match="bootstrap: parameters 'toy-n10' are not bootstrappable"):
        fhe.ckks.bootstrap(ex)
    with pytest.raises(fhe.ParameterError, match="not bootstrappable"):
        cbts.bootstrap(ctx_n10, ex.ciphertext)  # the circuit, on a Ciphertext
    ez = ctx_n10.encrypt(torch.complex(_uniform(4), _uniform(4)))
    with pytest.raises(fhe.EncodingError, match="bootstrap_with: both tensors must be real"):
        fhe.ckks.bootstrap_pair(ex, ez)


def test_bootstrap_pair_refuses_different_packings(make_context):
    ctx = make_context("toy-n13-bts", power_of_two_rotations=False, conjugation=False)
    a = ctx.encrypt_vector(_uniform(8), slots=8, level=0)
    b = ctx.encrypt_vector(_uniform(16), slots=16, level=0)
    with pytest.raises(fhe.SlotError, match="bootstrap_pair: the ciphertexts pack 8 and 16 slots"):
        cbts.bootstrap_pair(ctx, a, b)
