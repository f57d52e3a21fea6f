"""Key generation: dense and sparse ternary secrets, key-switching keys at every level."""
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev
from fhetorch._ckks.context import CKKSContext
from fhetorch._ckks.params import make_params


def _secret_coeffs(ctx):
    s = ctx.secret_key.s
    return torch.tensor(ctx.ring.to_integers(s, ctx.ring.basis()).astype("int64"))


def test_dense_ternary_secret(ctx_n10):
    c = _secret_coeffs(ctx_n10)
    assert set(c.unique().tolist()) <= {-1, 0, 1}
    # uniform ternary: about a third of each value (5 sigma at N = 1024)
    for v in (-1, 0, 1):
        assert abs((c == v).sum().item() - ctx_n10.n / 3) < 5 * (ctx_n10.n * 2 / 9) ** 0.5


@pytest.mark.parametrize("h", [32, 192])
def test_sparse_secret_with_hamming_weight(h, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        params = make_params(10, chain="rr35", levels=4, dnum=2, hamming_weight=h, allow_insecure=True)
        ctx = CKKSContext(params, device).keygen(rotations=[3], power_of_two_rotations=False)
    c = _secret_coeffs(ctx)
    assert (c != 0).sum().item() == h and set(c.unique().tolist()) <= {-1, 0, 1}
    x = torch.rand(ctx.slots, dtype=torch.float64, device=device) * 2 - 1
    cx = ctx.encrypt_vector(x)
    z = ctx.decrypt_vector(ev.rotate(ctx, ev.mul(ctx, cx, cx), 3)).real
    assert (z - torch.roll(x * x, -3)).abs().max().item() < 1e-6


def test_sparse_secret_is_not_secure():
    with pytest.raises(fhe.ParameterError, match="sparse"):
        make_params(16, chain="rr40", levels=4, hamming_weight=192)


def test_switching_keys_serve_every_level(ctx_n12):
    """One key mod P*Q_max relinearises and rotates at every level of the chain."""
    x = torch.rand(ctx_n12.slots, dtype=torch.float64) * 2 - 1
    cx = ctx_n12.encrypt_vector(x)
    for level in range(ctx_n12.max_level, 0, -3):
        c = ev.drop_level(ctx_n12, cx, cx.level - level)
        r = ev.rotate(ctx_n12, ev.mul(ctx_n12, c, c), 5)
        assert r.level == level - 1
        assert (ctx_n12.decrypt_vector(r).real - torch.roll(x * x, -5)).abs().max().item() < 1e-6
