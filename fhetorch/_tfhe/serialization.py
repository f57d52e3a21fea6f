"""TFHE content of fhetorch.save / fhetorch.load files and of pickles: parameters, contexts
(the evaluation keys; the secret keys only when asked for by name) and LWETensors, as plain
data and int32 tensors (a Fourier bootstrapping key: its complex128 values' bits viewed as int32), every
field checked on the way in.

The file envelope (torch.save, loading with weights_only=True so nothing is unpickled, the
SHA-256 digest) is fhetorch/tensor/serialization.py's; fhetorch/serialization.py routes TFHE
objects and kinds here. Values mod q travel as their residues mod (q0, q1) on axis -2, as the
keys already are, so "every value in [0, q)" is "every residue below its prime".

Checks on load: the parameters rebuild to the same TFHEParams (same primes, delta, noise
widths; other versions' or hand-edited ones are refused) and equal the context's; keys and
ciphertexts have the shapes the parameters give and canonical residues (a Fourier key: finite
values; a ternary secret's bootstrapping key: 2n GGSWs); secrets are binary or ternary as the
parameters say;
degree and noise level lie in the ranges the LWETensor rules allow; an LWETensor's key id is
its context's (a ciphertext of other keys would decrypt to garbage). Anything else raises
SerializationError.

pickle, torch.save and copy (registered below with copyreg): a public context pickles as its
evaluation keys; a context holding secret keys refuses, and so do the bare secret keys; an
LWETensor pickles as its ciphertexts, parameters and key id, and unpickles tied to a live
context of the process with those keys. No route carries a sampler's ChaCha20 key.
"""
from __future__ import annotations

import copyreg
import warnings

import torch

from ..errors import FHEError, InsecureParametersWarning, SerializationError, warn
from .context import TFHEContext, find_context
from .entities import (FourierLweBootstrapKey, FourierLweMultiBitBootstrapKey, GlweSecretKey, LweBootstrapKey, LweKeyswitchKey, LweMultiBitBootstrapKey,
                       LweSecretKey)
from .lwe_tensor import LWETensor
from .params import TFHEParams

def is_tfhe_kind(kind) -> bool:
    """Whether a file's kind is TFHE content (every TFHE kind starts with "tfhe_"). Raises nothing."""
    return isinstance(kind, str) and kind.startswith("tfhe_")


def is_tfhe(obj) -> bool:
    """Whether fhetorch.save hands obj to this module. Raises nothing."""
    return isinstance(obj, (TFHEParams, TFHEContext, LWETensor, LweSecretKey, GlweSecretKey, LweKeyswitchKey,
                            LweBootstrapKey, LweMultiBitBootstrapKey, FourierLweBootstrapKey))


# --- writing ---------------------------------------------------------------------------------
def encode(obj, secret_key: bool = False) -> tuple[dict, dict]:
    """(meta of plain data, int32 tensors) of a TFHEParams, tfhe.Context or LWETensor.

    Raises SerializationError for a bare key (save the context), secret_key=True on a context
    without secret keys, or a context without keys."""
    if isinstance(obj, TFHEParams):
        return {"kind": "tfhe_params", "params": obj.describe()}, {}
    if isinstance(obj, TFHEContext):
        return _encode_context(obj, secret_key)
    if isinstance(obj, LWETensor):
        return _encode_tensor(obj)
    if isinstance(obj, (LweSecretKey, GlweSecretKey)):
        raise SerializationError("save: a bare TFHE secret key is not saved; use fhetorch.save(tctx, path, "
                                 "secret_key=True)")
    raise SerializationError(f"save: a bare {type(obj).__name__} does not know its parameters; save the "
                             "tfhe.Context (fhetorch.save(tctx.public(), path))")


def _encode_context(ctx: TFHEContext, secret_key: bool):
    if ctx.bootstrap_key is None or ctx.keyswitch_key is None:
        raise SerializationError("save: this tfhe.Context has no keys; run keygen() first")
    bsk = ctx.bootstrap_key.data
    if bsk.dtype == torch.complex128:  # a Fourier key: its bits as int32 (4 words per value)
        bsk = bsk.view(torch.int32)
    tensors = {"bootstrap_key": bsk, "keyswitch_key": ctx.keyswitch_key.data}
    if secret_key:
        if not ctx.has_secret_key:
            raise SerializationError("save: secret_key=True but this tfhe.Context holds no secret key")
        tensors["lwe_key"] = ctx.lwe_key.data.to(torch.int32)
        tensors["glwe_key"] = ctx.glwe_key.data.to(torch.int32)
    meta = {"kind": "tfhe_context", "params": ctx.params.describe(), "key_id": ctx.key_id,
            "secret_key": bool(secret_key)}
    return meta, tensors


def _encode_tensor(et: LWETensor):
    mq = et.context.modulus
    meta = {"kind": "tfhe_lwe_tensor", "params": et.context.params.describe(), "key_id": et.context.key_id,
            "shape": list(et.shape), "degree": et.degree, "noise_level": et.noise_level}
    data = torch.stack((et.data % mq.q0, et.data % mq.q1), -2).to(torch.int32)  # (..., 2, d + 1)
    return meta, {"data": data}


# --- reading ---------------------------------------------------------------------------------
def decode(meta: dict, tensors: dict, ctx=None, device=None):
    """The object `encode` described: TFHEParams, a tfhe.Context (built on `device`, default
    CPU), or an LWETensor of ctx (a tfhe.Context with its keys).

    Raises SerializationError for malformed, inconsistent or foreign content, a context file
    given a ctx, or a tensor without its ctx or with another one."""
    try:
        return _decode(meta, tensors, ctx, device)
    except SerializationError:
        raise
    except (FHEError, KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as e:
        raise SerializationError(f"load: the TFHE content is corrupted or incomplete ({type(e).__name__}: {e})") \
            from None


def _decode(meta, tensors, ctx, device):
    kind = meta["kind"]
    if kind == "tfhe_params":
        _expect(tensors, set())
        return _params(meta["params"])
    if kind == "tfhe_context":
        if ctx is not None:
            raise SerializationError("load: this file holds a tfhe.Context, which carries its own parameters and "
                                     "keys; load it without one: fhetorch.load(f) (device=... picks the device)")
        return _load_context(meta, tensors, torch.device(device) if device is not None else torch.device("cpu"))
    if kind == "tfhe_lwe_tensor":
        if not isinstance(ctx, TFHEContext):
            got = "none" if ctx is None else f"a {type(ctx).__name__}"
            raise SerializationError(f"load: an LWETensor needs its tfhe.Context (fhetorch.load(f, tctx)), got {got}")
        if device is not None and torch.device(device) != ctx.device:
            raise SerializationError(f"load: the LWETensor goes to its context's device {ctx.device}, not {device}")
        return _load_tensor(meta, tensors, ctx)
    raise SerializationError(f"load: unknown TFHE kind {kind!r}")


def _expect(tensors: dict, names: set):
    if set(tensors) != names:
        raise SerializationError(f"load: the file holds tensors {sorted(tensors)}, expected {sorted(names)}")


def _int(v, what: str, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise SerializationError(f"load: {what} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _params(d) -> TFHEParams:
    """Parameters this version rebuilds to exactly the description (derived values included)."""
    if not isinstance(d, dict):
        raise SerializationError(f"load: malformed TFHE parameters {d!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = TFHEParams.from_description(d, allow_insecure=True)
    if p.describe() != d:
        raise SerializationError(f"load: the TFHE parameters in the file ({d.get('name')!r}) do not match what "
                                 "this fhetorch builds for them")
    if not p.is_secure:
        warn(f"loaded TFHE parameters {p.name!r} are not 128-bit secure")
    return p


def _check_params(d, ctx: TFHEContext, what: str):
    if d != ctx.params.describe():
        name = d.get("name") if isinstance(d, dict) else d
        raise SerializationError(f"load: the {what} was made with other parameters ({name!r}) than the context's "
                                 f"({ctx.params.name!r})")


def _residues(t: torch.Tensor, shape: tuple, primes, what: str) -> torch.Tensor:
    """t of exactly `shape` (int32), axis -2 the primes, every residue below its prime."""
    if tuple(t.shape) != tuple(shape) or t.dtype != torch.int32:
        raise SerializationError(f"load: {what} has shape {tuple(t.shape)} / {t.dtype}, expected {tuple(shape)} "
                                 "int32")
    q = torch.tensor(primes, dtype=torch.int32).view(2, 1)
    rows = t.reshape(-1, 2, t.shape[-1])
    step = max(1, (1 << 24) // max(1, 2 * t.shape[-1]))  # slabs: a tfhe-8bit bootstrapping key is 3.5 GB
    for i in range(0, rows.shape[0], step):
        slab = rows[i: i + step]
        if bool(((slab < 0) | (slab >= q)).any()):
            raise SerializationError(f"load: {what} holds residues outside [0, q_i) of their prime: the file was "
                                     "altered")
    return t


def _fourier(t: torch.Tensor, shape: tuple, what: str) -> torch.Tensor:
    """The complex128 tensor of `shape` whose bits t holds (int32, 4 words per value), every value
    finite (an FFT of torus polynomials)."""
    words = (*shape[:-1], 4 * shape[-1])
    if tuple(t.shape) != words or t.dtype != torch.int32:
        raise SerializationError(f"load: {what} has shape {tuple(t.shape)} / {t.dtype}, expected {words} int32 "
                                 "(complex128 bits)")
    t = t.contiguous().view(torch.complex128)
    flat = torch.view_as_real(t).reshape(-1)
    step = 1 << 24
    for i in range(0, flat.shape[0], step):
        if not bool(torch.isfinite(flat[i: i + step]).all()):
            raise SerializationError(f"load: {what} holds values that are not finite: the file was altered")
    return t


def _secret(t: torch.Tensor, shape: tuple, distribution: str, what: str) -> torch.Tensor:
    """t of exactly `shape` (int32), every value in {0, 1} (binary) or {-1, 0, 1} (ternary)."""
    if tuple(t.shape) != tuple(shape) or t.dtype != torch.int32:
        raise SerializationError(f"load: {what} has shape {tuple(t.shape)} / {t.dtype}, expected {tuple(shape)} "
                                 "int32")
    lo = -1 if distribution == "ternary" else 0
    if bool(((t < lo) | (t > 1)).any()):
        raise SerializationError(f"load: {what} is not {distribution}: the file was altered")
    return t.to(torch.int64)


def _key_id(v):
    if not (isinstance(v, str) and len(v) == 16 and all(c in "0123456789abcdef" for c in v)):
        raise SerializationError(f"load: key id {v!r} is not 16 hex digits")
    return v


def _load_context(meta, tensors, device) -> TFHEContext:
    p = _params(meta["params"])
    secret = meta["secret_key"]
    if type(secret) is not bool:
        raise SerializationError(f"load: secret_key must be true or false, got {secret!r}")
    names = {"bootstrap_key", "keyswitch_key"} | ({"lwe_key", "glwe_key"} if secret else set())
    _expect(tensors, names)
    ctx = TFHEContext(p, device)
    g = p.grouping_factor
    ternary = p.secret_distribution == "ternary"
    ggsws = 2 * p.n if ternary else p.n  # a ternary secret's key: a GGSW per bit of s+ and of s-
    ggsw = (p.k + 1, p.pbs_level, p.k + 1, 2, p.N)
    if p.blind_rotation == "fft":
        bootstrap = _fourier(tensors["bootstrap_key"], ((p.n // g, 1 << g) if g > 1 else (ggsws,)) +
                             (p.k + 1, p.pbs_level, p.k + 1, p.N // 2), "the bootstrapping key")
    else:
        bootstrap = _residues(tensors["bootstrap_key"], ((p.n // g, 1 << g) if g > 1 else (ggsws,)) + ggsw,
                              p.moduli, "the bootstrapping key")
    keyswitch = _residues(tensors["keyswitch_key"], (p.k * p.N, p.ks_level, 2, p.n + 1), p.moduli,
                          "the key-switching key")
    if g > 1 and p.blind_rotation == "fft":
        ctx.bootstrap_key = FourierLweMultiBitBootstrapKey(bootstrap.to(device).contiguous(), p.pbs_base_log,
                                                           p.pbs_level, g)
    elif g > 1:
        ctx.bootstrap_key = LweMultiBitBootstrapKey(bootstrap.to(device).contiguous(), p.pbs_base_log, p.pbs_level,
                                                    g)
    elif p.blind_rotation == "fft":
        ctx.bootstrap_key = FourierLweBootstrapKey(bootstrap.to(device).contiguous(), p.pbs_base_log, p.pbs_level,
                                                   ternary)
    else:
        ctx.bootstrap_key = LweBootstrapKey(bootstrap.to(device).contiguous(), p.pbs_base_log, p.pbs_level, ternary)
    ctx.keyswitch_key = LweKeyswitchKey(keyswitch.to(device).contiguous(), p.ks_base_log, p.ks_level)
    if secret:
        dist = p.secret_distribution
        ctx.lwe_key = LweSecretKey(_secret(tensors["lwe_key"], (p.n,), dist, "the LWE secret key").to(device), dist)
        ctx.glwe_key = GlweSecretKey(_secret(tensors["glwe_key"], (p.k, p.N), dist, "the GLWE secret key").to(device),
                                     dist)
    ctx.key_id = _key_id(meta["key_id"])
    return ctx


def _load_tensor(meta, tensors, ctx: TFHEContext) -> LWETensor:
    _check_params(meta["params"], ctx, "LWETensor")
    if ctx.key_id is None or meta["key_id"] != ctx.key_id:
        raise SerializationError("load: the LWETensor was encrypted under other keys than this context's")
    _expect(tensors, {"data"})
    p = ctx.params
    shape = meta["shape"]
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SerializationError(f"load: LWETensor shape {shape!r} is not a list of non-negative integers")
    t = _residues(tensors["data"], (*shape, 2, p.k * p.N + 1), p.moduli, "the LWETensor")
    degree = _int(meta["degree"], "the LWETensor's degree", 0, p.message_space - 1)
    noise_level = _int(meta["noise_level"], "the LWETensor's noise level", 0, p.max_noise_level ** 2)
    r = t.to(ctx.device, torch.int64)
    data = ctx.modulus.compose(r[..., 0, :], r[..., 1, :]).contiguous()
    return LWETensor(ctx, data, degree, noise_level)


# --- pickle, torch.save, copy ------------------------------------------------------------------
def _reduce_context(ctx: TFHEContext):
    if ctx.has_secret_key or ctx.lwe_key is not None:
        raise SerializationError("pickle: this tfhe.Context holds the secret keys, which are never pickled; pickle "
                                 "tctx.public() (what a server gets), or keep the client's keys with "
                                 "fhetorch.save(tctx, path, secret_key=True)")
    meta, tensors = _encode_context(ctx, False)
    return rebuild_context, (meta, tensors, str(ctx.device))


def rebuild_context(meta, tensors, device):
    """Unpickling of a public tfhe.Context (on its keys' device, which torch.load's
    map_location may have changed). Raises SerializationError for malformed content."""
    _check_pickled(meta, tensors, "tfhe_context")
    dev = tensors["bootstrap_key"].device if "bootstrap_key" in tensors else torch.device(device)
    return decode(meta, {k: v.cpu() for k, v in tensors.items()}, None, dev)


def _reduce_tensor(et: LWETensor):
    meta, tensors = _encode_tensor(et)
    return rebuild_lwe_tensor, (meta, tensors)


def rebuild_lwe_tensor(meta, tensors):
    """Unpickling of an LWETensor: tied to a live context of this process with its keys and
    parameters (the client's, or a public context loaded or unpickled first). Raises
    SerializationError when there is none, or for malformed content."""
    _check_pickled(meta, tensors, "tfhe_lwe_tensor")
    if "data" not in tensors:
        raise SerializationError("unpickle: an LWETensor without its ciphertext data")
    ctx = find_context(meta.get("key_id"), meta.get("params"), tensors["data"].device)
    if ctx is None:
        raise SerializationError(
            f"unpickle: no tfhe.Context with this LWETensor's keys is alive in this process (key id "
            f"{meta.get('key_id')}); load or unpickle its public context first, or send tensors with "
            "fhetorch.save / fhetorch.load(f, tctx)")
    return decode(meta, {k: v.cpu() for k, v in tensors.items()}, ctx, None)


def _check_pickled(meta, tensors, kind: str):
    if not isinstance(meta, dict) or meta.get("kind") != kind or not isinstance(tensors, dict) or not all(
            isinstance(k, str) and isinstance(t, torch.Tensor) and t.dtype == torch.int32 for k, t in tensors.items()):
        raise SerializationError(f"unpickle: malformed fhetorch content (expected a {kind})")


def _refuse_secret_key(key):
    raise SerializationError("pickle / copy: a TFHE secret key is never pickled or copied bare; send tctx.public() "
                             "to a server, and keep the client's keys with fhetorch.save(tctx, path, "
                             "secret_key=True)")


copyreg.pickle(TFHEContext, _reduce_context)
copyreg.pickle(LWETensor, _reduce_tensor)
copyreg.pickle(LweSecretKey, _refuse_secret_key)
copyreg.pickle(GlweSecretKey, _refuse_secret_key)
