"""CPU smoke tests of the secure N = 2^16 presets: keys, encrypt, one multiply, one rotation."""
import math
import time
import warnings

import pytest
import torch

import fhetorch as fhe

# max-abs-error bounds after one multiplication and one rotation (measured in the comments: each rescale of a dense-secret N = 2^16 ciphertext adds
# ~1.4e-7 at scale 2^40, so these are ~2^-21 and ~2^-16)
BOUND = {"n16-rr40": 5e-6,  # 5.4e-7
         "n16-rr35": 1.5e-4}  # 1.3e-5

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["n16-rr40", "n16-rr35"])
def n16(request):
    """(context with relinearisation and rotation-by-1 keys, seconds for context + keygen); one preset at a time."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fhe.InsecureParametersWarning)  # secure presets do not warn
        ctx = fhe.ckks.Context(request.param, "cpu")
    ctx.keygen(rotations=[1], power_of_two_rotations=False, conjugation=False)
    yield ctx, time.perf_counter() - t0


def _logq(ctx, level):
    return sum(math.log2(ctx.params.primes[i]) for i in ctx.params.limbs(level))


def test_secure_preset_smoke(n16, assert_close):
    ctx, t_keys = n16
    preset = ctx.params.name
    t0 = time.perf_counter()
    info = fhe.ckks.presets()[preset]
    assert ctx.n == 2**16 and ctx.slots == 2**15 and info.security_bits == 128
    assert ctx.max_level == info.levels >= 30
    assert ctx.params.hamming_weight is None  # dense ternary secret
    assert len(ctx.galois_keys) == 1 and ctx.relin_key is not None

    x = torch.rand(ctx.slots, dtype=torch.float64) * 2 - 1
    y = torch.rand(ctx.slots, dtype=torch.float64) * 2 - 1
    ex, ey = ctx.encrypt(x), ctx.encrypt(y)
    assert abs(math.log2(ex.scale) - info.scale_bits) < 0.2
    ez = (ex * ey).rotate(1)
    assert ez.level == ctx.max_level - 1
    z = ctx.decrypt(ez)
    t_ops = time.perf_counter() - t0
    print(f"[timing] {preset}: context + keygen {t_keys:.1f} s, encrypt/multiply/rotate/decrypt {t_ops:.1f} s")
    assert_close(z, torch.roll(x * y, -1), BOUND[preset], f"{preset} multiply + rotate")


def test_decrypt_at_top_level(n16, assert_close):
    ctx, _ = n16
    x = torch.rand(64, dtype=torch.float64)
    assert _logq(ctx, ctx.max_level) > 1100
    assert_close(ctx.decrypt(ctx.encrypt(x)), x, BOUND[ctx.params.name], "decrypt at the top level")
