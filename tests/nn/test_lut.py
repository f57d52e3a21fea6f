"""Lookup tables in compiled models (fhetorch/nn/lut.py): relu="lut" (every ReLU through CKKS <->
TFHE switching) and activations without a polynomial form (GELU, SiLU, Sigmoid, Tanh, Hardswish).

The encrypted run quantises each ReLU input (divided by its bound B) to the grid of
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
from fhetorch.nn.lut import LUTReLU, grid_interval

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
        cm = fhe.nn.compile(_model(), torch.randn(32, 1, 8, 8), preset=TOY, relu="lut")
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
        cm = fhe.nn.compile(model, torch.randn(32, 1, 8, 8), preset=TOY, relu="lut")
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
    """conv -> act -> global average -> linear: within one grid step (times the activation's
    Lipschitz constant) of the simulation, which quantises the same way."""
    model = nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), act, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 3)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(model, torch.randn(32, 1, 8, 8), preset=TOY)  # the default polynomial ReLU: none here
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
    """relu={layer: option}: that ReLU through the switch, the other a degree-7 polynomial; the plan,
    the simulation and the encrypted run follow the choice per layer."""
    model = _two_relus()
    cm = _compile(model, relu={"3": "lut", "default": 7})
    first, second = (s for s in cm.plan.steps if s.kind == "relu")
    cfg = fhe.ckks.bootstrap_config(TOY)
    assert isinstance(second.relu, LUTReLU) and second.level_out == cfg.stc_input_level and second.levels == 0
    assert not isinstance(first.relu, LUTReLU) and first.levels == 3  # degree 7: 3 levels
    assert "relu (lut)" in str(cm.plan) and "relu x1" in cm.report()
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
