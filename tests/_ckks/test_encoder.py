"""Canonical embedding: round trips, sparse packing, the ring structure behind slots, bad input."""
import math

import numpy as np
import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import Encoder, galois_element

SCALE = 2.0**40


def _values(n, complex_, device):
    v = torch.rand(n, dtype=torch.float64, device=device) * 2 - 1
    if complex_:
        v = torch.complex(v, torch.rand(n, dtype=torch.float64, device=device) * 2 - 1)
    return v


def _roundtrip(enc, v, slots, scale=SCALE):
    c = enc.embed(v, slots, scale)
    assert c.dtype == torch.int64 and tuple(c.shape) == (enc.n,)
    return enc.unembed(c.to(torch.float64) / scale, slots)


@pytest.mark.parametrize("log_n", [10, 12])
@pytest.mark.parametrize("slots", ["full", 1, 8, 64])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_roundtrip(log_n, slots, complex_, device, assert_close):
    enc = Encoder(log_n)
    slots = enc.n // 2 if slots == "full" else slots
    v = _values(slots, complex_, device)
    got = _roundtrip(enc, v, slots)
    assert got.dtype == torch.complex128 and got.shape == (slots,)
    # rounding each of N coefficients by <= 1/2 moves a slot by <= N/2 / scale (worst case)
    assert_close(got, v.to(torch.complex128), enc.n / 2 / SCALE, f"encode/decode N=2^{log_n}, {slots} slots")


@pytest.mark.parametrize("slots", [4, 32, 256])
def test_sparse_packing_replicates(slots, device, assert_close):
    enc = Encoder(10)
    v = _values(slots, True, device)
    c = enc.embed(v, slots, SCALE)
    full = enc.unembed(c.to(torch.float64) / SCALE, enc.n // 2)
    assert_close(full, v.repeat(enc.n // 2 // slots), enc.n / 2 / SCALE, "sparse packing seen as full")


def test_real_values_have_real_slots(device, assert_close):
    enc = Encoder(12)
    v = _values(enc.n // 2, False, device)
    got = _roundtrip(enc, v, enc.n // 2)
    assert_close(got.imag, torch.zeros_like(v), enc.n / 2 / SCALE, "imaginary part of real input")


def _negacyclic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = len(a)
    full = np.convolve(a.astype(object), b.astype(object))  # exact big integers
    out = full[:n].copy()
    out[: n - 1] -= full[n:]
    return out.astype(np.float64)


def test_ring_product_is_slotwise_product(device, assert_close):
    enc = Encoder(10)
    scale = 2.0**24
    va, vb = _values(enc.n // 2, True, device), _values(enc.n // 2, True, device)
    a, b = enc.embed(va, enc.n // 2, scale), enc.embed(vb, enc.n // 2, scale)
    prod = _negacyclic(a.cpu().numpy(), b.cpu().numpy())
    got = enc.unembed(torch.tensor(prod, device=device) / scale**2, enc.n // 2)
    assert_close(got, va * vb, 2e-5, "negacyclic product vs slot product")


def _automorphism(c: torch.Tensor, g: int) -> torch.Tensor:
    """m(X) -> m(X^g) mod X^N + 1 on a coefficient vector."""
    n = c.numel()
    out = torch.zeros_like(c)
    for i in range(n):
        j = i * g % (2 * n)
        if j < n:
            out[j] += c[i]
        else:
            out[j - n] -= c[i]
    return out


@pytest.mark.parametrize("step", [1, 3, -1, 100])
def test_galois_element_rotates_slots_left(step, device, assert_close):
    enc = Encoder(10)
    slots = enc.n // 2
    v = _values(slots, True, device)
    c = enc.embed(v, slots, SCALE).cpu()
    g = galois_element(step, enc.n)
    got = enc.unembed(_automorphism(c, g).to(device, torch.float64) / SCALE, slots)
    assert_close(got, torch.roll(v, -step), enc.n / 2 / SCALE, f"X -> X^(5^{step}) is a left rotation by {step}")


def test_conjugation_automorphism(device, assert_close):
    enc = Encoder(10)
    v = _values(enc.n // 2, True, device)
    c = enc.embed(v, enc.n // 2, SCALE).cpu()
    got = enc.unembed(_automorphism(c, 2 * enc.n - 1).to(device, torch.float64) / SCALE, enc.n // 2)
    assert_close(got, v.conj(), enc.n / 2 / SCALE, "X -> X^-1 conjugates")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, complex(math.nan, 0), complex(0, math.inf)])
def test_non_finite_raises(bad, device, ctx_n10):
    enc = Encoder(10)
    v = _values(8, isinstance(bad, complex), device)
    v[3] = bad
    with pytest.raises(fhe.EncodingError, match="NaN or inf"):
        enc.embed(v, 8, SCALE)
    with pytest.raises(fhe.EncodingError):
        ctx_n10.encode(v)
    with pytest.raises(fhe.EncodingError):
        ctx_n10.encrypt_vector(v)


@pytest.mark.parametrize("slots", [0, 3, 12, 1024])
def test_bad_slot_count_raises(slots, device):
    enc = Encoder(10)  # 512 slots at most
    with pytest.raises(fhe.EncodingError):
        enc.embed(_values(max(slots, 1), False, device), slots, SCALE)


def test_value_count_must_match_slots(device):
    enc = Encoder(10)
    with pytest.raises(fhe.EncodingError):
        enc.embed(_values(7, False, device), 8, SCALE)


def test_overflow_raises(device):
    enc = Encoder(10)
    v = _values(8, False, device)
    v[0] = 1e30
    with pytest.raises(fhe.EncodingError, match="overflow"):
        enc.embed(v, 8, SCALE)


def test_context_encode_level_and_scale(ctx_n12, device):
    v = _values(16, False, device)
    pt = ctx_n12.encode(v, level=3)
    assert pt.level == 3 and pt.slots == 16
    assert pt.scale == ctx_n12.nominal_scale(3)
    assert tuple(pt.data.shape) == (len(ctx_n12.params.limbs(3)), ctx_n12.n)
    assert pt.data.dtype == torch.int32 and pt.data.device == device


@pytest.mark.parametrize("slots", [1, 16, 2048])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_encrypt_vector_roundtrip(slots, complex_, ctx_n12, device, assert_close):
    v = _values(slots, complex_, device)
    ct = ctx_n12.encrypt_vector(v)
    assert ct.slots == slots and ct.level == ctx_n12.max_level
    got = ctx_n12.decrypt_vector(ct)
    assert got.dtype == torch.complex128
    # toy-n12 fresh encryption reaches ~6e-10
    assert_close(got, v.to(torch.complex128), 5e-9, f"encrypt/decrypt {slots} slots")
