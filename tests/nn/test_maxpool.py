"""Max pooling by lookup tables (fhetorch/nn/maxpool.py): a tournament of max(a, b) =
b + 2 relu((a - b) / 2) (the direct form), each ReLU through CKKS <-> TFHE switching, or
b + (a - b) [a > b] (the product form, the default), the step through the switch.

The product form is exact but where a and b are within the switch's noise of each other. The
direct form: on x / B (B the input's bound), the grid of the LUT ReLU has points j / m (m = 2^bits / 2 - 1).
Inputs on multiples of 2 / m make every comparison's (a - b) / 2 a grid point, so the quantised
tournament is exact: simulate() equals torch's max pooling, and the encrypted run equals it
within CKKS noise (a comparison that took a wrong grid point would be off by 2 / m x B, a wrong
window entry by far more). Other inputs: each wave adds at most one grid step (x B)."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fhetorch as fhe
from fhetorch.errors import UnsupportedLayerError
from fhetorch.nn.lut import grid_interval
from fhetorch.nn.maxpool import tournament, windows

TOY = "toy-n13-bts"


def _compile(model, calib, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.nn.compile(model.eval(), calib, preset=TOY, **kw)


def _on_grid(cm, shape, gen=None):
    """Inputs B (2 / m) j, j integers in [-m / 2, m / 2): every comparison lands on the grid."""
    m = (1 << cm.lut_bits) // 2 - 1
    b = cm.bounds[cm.layers[0].name]
    return torch.randint(-(m // 2), m // 2, shape, generator=gen).to(torch.float64) * (2 * b / m)


def test_tournament_and_windows():
    assert tournament(4) == [[(0, 1), (2, 3)], [(0, 1)]]
    assert [len(w) for w in tournament(9)] == [4, 2, 1, 1]  # ceil(log2 9) waves, 8 comparisons
    assert sum(len(w) for w in tournament(9)) == 8 and tournament(1) == []
    idx = windows((2, 4, 4), (2, 2, 2), (3, 3), (2, 2), (1, 1), (1, 1))
    assert idx.shape == (2, 2, 2, 9)
    # the top-left window covers rows/cols -1..1: 4 inputs, filled up with the first (index 0)
    assert idx[0, 0, 0].tolist() == [0, 1, 4, 5, 0, 0, 0, 0, 0]
    assert idx[1, 1, 1].tolist() == [16 + 5, 16 + 6, 16 + 7, 16 + 9, 16 + 10, 16 + 11, 16 + 13, 16 + 14, 16 + 15]


@pytest.mark.parametrize("pool", [nn.MaxPool2d(2), nn.MaxPool2d(3, 2, 1), nn.MaxPool2d((2, 3), (1, 2)),
                                  nn.MaxPool2d(3, 2, 1, ceil_mode=True), nn.MaxPool2d(2, 1, dilation=2)])
@pytest.mark.parametrize("form", ["direct", "product"])
def test_simulation_is_torch_max_pooling_on_the_grid(seed, pool, form):
    model = nn.Sequential(nn.Conv2d(1, 3, 3, 1, 1), pool, nn.Flatten())
    cm = _compile(model, torch.randn(16, 1, 7, 7), relu="lut", lut_form=form)
    assert [l.kind for l in cm.layers].count("max") == 1
    # the simulation of the pooling alone, on inputs on the grid: exact
    sim = cm._sim.get_submodule("_fhe_relu_0")
    x = _on_grid(cm, (4, 3, 7, 7)) * sim.bound / cm.bounds[cm.layers[0].name]
    want = pool(x)
    assert float((sim(x) - want).abs().max()) <= 1e-12 * sim.bound  # float64 rounding only
    # anywhere in range: within one grid step per wave
    bits = cm.lut_bits
    lo, hi = grid_interval(bits)
    step = (hi - lo) / ((1 << bits) - 1)
    x = (torch.rand(4, 3, 7, 7, dtype=torch.float64) * 1.6 - 0.8) * sim.bound
    waves = len(tournament(cm.layers[2].tables + 1))
    err = float((sim(x) - pool(x)).abs().max())
    assert err <= (waves * step * sim.bound if form == "direct" else 0.0) + 1e-12, (err, waves, step)
    assert sim.outside == 0


def test_plan_costs_one_level_and_needs_the_switch():
    """The direct form: the maps' level; the product form one more per wave (2 for a 2 x 2 window),
    each wave's differences at the switch's levels."""
    model = nn.Sequential(nn.Conv2d(1, 2, 3, 1, 1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32, 3))
    cfg = fhe.ckks.bootstrap_config(TOY)
    for form, waves in (("direct", 0), ("product", 2)):
        cm = _compile(model, torch.randn(8, 1, 8, 8), lut_form=form)
        step = next(s for s in cm.plan.steps if s.kind == "max")
        assert step.form == form and step.levels == 1 + waves
        assert step.level_out == min(step.level_in - 1, cfg.stc_input_level) - waves
        assert step.level_in >= cfg.stc_levels + 2 + max(waves - 1, 0)
        assert "max_pool2d x1" in cm.report() and "3 tables" in cm.report()
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        fhe.nn.compile(model.eval(), torch.randn(8, 1, 8, 8), preset="toy-n12")


def test_unsupported_max_pooling_options():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AdaptiveMaxPool2d(1))
    with pytest.raises(UnsupportedLayerError, match="MaxPool2d"):
        _compile(model, torch.randn(4, 1, 8, 8))

    class Indices(nn.Module):
        def forward(self, x):
            return F.max_pool2d(x, 2, return_indices=True)[0]

    with pytest.raises(UnsupportedLayerError):
        _compile(Indices(), torch.randn(4, 1, 8, 8))


@pytest.mark.parametrize("pool,form", [(nn.MaxPool2d(2), "direct"), (nn.MaxPool2d(3, 2, 1), "product")])
def test_encrypted_max_pooling_is_exact_on_the_grid(seed, pool, form):
    """The pooling alone, on inputs whose comparisons land on grid points (ties included: the
    product form's e = 0 is a midpoint, either factor times 0): the encrypted result is torch's
    max pooling within CKKS noise (far below the 2 / m x B of one wrong comparison)."""
    model = nn.Sequential(pool)
    cm = _compile(model, torch.rand(8, 2, 6, 6) * 2 - 1, lut_form=form)
    cm.keygen()
    x = _on_grid(cm, (1, 2, 6, 6))
    got = cm.decrypt(cm(cm.encrypt(x))).reshape(pool(x).shape)
    want = pool(x)
    m = (1 << cm.lut_bits) // 2 - 1
    b = cm.bounds[cm.layers[0].name]
    err = float((got - want).abs().max())
    print(f"[precision] encrypted max pooling {pool}: max error {err:.2e} (one wrong comparison: {2 * b / m:.2e})")
    assert err <= 0.1 * (2 * b / m)
    assert float((cm.simulate(x).reshape(want.shape) - want).abs().max()) <= 1e-12 * b
