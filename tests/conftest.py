"""Shared fixtures of fhetorch's tests.

- `device`: torch.device from FHETORCH_TEST_DEVICE (default "cpu"); CUDA without a GPU skips.
- tests marked `cuda` are skipped where torch.cuda.is_available() is False.
- `ctx_n12`, `ctx_n10`: session-cached user contexts (fhetorch.ckks.Context) with keys, so
  key generation runs once per (preset, device); `make_context` builds (and caches) others.
  Tests must not add keys to the shared contexts: they make their own with `make_context`.
- torch's threads are capped at the CPUs the process may use (models/cpus.py).
- `seed`: a fresh seed for `random` and torch per test, for failure messages to print.
- `assert_close`: compares a decrypted result with the plaintext computation, asserting the
  max-abs-error bound the test states and printing the precision reached (`pytest -s`).
"""
from __future__ import annotations

import math
import os
import random
import warnings

import pytest
import torch

from fhetorch._ckks.context import normalize_device

import fhetorch as fhe
from models.cpus import limit_threads

limit_threads()  # no more torch threads than the CPUs this job may use (a CI job's quota)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def seed() -> int:
    s = int.from_bytes(os.urandom(4), "little")
    random.seed(s)
    torch.manual_seed(s)
    return s


@pytest.fixture(scope="session")
def device() -> torch.device:
    d = torch.device(os.environ.get("FHETORCH_TEST_DEVICE", "cpu"))
    if d.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("FHETORCH_TEST_DEVICE asks for CUDA but no GPU is present")
    return normalize_device(d)


# --- contexts ------------------------------------------------------------------------------
_CONTEXTS: dict = {}


def _make_context(preset: str, device, rotations=(), **keygen_kw):
    """A keyed fhetorch.ckks.Context, cached per (preset, device, keygen arguments)."""
    key = (preset, str(torch.device(device)), tuple(rotations), tuple(sorted(keygen_kw.items())))
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
            ctx = fhe.ckks.Context(preset, device)
        ctx.keygen(rotations=list(rotations), **keygen_kw)
        _CONTEXTS[key] = ctx
    return ctx


@pytest.fixture(scope="session")
def make_context(device):
    """make_context(preset, rotations=(), fresh=False, **keygen_kw) on the test device.

    fresh=True makes a new context (new keys) instead of the cached one."""

    def make(preset: str, rotations=(), *, fresh: bool = False, **keygen_kw):
        if fresh:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
                ctx = fhe.ckks.Context(preset, device)
            return ctx.keygen(rotations=list(rotations), **keygen_kw)
        return _make_context(preset, device, rotations, **keygen_kw)

    return make


@pytest.fixture(scope="session")
def ctx_n12(make_context):
    """toy-n12 (N = 2^12, 2048 slots, 10 levels, scale 2^40) with default keys plus steps 5, -3, 7."""
    return make_context("toy-n12", rotations=(5, -3, 7))


@pytest.fixture(scope="session")
def ctx_n10(make_context):
    """toy-n10 (N = 2^10, 512 slots, 8 levels, scale 2^35) with default keys plus steps 5, -3, 7."""
    return make_context("toy-n10", rotations=(5, -3, 7))


# --- precision -----------------------------------------------------------------------------
def max_abs_error(got, want) -> float:
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    if got.is_complex() or want.is_complex():
        got, want = got.to(torch.complex128), want.to(torch.complex128)
    else:
        got, want = got.to(torch.float64), want.to(torch.float64)
    return float((got.cpu() - want.cpu()).abs().max()) if got.numel() else 0.0


def log2_precision(got, want) -> float:
    """Bits of precision: -log2(max |got - want|) (inf when exact)."""
    e = max_abs_error(got, want)
    return math.inf if e == 0 else -math.log2(e)


def check_close(got, want, bound: float, what: str = "") -> float:
    """Assert max |got - want| <= bound (shapes equal, values finite); return the error."""
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert bool(torch.isfinite(torch.view_as_real(got.to(torch.complex128))).all()), f"{what}: non-finite result"
    err = max_abs_error(got, want)
    bits = log2_precision(got, want)
    print(f"[precision] {what}: max|err| = {err:.3e} ({bits:.1f} bits), bound {bound:.1e}")
    assert err <= bound, f"{what}: max|err| = {err:.3e} ({bits:.1f} bits) exceeds the stated bound {bound:.1e}"
    return err


@pytest.fixture(scope="session")
def assert_close():
    """assert_close(got, want, bound, what="") -> max abs error (asserts <= bound)."""
    return check_close


@pytest.fixture(scope="session")
def precision_bits():
    """precision_bits(got, want) -> -log2(max abs error)."""
    return log2_precision
