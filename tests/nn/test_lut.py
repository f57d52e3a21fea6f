"""Lookup tables in compiled models (fhetorch/nn/lut.py): relu="lut" (every ReLU through CKKS <->
TFHE switching) and activations without a polynomial form (GELU, SiLU, Sigmoid, Tanh, Hardswish),
in the direct form (fn by LUT) and the product form (x times a factor by LUT; the tests at the end).

The direct form's encrypted run quantises each ReLU input (divided by its bound B) to the grid of
fhetorch.nn.lut.grid_interval; simulate() does the same in float64. An input within the noise of
a midpoint between grid points may take either neighbour (the switch's contract), so encrypted
and simulated ReLU outputs differ by at most one grid step times B per value, and the logits of
conv -> ReLU -> global average -> linear by at most max_i sum_j |W_ij| step B (plus CKKS noise).
A wrong grid point or a lost value is far outside that."""
import warnings

import pytest
import torch
import torch.nn as nn

import fhetorch as fhe
from fhetorch.nn import plan as plan_module
from fhetorch.nn.compiler import LUTActSim, LUTReLUSim
from fhetorch.nn.lut import FACTOR_INTERVAL, SHARPEN, SHARPEN_LEVELS, SHARPEN_SLOPE, LUTReLU, factor, grid_interval, sharpen

TOY = "toy-n13-bts"


def _model():
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4, 3)).eval()


def test_grid_has_zero_and_covers_the_interval():
    for bits in (3, 4, 6, 8):
        lo, hi = grid_interval(bits)
        g = 1 << bits
        pts = lo + (hi - lo) * torch.arange(g, dtype=torch.float64) / (g - 1)
        assert lo <= -1.0 and hi == 1.0 and float(pts.abs().min()) < 1e-12  # relu(0) stays 0 in empty slots
        y = torch.linspace(-1, 1, 1001, dtype=torch.float64)
        q = LUTReLU.quantise(y, bits)
        assert float((q - y).abs().max()) <= (hi - lo) / (g - 1) / 2 + 1e-12


def test_plan_has_no_relu_polynomial_and_no_bootstrap(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(_model(), torch.randn(32, 1, 8, 8), preset=TOY, relu="lut", lut_form="direct")
    relu = next(s for s in cm.plan.steps if s.kind == "relu")
    cfg = fhe.ckks.bootstrap_config(TOY)
    assert relu.level_out == cfg.user_levels + cfg.stc_levels  # EvalMod's output level
    assert cm.plan.bootstraps == 0 and cm.plan.relu_depths == []
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        fhe.nn.compile(_model(), torch.randn(8, 1, 8, 8), preset="toy-n12", relu="lut")


def test_encrypted_matches_simulation_within_one_grid_step(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        model = _model()
        cm = fhe.nn.compile(model, torch.randn(32, 1, 8, 8), preset=TOY, relu="lut", lut_form="direct")
        cm.keygen()
    x = torch.randn(1, 1, 8, 8)
    got = cm.decrypt(cm(cm.encrypt(x)))
    sim = cm.simulate(x)
    assert cm.last_ranges.ok
    bits = cm.relu_fn.grid_bits(TOY)
    lo, hi = grid_interval(bits)
    step = (hi - lo) / ((1 << bits) - 1)
    relu_in = next(l.inputs[0] for l in cm.layers if l.kind == "relu")
    w = model[4].weight.detach().to(torch.float64)
    bound = float(w.abs().sum(1).max()) * step * cm.bounds[relu_in] + 1e-3
    err = float((got - sim).abs().max())
    print(f"[precision] relu='lut' logits vs simulation: {err:.2e} (one-step bound {bound:.2e})")
    assert err <= bound
    plain = cm.plaintext(x).to(torch.float64)
    assert float((sim - plain).abs().max()) <= 2 * float(w.abs().sum(1).max()) * step * cm.bounds[relu_in]


@pytest.mark.parametrize("act,lipschitz", [(nn.SiLU(), 1.1), (nn.GELU(), 1.13), (nn.Tanh(), 1.0)])
def test_activation_layers_run_as_lookup_tables(seed, act, lipschitz):
    """conv -> act -> global average -> linear, the direct form: within one grid step (times the
    activation's Lipschitz constant) of the simulation, which quantises the same way."""
    model = nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), act, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, torch.randn(32, 1, 8, 8), preset=TOY, lut_form="direct")  # (no ReLU here)
        assert [s.op for s in cm.plan.steps if s.kind == "act"] == [type(act).__name__.lower()]
        cm.keygen()
    x = torch.randn(1, 1, 8, 8)
    got, sim = cm.decrypt(cm(cm.encrypt(x))), cm.simulate(x)
    bits = cm.lut.grid_bits(TOY)
    lo, hi = grid_interval(bits)
    step = (hi - lo) / ((1 << bits) - 1)
    act_in = next(l.inputs[0] for l in cm.layers if l.kind == "act")
    w = model[4].weight.detach().to(torch.float64)
    bound = float(w.abs().sum(1).max()) * lipschitz * step * cm.bounds[act_in] + 1e-3
    err = float((got - sim).abs().max())
    print(f"[precision] {type(act).__name__} by LUT, logits vs simulation: {err:.2e} (one-step bound {bound:.2e})")
    assert err <= bound
    plain = cm.plaintext(x).to(torch.float64)  # the simulation is the model up to the grid
    assert float((sim - plain).abs().max()) <= bound


def test_activations_need_a_bootstrappable_preset():
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 4), nn.Sigmoid()).eval()
    with pytest.raises(fhe.ParameterError, match="sigmoid run as TFHE lookup tables"):
        fhe.nn.compile(model, torch.randn(8, 1, 4, 4), preset="toy-n12")
    with pytest.raises(fhe.ParameterError, match="tfhe-8bit"):
        fhe.nn.compile(model, torch.randn(8, 1, 4, 4), preset=TOY, relu=LUTReLU(bits=12))


def _two_relus():
    """conv -> ReLU (module "1") -> conv -> ReLU ("3") -> global average -> linear."""
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 1, 1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()


def _compile(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.nn.compile(model, torch.randn(32, 1, 8, 8), preset=TOY, **kw)


def test_per_layer_relu_choice(seed):
    """relu={layer: option}: that ReLU through the switch (the product form, the default), the other
    a degree-7 polynomial; the plan, the simulation and the encrypted run follow the choice per
    layer. The product's error (|d| where the step takes the other neighbour, d within a factor
    step of 0) is within the one-step bound of the direct form's grid."""
    model = _two_relus()
    cm = _compile(model, relu={"3": "lut", "default": 7})
    first, second = (s for s in cm.plan.steps if s.kind == "relu")
    cfg = fhe.ckks.bootstrap_config(TOY)
    assert isinstance(second.relu, LUTReLU) and second.form == "product" and second.levels == 1
    assert second.level_out == min(second.level_in, cfg.stc_input_level) - 1
    assert not isinstance(first.relu, LUTReLU) and first.levels == 3 and first.form is None  # degree 7: 3 levels
    assert "relu (lut, product)" in str(cm.plan) and "relu x1" in cm.report()
    sims = {type(m).__name__ for m in cm._sim.modules()}
    assert {"PolyReLU", "LUTReLUSim"} <= sims
    cm.keygen()
    x = torch.randn(1, 1, 8, 8)
    got, sim = cm.decrypt(cm(cm.encrypt(x))), cm.simulate(x)
    bits = cm.lut_bits
    lo, hi = grid_interval(bits)
    step = (hi - lo) / ((1 << bits) - 1)
    w = model[6].weight.detach().to(torch.float64)
    bound = float(w.abs().sum(1).max()) * step * cm.bounds[second.name] + 1e-3
    err = float((got - sim).abs().max())
    print(f"[precision] per-layer relu (poly, lut), logits vs simulation: {err:.2e} (one-step bound {bound:.2e})")
    assert err <= bound


def _strided():
    """conv -> ReLU ("_1": 4 x 8 x 8, period 256, the model's slots) -> stride-2 conv -> ReLU ("_3": 4 x 4 x 4 at
    gap 2, period 64) -> conv (its rotations read across the 64-slot copies)."""
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 2, 1), nn.ReLU(),
                         nn.Conv2d(4, 4, 3, 1, 1)).eval()


def test_switch_converts_one_period_of_the_layout(seed, monkeypatch):
    """A switch converts one period of its input's layout, not all the model's slots (the others hold
    copies): 256 then 64 values here, counted in the plan report; its result repeats every 64 slots
    again (rotation keys 64 and 128 at the switch's output level) for the last conv, which reads
    across the copies. The encrypted map follows simulate() within CKKS noise and the product
    form's flips near 0, as with every slot converted; a period of 32 (half the values lost) is
    off by 15-60 % of the values (measured), far outside the bound."""
    cm = _compile(_strided(), relu="lut")
    prog = cm.program()
    assert prog.slots == 256 and prog.switch_values == {"_1": 256, "_3": 64}
    assert "320 PBS per input" in cm.report()
    out = fhe.ckks.bootstrap_config(TOY).stc_input_level
    assert prog.rotations()[64] >= out and prog.rotations()[128] >= out
    cm.keygen()
    converted = []
    cls = type(cm.ctx.switcher)
    real = cls.lut

    def spy(self, ct, *a, **kw):
        converted.append(ct.slots)
        return real(self, ct, *a, **kw)

    monkeypatch.setattr(cls, "lut", spy)
    x = torch.randn(1, 1, 8, 8)
    sim = cm.simulate(x)
    bound = 0.02 * float(sim.abs().max()) + 1e-4
    got = cm.decrypt(cm(cm.encrypt(x))).reshape(sim.shape)
    assert converted == [256, 64]
    prog = cm.program()  # keygen made a new one
    prog.switch_values = {k: prog.slots for k in prog.switch_values}  # every slot converted, as before
    whole = cm.decrypt(cm(cm.encrypt(x))).reshape(sim.shape)
    assert converted == [256, 64, 256, 256]
    err, err_whole = float((got - sim).abs().max()), float((whole - sim).abs().max())
    print(f"[precision] strided relu='lut', map vs simulation: one period {err:.2e}, every slot {err_whole:.2e} "
          f"(bound {bound:.2e})")
    assert err <= bound and err_whole <= bound
    cm(cm.encrypt(x), timing=True)  # the breakdown: the switches' phases, inside the ReLUs' time
    phases = prog.switch_times
    assert set(phases) == {"to_lwe", "pbs", "to_ckks"} and min(phases.values()) > 0
    assert sum(phases.values()) <= prog.times["relu"] and cm.ctx.switcher.phase_times is None


def test_auto_relu_weighs_latency(monkeypatch):
    """relu="auto": each ReLU the faster of the composite polynomial and the lookup table by the
    latency model; a cheap switch makes every ReLU a LUT, a dear one none."""
    from fhetorch.nn import lut as _lut

    monkeypatch.setattr(_lut, "LUT_FIXED_S", 1e-6)
    monkeypatch.setattr(_lut, "LUT_PER_SLOT_S", 1e-9)
    cm = _compile(_two_relus(), relu="auto")
    assert all(isinstance(s.relu, LUTReLU) for s in cm.plan.steps if s.kind == "relu") and cm.uses_lut
    monkeypatch.setattr(_lut, "LUT_FIXED_S", 10.0)
    cm = _compile(_two_relus(), relu="auto")
    assert not any(isinstance(s.relu, LUTReLU) for s in cm.plan.steps if s.kind == "relu") and not cm.uses_lut


def test_relu_choice_errors():
    with pytest.raises(fhe.ApproximationError, match="no ReLU layers"):
        _compile(_two_relus(), relu={"2": "lut"})  # "2" is a convolution
    with pytest.raises(fhe.ApproximationError, match="one switch"):
        _compile(_two_relus(), relu={"1": LUTReLU(bits=3), "3": LUTReLU(bits=4)})
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        fhe.nn.compile(_two_relus(), torch.randn(8, 1, 8, 8), preset="toy-n12", relu={"3": "lut", "default": 7})


# --- the product forms (lut_form="product", the default) ----------------------------------------
FACTOR_LIPSCHITZ = {"gelu": 0.399, "silu": 0.25, "hardswish": 1 / 6}  # max |g'| of g = fn / x


def _factor_step(bits):
    lo, hi = FACTOR_INTERVAL
    return (hi - lo) / ((1 << bits) - 1)


def _near_zero_and_anywhere(bits, n=4000):
    """Values of x / B in [-1, 1]: uniform, and within two factor-grid steps of 0 (the step's edge)."""
    step = _factor_step(bits)
    return torch.cat([torch.rand(n, dtype=torch.float64) * 2 - 1, (torch.rand(n, dtype=torch.float64) * 4 - 2) * step])


@pytest.mark.parametrize("bits", [3, 4, 6, 8])
def test_product_relu_is_exact_away_from_zero_and_within_x_near_it(seed, bits):
    """x [p > 0], p the factor grid's point nearest x / B: relu itself (0 is no grid point). The
    switch may round an input near a midpoint to either neighbour: with the noisy point, the error
    is 0 beyond a grid step of 0 and at most |x| within it (the direct form is off by up to half a
    step everywhere)."""
    B, step = 2.5, _factor_step(bits)
    y = _near_zero_and_anywhere(bits)
    sim = LUTReLUSim(bits, B, "r", "product")
    assert torch.equal(sim(y * B), torch.relu(y * B))
    noisy = y + (torch.rand_like(y) - 0.5) * step  # any neighbour of the nearest point
    got = y * B * factor(torch.relu)(LUTReLU.quantise(noisy, bits, FACTOR_INTERVAL))
    err = (got - torch.relu(y * B)).abs()
    near = y.abs() < step
    assert float(err[~near].max()) == 0.0
    assert bool((err[near] <= y[near].abs() * B).all())
    direct = (LUTReLUSim(bits, B, "r", "direct")(y * B) - torch.relu(y * B)).abs()
    assert float(direct.max()) > 0.25 * step * B  # the direct form's grid error, which the product removes


@pytest.mark.parametrize("act", [nn.GELU(), nn.SiLU(), nn.Hardswish(), nn.GELU(approximate="tanh")])
def test_product_activation_error_bound(seed, act):
    """x g(B p): |error| <= |x| max|g'| B step / 2 (the factor's grid error times x), smaller than the
    direct form's slope x B step / 2 near 0 and at large |x|; exact at x = 0."""
    bits, B = 4, 3.0
    step = _factor_step(bits)
    y = _near_zero_and_anywhere(bits)
    x = y * B
    want = act(x)
    got = LUTActSim(act, bits, B, "a", "product")(x)
    op = type(act).__name__.lower()
    bound = x.abs() * FACTOR_LIPSCHITZ[op] * B * step / 2 + 1e-12
    assert bool(((got - want).abs() <= bound).all()), float(((got - want).abs() - bound).max())
    assert float(LUTActSim(act, bits, B, "a", "product")(torch.zeros(3, dtype=torch.float64)).abs().max()) == 0.0
    direct = (LUTActSim(act, bits, B, "a", "direct")(x) - want).abs()
    print(f"[precision] {act} 4-bit grid: product form max error {float((got - want).abs().max()):.3e}, "
          f"direct {float(direct.max()):.3e}")
    assert float((got - want).abs().max()) < float(direct.max())


def _units(act):
    """conv -> ReLU (module "1") -> conv -> act ("3") -> global average -> linear."""
    return nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 1, 1), act,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()


def test_product_form_plan_levels():
    """Each product-form layer's result one level below the lower of its input and the switch's
    output (an act layer two at equal levels); the direct form's at the switch's output level.
    Deeper chains bootstrap where the product's levels run out; the plan says each layer's form."""
    cfg = fhe.ckks.bootstrap_config(TOY)
    lf = cfg.stc_input_level
    cms = {f: _compile(_units(nn.GELU()), relu="lut", lut_form=f) for f in ("product", "direct")}
    for form, cm in cms.items():
        for s in (s for s in cm.plan.steps if s.kind in ("relu", "act")):
            assert s.form == form
            want = lf if form == "direct" else min(s.level_in, lf) - 1 - (s.kind == "act" and s.level_in == lf)
            assert s.level_out == want, s
    assert "relu (lut, product)" in str(cms["product"].plan) and "gelu (product)" in str(cms["product"].plan)
    assert "relu (lut)" in str(cms["direct"].plan) and "2 in the product form" in cms["product"].report()
    assert plan_module.lut_level("act", "product", lf, lf) == lf - 2
    assert plan_module.lut_level("relu", "product", lf, lf) == lf - 1
    deep = nn.Sequential(*[m for _ in range(5) for m in (nn.Conv2d(2, 2, 3, 1, 1), nn.GELU())], nn.Flatten()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        plans = {f: fhe.nn.compile(deep, torch.randn(16, 2, 4, 4), preset=TOY, lut_form=f).plan for f in ("product", "direct")}
    assert plans["direct"].bootstraps == 0 and plans["product"].bootstraps >= 1
    level = plans["product"].top
    for s in plans["product"].steps[1:]:  # replay: every input has the levels its layer needs
        lin = cfg.user_levels if s.bootstraps else level
        assert s.level_in == lin and lin >= (cfg.stc_levels + 1 if s.kind == "act" else 1), s
        level = s.level_out
        want = lin - s.levels if s.kind == "linear" else min(lin, lf) - 1 - (lin == lf)
        assert level == want and s.levels == (1 + (lin == lf) if s.kind == "act" else s.levels), s


def test_lut_form_errors():
    with pytest.raises(fhe.ApproximationError, match="lut_form must be one of"):
        _compile(_two_relus(), relu="lut", lut_form="exact")
    with pytest.raises(fhe.ApproximationError, match="no lookup-table layers"):
        _compile(_two_relus(), relu="lut", lut_form={"2": "direct"})  # "2" is a convolution
    with pytest.raises(fhe.ApproximationError, match="no product form"):
        _compile(_units(nn.Sigmoid()), relu="lut", lut_form={"3": "product"})
    cm = _compile(_units(nn.Sigmoid()), relu="lut")  # the default: product where there is one
    assert [cm.lut_form(s.name) for s in cm.plan.steps if s.kind in ("relu", "act")] == ["product", "direct"]
    cm = _compile(_units(nn.SiLU()), relu="lut", lut_form={"3": "direct"})  # by module path
    assert [cm.lut_form(s.name) for s in cm.plan.steps if s.kind in ("relu", "act")] == ["product", "direct"]
    assert cm.lut_form(cm.layers[1].name) is None  # a convolution


class _ReluGelu(nn.Module):
    """gelu(x) + gelu(relu(x)) on vectors: the first GELU reads x at the top level (x drops to the
    factor's level), the second reads the ReLU's product below the switch's output level (the
    factor drops); the bound ratio B_x / B_out != 1 rides on the dropped operand in both."""

    def __init__(self):
        super().__init__()
        self.g1, self.relu, self.g2 = nn.GELU(), nn.ReLU(), nn.GELU()

    def forward(self, x):
        return self.g1(x) + self.g2(self.relu(x))


def test_product_forms_encrypted_match_simulation(seed):
    """ReLU by LUT and GELU in the product form, encrypted, on inputs x = B_x p with p points of
    the factor's grid (far from its midpoints, where the switch may take either neighbour; a
    ReLU's 0 output is a midpoint, times 0): simulate() is the plaintext model exactly, and the
    encrypted result follows it within CKKS noise (a wrong factor or bound ratio would be off by
    a sizeable part of the values)."""
    cm = _compile_vec(_ReluGelu().eval(), relu="lut")
    steps = {s.op: s for s in cm.plan.steps if s.form is not None and s.op != "gelu"}
    g1, g2 = (s for s in cm.plan.steps if s.op == "gelu")
    lf = fhe.ckks.bootstrap_config(TOY).stc_input_level
    assert steps["relu"].form == g1.form == g2.form == "product"
    assert g1.level_in > lf > g2.level_in  # x dropped for g1; the factor for g2
    b_x, b_out = cm.bounds[cm.layers[0].name], cm.bounds[cm.layers[-1].name]
    assert b_out != b_x and cm.bounds[g1.name] == b_out  # a bound ratio to carry
    cm.keygen()
    bits = cm.lut_bits
    g = 1 << bits
    p = (2 * torch.randint(0, g, (1, 16)) - (g - 1)).to(torch.float64) / (g - 1)  # factor grid points
    x = (p * b_x).clamp(-3, 1)  # the calibrated range
    x = LUTReLU.quantise(x / b_x, bits, FACTOR_INTERVAL) * b_x
    got, sim = cm.decrypt(cm(cm.encrypt(x))), cm.simulate(x)
    plain = cm.plaintext(x).to(torch.float64)
    assert cm.last_ranges.ok and float((sim - plain).abs().max()) <= 1e-6
    err = float((got - sim).abs().max())
    print(f"[precision] ReLU and GELU in the product form, encrypted vs simulation: {err:.2e} (values up to "
          f"{float(plain.abs().max()):.2f})")
    assert err <= 2e-3 * b_out


def _compile_vec(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.nn.compile(model, torch.rand(64, 16) * 4 - 3, preset=TOY, **kw)


def test_sharpen_keeps_the_sign_and_steepens_zero(seed):
    """The product form's step is taken of sharpen(y): an odd, increasing polynomial with +-1 fixed
    (so [sharpen(y) > 0] = [y > 0], on fresh random y, beyond [-1, 1] too up to 1.5) and slope 35/16 a
    stage at 0 (what divides the switch's noise near 0)."""
    y = torch.empty(4096, dtype=torch.float64).uniform_(-1.5, 1.5)
    for k in (1, 2):
        s = sharpen(y, k)
        assert torch.equal(s > 0, y > 0) and torch.equal(s < 0, y < 0)
        assert float(s[y.abs() <= 1].abs().max()) <= 1 + 1e-12
        h = 1e-6
        slope = float((sharpen(torch.tensor([h], dtype=torch.float64), k) / h)[0])
        assert abs(slope - SHARPEN_SLOPE ** k) < 1e-6 * SHARPEN_SLOPE ** k
    t = torch.linspace(-1, 1, 201, dtype=torch.float64)
    assert bool((SHARPEN(t)[1:] >= SHARPEN(t)[:-1]).all()) and torch.allclose(SHARPEN(-t), -SHARPEN(t))
    assert abs(float(SHARPEN(torch.tensor([1.0], dtype=torch.float64))[0]) - 1) < 1e-12


def test_sharpen_stages_and_plan_levels():
    """LUTReLU.sharpen: by default as many stages as a bootstrap's levels leave room for (toy-n13-bts:
    one, n16-bts40: two); the plan gives each product-form LUT ReLU's input the switch's levels and
    SHARPEN_LEVELS a stage; sharpen=0 none, the direct form none; too many stages raise."""
    toy, big = fhe.ckks.bootstrap_config(TOY), fhe.ckks.bootstrap_config("n16-bts40")
    assert LUTReLU().sharpen_stages(toy) == 1 and LUTReLU().sharpen_stages(big) == 2
    assert LUTReLU(sharpen=0).sharpen_stages(big) == 0
    with pytest.raises(fhe.ParameterError, match="sharpen=0..1"):
        LUTReLU(sharpen=2).sharpen_stages(toy)
    need = LUTReLU.levels_in(toy)
    for relu, form, stages in ((LUTReLU(), "product", 1), (LUTReLU(sharpen=0), "product", 0),
                               (LUTReLU(), "direct", 0)):
        cm = _compile(_two_relus(), relu=relu, lut_form=form)
        assert cm.lut_sharpen == (1 if relu.sharpen is None else 0)
        steps = [s for s in cm.plan.steps if s.kind == "relu"]
        assert steps and all(s.level_in >= need + SHARPEN_LEVELS * stages for s in steps), steps
    # a deep chain: without the sharpening's levels some ReLU input would sit below them (the plan
    # bootstraps or keeps levels for them instead)
    deep = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(2, 2, 3, 1, 1), nn.ReLU())], nn.Flatten()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        plans = {k: fhe.nn.compile(deep, torch.randn(16, 2, 4, 4), preset=TOY, relu=LUTReLU(sharpen=k)).plan
                 for k in (0, 1)}
    assert any(s.level_in < need + SHARPEN_LEVELS for s in plans[0].steps if s.kind == "relu")
    assert all(s.level_in >= need + SHARPEN_LEVELS for s in plans[1].steps if s.kind == "relu")


def test_sharpened_and_plain_steps_encrypted_agree(seed):
    """relu="lut" in the product form with and without sharpening, encrypted on inputs away from 0
    (where the switch's noise cannot flip a step): the same result within CKKS noise, and both equal
    to simulate(), which is the plaintext model there."""
    torch.manual_seed(seed)
    model = _two_relus()
    x = torch.randn(1, 1, 8, 8)
    outs = {}
    for k in (0, 1):
        cm = _compile(model, relu=LUTReLU(sharpen=k))
        assert cm.lut_sharpen == k
        cm.keygen()
        got, sim = cm.decrypt(cm(cm.encrypt(x))), cm.simulate(x)
        outs[k] = got
        scale = float(sim.abs().max()) + 1
        assert float((got - sim).abs().max()) <= 0.05 * scale, (k, float((got - sim).abs().max()))
    assert float((outs[0] - outs[1]).abs().max()) <= 0.05 * (float(outs[0].abs().max()) + 1)
