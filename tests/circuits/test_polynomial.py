"""Polynomial evaluation (fhetorch/circuits): Chebyshev interpolation on plaintext, encrypted
evaluation against the plaintext interpolant, depth and multiplication counts, shared power
bases, sigmoid / composite sign / ReLU, level errors, the EncryptedTensor path.

Inputs are fresh uniform random values in the interval. Encrypted bounds are about 10x the
errors measured on CPU (toy-n12 at scale 2^40, values of the functions below 3 in magnitude).
"""
import math
import warnings

import numpy as np
import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev
from fhetorch.circuits import approximations, polynomial as cpoly
from fhetorch.circuits.chebyshev import Chebyshev, fit_least_squares, interpolate, max_error, remez_odd

P = fhe.ckks.polynomial  # the public facade

# max |encrypted - plaintext interpolant|, per interval (measured maxima in comments)
BOUND = {(-1.0, 1.0): 3e-7,  # 2.5e-8
         (-2.0, 3.0): 1e-6}  # 9e-8 (one more level: the affine map)
FUNCS = {(-1.0, 1.0): torch.exp, (-2.0, 3.0): lambda x: torch.sin(x) + 0.5 * torch.cos(2 * x)}


def _uniform(n, interval, device="cpu"):
    a, b = interval
    return (torch.rand(n, dtype=torch.float64, device=device) * (b - a) + a)


def _nominal(ctx, ct):
    return ev.same_scale(ct.scale, ctx.nominal_scale(ct.level))


def _affine_cost(interval):
    a, b = interval
    return 0 if float(2 / (b - a)).is_integer() else 1


# --- plaintext ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,interval,degree,bound", [
    (torch.exp, (-1.0, 1.0), 15, 2e-14),  # measured 3e-15 (roundoff)
    (torch.sin, (-3.0, 3.0), 31, 1e-14),
    (torch.sigmoid, (-8.0, 8.0), 63, 1e-6),  # measured 1.3e-7
    (lambda x: 1.0 / (1.0 + 25.0 * x * x), (-1.0, 1.0), 63, 1e-4),  # Runge's function: 4.3e-6
])
def test_plain_interpolant_vs_function(fn, interval, degree, bound):
    f = P.chebyshev(fn, interval, degree)
    x = _uniform(10000, interval)
    err = float((f(x) - fn(x)).abs().max())
    assert f(x).dtype == torch.float64
    assert err <= bound, err


def test_interpolation_is_exact_for_polynomials():
    # 3 - x + 2x^2 - x^3/2 = sum of T_i with known coefficients
    poly = lambda x: 3 - x + 2 * x**2 - 0.5 * x**3  # noqa: E731
    s = interpolate(poly, (-1, 1), 3)
    want = np.polynomial.chebyshev.poly2cheb([3, -1, 2, -0.5])
    np.testing.assert_allclose(s.coeffs, want, atol=1e-14)
    s5 = interpolate(poly, (-1, 1), 5)  # higher degree: the extra coefficients vanish
    assert np.abs(s5.coeffs[4:]).max() < 1e-14 if s5.degree >= 4 else True
    # Clenshaw on complex input agrees with numpy's chebval
    z = torch.complex(torch.rand(50, dtype=torch.float64), torch.rand(50, dtype=torch.float64)) - 0.5
    np.testing.assert_allclose(s(z).numpy(), np.polynomial.chebyshev.chebval(z.numpy(), want), atol=1e-13)


def test_interpolation_parity():
    assert interpolate(torch.sin, (-2, 2), 15).parity == "odd"
    assert interpolate(torch.cos, (-2, 2), 14).parity == "even"
    assert interpolate(torch.exp, (-2, 2), 15).parity is None
    assert interpolate(torch.sin, (0, 2), 15).parity is None  # not symmetric: no parity assumed


def test_interpolation_accepts_scalar_functions():
    f = P.chebyshev(math.exp, (-1, 2), 12)
    x = _uniform(1000, (-1, 2))
    assert float((f(x) - torch.exp(x)).abs().max()) < 1e-10


def test_remez_degree_one_closed_form():
    # the best a*x for 1 on [lo, 1] is a = 2/(1+lo), error (1-lo)/(1+lo)
    lo = 0.2
    s, err = remez_odd(1, lo)
    assert abs(err - (1 - lo) / (1 + lo)) < 1e-9
    assert abs(s.coeffs[1] - 2 / (1 + lo)) < 1e-9


# --- cost report ------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval", [(-1.0, 1.0), (0.0, 1.0), (-2.0, 3.0)])
def test_depth_is_optimal(interval):
    for d in list(range(1, 34)) + [63, 64, 127]:
        s = Chebyshev(np.random.default_rng(d).uniform(-1, 1, d + 1), interval)
        c = cpoly.cost(s)
        assert c.poly_depth == math.ceil(math.log2(d + 1)), (d, c)
        assert c.affine_depth == _affine_cost(interval)
        assert c.depth == c.poly_depth + c.affine_depth
        assert c.mults <= 2 * math.isqrt(d) + 2 * math.ceil(math.log2(d + 1)) + 2, (d, c)  # O(sqrt d), not O(d)


def test_multiplication_counts():
    # generic coefficients on [-1, 1] (these figures are in docs/circuits.md)
    got = {d: cpoly.cost(Chebyshev(np.linspace(1, 2, d + 1))).mults for d in (3, 7, 15, 31, 63)}
    assert got == {3: 2, 7: 4, 15: 7, 31: 10, 63: 15}, got  # a spine's products relinearised once
    # odd series skip the even baby steps
    sin31 = interpolate(torch.sin, (-1, 1), 31)
    assert cpoly.cost(sin31).mults <= got[31]
    assert cpoly.cost(sin31, baby=8).basis_mults < cpoly.cost(Chebyshev(np.linspace(1, 2, 32)), baby=8).basis_mults


def test_integer_and_constant_series():
    t4 = cpoly.cost(Chebyshev([0, 0, 0, 0, 1]))  # T_4 itself: integer coefficients, no rescale
    assert t4.depth == 2 and t4.rescales == 0
    assert cpoly.cost(Chebyshev([2.5])).depth == 0


# --- encrypted -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval", [(-1.0, 1.0), (-2.0, 3.0)], ids=["unit", "shifted"])
@pytest.mark.parametrize("degree", [1, 2, 3, 7, 8, 15, 31])
def test_encrypted_vs_interpolant(ctx_n12, interval, degree, assert_close):
    ctx = ctx_n12
    f = P.chebyshev(FUNCS[interval], interval, degree)
    x = _uniform(ctx.slots, interval, ctx.device)
    ct = ctx.encrypt_vector(x)
    basis = P.PowerBasis(ctx, ct, interval)
    out = f.evaluate(ctx, basis)
    want_depth = math.ceil(math.log2(degree + 1)) + _affine_cost(interval)
    assert ct.level - out.level == want_depth == f.cost().depth
    assert _nominal(ctx, out)
    assert basis.ops.mults == f.cost().mults  # the simulator's count is what ran
    assert_close(ctx.decrypt_vector(out).real, f(x), BOUND[interval], f"degree {degree} on {interval}")


def test_encrypted_degree_63_n13(make_context, assert_close):
    ctx = make_context("toy-n13", power_of_two_rotations=False, conjugation=False)
    f = P.chebyshev(torch.tanh, (-4, 4), 63)
    x = _uniform(ctx.slots, (-4, 4))
    ct = ctx.encrypt_vector(x)
    out = f.evaluate(ctx, ct)
    assert ct.level - out.level == 6 + 1
    assert_close(ctx.decrypt_vector(out).real, f(x), 1e-6, "tanh degree 63 on [-4, 4], toy-n13")  # 8e-8


def test_shared_power_basis(ctx_n12, assert_close):
    ctx = ctx_n12
    x = _uniform(ctx.slots, (-1, 1))
    basis = P.PowerBasis(ctx, ctx.encrypt_vector(x))
    f, g = P.chebyshev(torch.exp, (-1, 1), 15), P.chebyshev(torch.sin, (-1, 1), 15)
    out_f = f.evaluate(ctx, basis)
    after_f = basis.ops.mults
    planned = g.cost(basis=basis)  # knows what the basis already holds
    out_g = g.evaluate(ctx, basis)
    assert basis.ops.mults - after_f == planned.mults < g.cost().mults
    assert planned.basis_mults == 0  # sin's odd baby steps are all there already
    assert_close(ctx.decrypt_vector(out_f).real, f(x), BOUND[(-1.0, 1.0)], "exp on a shared basis")
    assert_close(ctx.decrypt_vector(out_g).real, g(x), BOUND[(-1.0, 1.0)], "sin on a shared basis")
    with pytest.raises(fhe.ApproximationError, match="interval"):
        P.chebyshev(torch.exp, (0, 1), 3).evaluate(ctx, basis)


def test_level_error_before_any_work(ctx_n12, monkeypatch):
    ctx = ctx_n12
    f = P.chebyshev(torch.exp, (-2, 3), 7)  # needs 3 + 1 levels
    ct = ctx.encrypt_vector(_uniform(ctx.slots, (-2, 3)), level=3)

    def boom(*a, **k):
        raise AssertionError("work done before the level check")

    monkeypatch.setattr(ev, "mul", boom)
    monkeypatch.setattr(ev, "rescale", boom)
    with pytest.raises(fhe.LevelError, match=r"needs 4 level\(s\) \(3 for the polynomial \+ 1 .*level 3"):
        f.evaluate(ctx, ct)
    with pytest.raises(fhe.LevelError, match="needs 14"):
        P.relu()(ctx.encrypt(torch.zeros(4)))  # toy-n12 has 10 levels


def test_level_exactly_enough(ctx_n12, assert_close):
    ctx = ctx_n12
    f = P.chebyshev(torch.exp, (-1, 1), 15)
    x = _uniform(ctx.slots, (-1, 1))
    out = f.evaluate(ctx, ctx.encrypt_vector(x, level=4))
    assert out.level == 0
    assert_close(ctx.decrypt_vector(out).real, f(x), BOUND[(-1.0, 1.0)], "degree 15 ending at level 0")


def test_off_nominal_input_costs_one_level(ctx_n12, assert_close):
    ctx = ctx_n12
    x = _uniform(ctx.slots, (-1, 1))
    ct = ctx.encrypt_vector(x)
    ct = ct.replace(scale=ct.scale * 1.5)  # now encrypts x / 1.5 at a scale off the nominal one
    f = P.chebyshev(torch.exp, (-1, 1), 7)
    basis = P.PowerBasis(ctx, ct)
    assert basis.affine_levels == 1
    out = f.evaluate(ctx, basis)
    assert ct.level - out.level == 4 and _nominal(ctx, out)
    assert_close(ctx.decrypt_vector(out).real, f(x / 1.5), BOUND[(-1.0, 1.0)], "off-nominal input")


def test_nearly_nominal_input_costs_no_extra_level(ctx_n12, assert_close):
    """A scale within the evaluator's tolerance of nominal (2^-32 off, what a chain of polynomials
    leaves) counts as nominal: the map is free and T_8 (three squarings, 2^-29 off unless the input
    is made exact) still lands on its planned level. It raised LevelError in the sort at n16-bts35."""
    ctx = ctx_n12
    x = _uniform(ctx.slots, (-1, 1))
    for off in (1 + 2.0**-32, 1 - 2.0**-32):
        ct = ctx.encrypt_vector(x, level=5)
        ct = ct.replace(scale=ct.scale * off)
        f = P.chebyshev(torch.sin, (-1, 1), 31)  # depth 5: exactly the input's levels
        out = f.evaluate(ctx, ct)
        assert out.level == 0 and _nominal(ctx, out)
        assert_close(ctx.decrypt_vector(out).real, f(x), BOUND[(-1.0, 1.0)], "nearly nominal input")


# --- EncryptedTensor --------------------------------------------------------------------------------------
def test_encrypted_tensor_path(ctx_n12, assert_close):
    ctx = ctx_n12
    f = fhe.ckks.polynomial.chebyshev(torch.tanh, (-3, 3), 15)
    t = _uniform(300, (-3, 3)).reshape(20, 15)
    et = ctx.encrypt(t)
    ey = f(et)
    assert isinstance(ey, fhe.EncryptedTensor) and ey.shape == t.shape
    assert et.level - ey.level == f.depth == 5
    assert_close(ctx.decrypt(ey), f(t), BOUND[(-2.0, 3.0)], "EncryptedTensor tanh")
    # a shared basis of an EncryptedTensor returns EncryptedTensors too
    basis = P.power_basis(et, (-3, 3))
    g = P.chebyshev(torch.sin, (-3, 3), 7)
    e1, e2 = f(basis), g(basis)
    assert isinstance(e2, fhe.EncryptedTensor) and e2.shape == t.shape
    assert_close(ctx.decrypt(e1), f(t), BOUND[(-2.0, 3.0)], "tanh on a shared basis")
    assert_close(ctx.decrypt(e2), g(t), BOUND[(-2.0, 3.0)], "sin on a shared basis")


def test_complex_input(ctx_n12, assert_close):
    ctx = ctx_n12
    f = P.chebyshev(torch.exp, (-1, 1), 7)
    z = torch.complex(_uniform(64, (-0.5, 0.5)), _uniform(64, (-0.5, 0.5)))
    ez = f(ctx.encrypt(z))
    assert ez.is_complex()
    assert_close(ctx.decrypt(ez), f(z), BOUND[(-1.0, 1.0)], "real series on complex slots")


# --- approximations ------------------------------------------------------------------------------------------
HELR3 = [0.15012, -0.0015930]  # HELR's degree-3 sigmoid on [-8, 8]: 0.5 + 0.15012 x - 0.0015930 x^3
SIGMOID_ERR = {3: 0.115, 5: 0.062, 7: 0.033}  # max |fit - sigmoid| on [-8, 8] (measured 0.1143, 0.0614, 0.0322)
SIGMOID_RMS = {3: 0.0597, 5: 0.0273, 7: 0.0127}  # RMS on [-8, 8] (measured 0.05959, 0.02726, 0.01262)


@pytest.mark.parametrize("degree", [3, 5, 7])
def test_sigmoid(ctx_n12, degree, assert_close):
    ctx = ctx_n12
    s = P.sigmoid(degree)
    assert s.interval == (-8.0, 8.0) and s.degree == degree
    mono = np.polynomial.chebyshev.cheb2poly(s.coeffs)  # in y = x / 8
    mono = mono / 8.0 ** np.arange(mono.size)
    assert abs(mono[0] - 0.5) < 1e-12
    if degree == 3:
        np.testing.assert_allclose(mono[1::2], HELR3, rtol=1e-4)  # our own fit reproduces HELR's
    assert max_error(s.series, torch.sigmoid) <= SIGMOID_ERR[degree]
    g = torch.linspace(-8, 8, 100001, dtype=torch.float64)
    assert float((s(g) - torch.sigmoid(g)).pow(2).mean().sqrt()) <= SIGMOID_RMS[degree]
    x = _uniform(ctx.slots, (-8, 8))
    ex = ctx.encrypt(x)
    ey = s(ex)
    assert ex.level - ey.level == s.depth == {3: 3, 5: 4, 7: 4}[degree]
    assert_close(ctx.decrypt(ey), s(x), 1e-6, f"sigmoid degree {degree}")  # 5e-8
    assert_close(ctx.decrypt(ey), torch.sigmoid(x), SIGMOID_ERR[degree], f"sigmoid{degree} vs torch.sigmoid")


def test_least_squares_fit_of_a_polynomial_is_exact():
    s = fit_least_squares(lambda x: x**3 - x, (-2, 2), 5)
    x = _uniform(100, (-2, 2))
    assert float((s(x) - (x**3 - x)).abs().max()) < 1e-12


def test_weighted_least_squares_minimises_the_weighted_error():
    """weight= changes the norm the fit minimises: each fit is the better one in its own norm,
    and the weighted fit is the weighted-lstsq solution on a fine grid (to quadrature error)."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,))))
    width = float(torch.empty(1).uniform_(0.02, 0.2, generator=g))
    weight = lambda x: torch.exp(-x.abs() / width) + 0.02  # noqa: E731
    plain = fit_least_squares(torch.relu, (-1, 1), 15, points=2048)
    fitted = fit_least_squares(torch.relu, (-1, 1), 15, points=2048, weight=weight)
    x = torch.linspace(-1, 1, 40001, dtype=torch.float64)
    w = weight(x)

    def norm(s, w):
        return float(((s(x) - torch.relu(x)) ** 2 * w).mean())

    assert norm(fitted, w) < norm(plain, w), f"width {width}"
    assert norm(plain, torch.ones_like(x)) < norm(fitted, torch.ones_like(x)), f"width {width}"
    basis = torch.stack([Chebyshev(torch.eye(16, dtype=torch.float64)[i].numpy(), (-1, 1))(x) for i in range(16)], 1)
    ref = torch.linalg.lstsq(basis * w.sqrt()[:, None], torch.relu(x) * w.sqrt()).solution
    assert float((fitted(x) - basis @ ref).abs().max()) < 1e-3, f"width {width}"
    assert fit_least_squares(torch.relu, (-1, 1), 9, weight=lambda x: torch.ones_like(x)).coeffs == \
        pytest.approx(fit_least_squares(torch.relu, (-1, 1), 9).coeffs, abs=1e-12)
    with pytest.raises(ValueError, match="weight"):
        fit_least_squares(torch.relu, (-1, 1), 9, weight=lambda x: -torch.ones_like(x))


def test_sign_relu_plaintext_precision():
    e = approximations.measured_errors()
    assert e["sign"] <= 2.0**-13  # measured 2^-13.30 on 2^-9 <= |x| <= 1
    assert e["relu"] <= 2.0**-13  # measured 2^-13.08 on [-1, 1]
    assert e["sign_max"] <= 1.0 + 2.0**-13
    s = P.sign()
    assert [st.degree for st in s.stages] == [15, 15, 27]
    assert s.depth == 13 and P.relu().depth == 14
    assert all(st.series.parity == "odd" for st in s.stages)


def test_sign_relu_encrypted(make_context, assert_close):
    ctx = make_context("toy-n13", power_of_two_rotations=False, conjugation=False)
    x = _uniform(512, (-1, 1))
    ex = ctx.encrypt(x)
    sgn, relu = P.sign(), P.relu()
    es, er = sgn(ex), relu(ex)
    assert ex.level - es.level == 13 and ex.level - er.level == 14
    assert_close(ctx.decrypt(es), sgn(x), 3e-5, "composite sign vs its plaintext")  # 1.5e-6, near x = 0
    assert_close(ctx.decrypt(er), relu(x), 1e-6, "composite relu vs its plaintext")  # 5.5e-8
    far = x.abs() >= 2.0**-9
    assert_close(ctx.decrypt(es)[far], torch.sign(x)[far], 2.0**-13 + 3e-5, "composite sign vs sign")
    assert_close(ctx.decrypt(er), torch.relu(x), 2.0**-13 + 1e-6, "composite relu vs relu")


def test_bad_arguments():
    with pytest.raises(fhe.ApproximationError, match="a < b"):
        P.chebyshev(torch.exp, (1, -1), 3)
    with pytest.raises(fhe.ApproximationError, match="degree must be >= 0"):
        P.chebyshev(torch.exp, (-1, 1), -1)
    with pytest.raises(fhe.ApproximationError, match="sigmoid: degree must be 3, 5 or 7"):
        P.sigmoid(4)
    with pytest.raises(fhe.ApproximationError, match="not finite"):
        P.chebyshev(lambda x: torch.log(x), (-1, 1), 3)  # not finite at the nodes
    with pytest.raises(fhe.ApproximationError, match="odd"):
        P.sign((15, 16))
    with pytest.raises(fhe.ApproximationError, match="eps"):
        P.relu(eps=1.5)
    with pytest.raises(fhe.ApproximationError, match="baby must be a power of two"):
        cpoly.cost(Chebyshev([1.0, 2.0, 3.0]), baby=3)
    with pytest.raises(TypeError):
        P.power_basis(torch.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert repr(P.chebyshev(torch.exp, (-1, 1), 7)).startswith("ChebyshevFunction(exp")
