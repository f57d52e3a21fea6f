"""The encrypted argmax head (nn.compile(..., argmax=True), fhetorch/nn/argmax.py): pairwise
comparisons of the logits by one lookup table, win counts by a slot map, [wins = K - 1] by a
second table on an integer grid, the class to slot 0.

Where the top logit leads every other by more than one grid step (2 B / m in logit units), every
comparison with it is exact whatever the CKKS and PBS noise, so the class is the plaintext
argmax; closer logits may tie (the lower index wins on the grid) or form a cycle (-1)."""
import warnings

import pytest
import torch
import torch.nn as nn

import fhetorch as fhe
from fhetorch.errors import UnsupportedLayerError
from fhetorch.nn.argmax import head_maps, pairs, simulate_argmax
from fhetorch.nn.lut import LUTReLU, grid_interval

TOY = "toy-n13-bts"


def _compile(model, calib, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.nn.compile(model.eval(), calib, preset=TOY, **kw)


def _step(bits):
    lo, hi = grid_interval(bits)
    return (hi - lo) / ((1 << bits) - 1)


def _clear_margin(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Rows of z / B whose top value leads the rest by more than 2 grid steps (in d = dz / 2 units: 1)."""
    top = z.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]) / 2 > _step(bits)


def test_head_maps_count_wins():
    k, n = 5, 16
    diff, wins, out = head_maps(n, k)
    z = torch.zeros(n, dtype=torch.float64)
    z[:k] = torch.randn(k, dtype=torch.float64)
    d = diff.dense_apply(z)
    assert torch.allclose(d[: len(pairs(k))], torch.tensor([(z[i] - z[j]) / 2 for i, j in pairs(k)], dtype=torch.float64))
    w = wins.dense_apply((d >= 0).to(torch.float64))
    assert torch.equal(w[:k], (z[:k].view(-1, 1) > z[:k].view(1, -1)).sum(1).to(torch.float64))
    h = torch.zeros(n, dtype=torch.float64)
    h[3] = 1
    assert out.dense_apply(h)[:2].tolist() == [3.0, 1.0]


def test_simulated_head_is_argmax_with_a_margin_and_flags_cycles(seed):
    bits = 4
    z = torch.rand(2000, 7, dtype=torch.float64) * 1.6 - 0.8
    cls = simulate_argmax(z, bits)
    ok = _clear_margin(z, bits)
    assert ok.sum() > 100 and torch.equal(cls[ok], z[ok].argmax(-1))
    assert bool(((cls == -1) | (cls == z.argmax(-1)) | ~ok).all())
    h = _step(bits)  # a cycle: 0 ties 1, 1 ties 2 (within half a step), 2 beats 0 by more
    cyc = torch.tensor([[0.0, 0.75 * h, 1.5 * h]], dtype=torch.float64)
    assert simulate_argmax(cyc, bits).tolist() == [-1]
    tie = torch.tensor([[0.3, 0.3 + 0.5 * h, -0.5]], dtype=torch.float64)  # within half a step: the lower index
    assert simulate_argmax(tie, bits).tolist() == [0]


def test_encrypted_head_gives_the_class(seed):
    model = nn.Sequential(nn.Linear(6, 5))
    cm = _compile(model, torch.randn(64, 6), argmax=True)
    cm.keygen()
    b = cm.bounds[cm.layers[-1].name]
    done = 0
    for _ in range(20):
        x = torch.randn(1, 6)
        z = cm.plaintext(x).to(torch.float64)
        if not bool(_clear_margin(z / b, cm.lut_bits)[0]):
            continue
        got = cm.decrypt(cm(cm.encrypt(x)))
        assert got.dtype == torch.int64 and got.tolist() == z.argmax(1).tolist() == cm.simulate(x).tolist()
        done += 1
        if done == 2:
            break
    assert done == 2


def test_head_errors():
    with pytest.raises(UnsupportedLayerError, match="vector of logits"):
        _compile(nn.Sequential(nn.Conv2d(1, 2, 3)), torch.randn(4, 1, 6, 6), argmax=True)
    with pytest.raises(UnsupportedLayerError, match="classes"):
        _compile(nn.Sequential(nn.Linear(4, 12)), torch.randn(8, 4), argmax=True, relu=LUTReLU(bits=3))
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        fhe.nn.compile(nn.Sequential(nn.Linear(4, 3)), torch.randn(8, 4), preset="toy-n12", argmax=True)
