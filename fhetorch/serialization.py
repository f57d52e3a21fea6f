"""fhetorch.save / fhetorch.load: parameters, keys, contexts and ciphertexts.

A file is a torch.save'd dict of plain data and tensors (loaded with weights_only=True, so
loading never runs code), with a SHA-256 digest over its content. Loading checks the
digest, the kind, and that parameters and shapes match the context: truncated, corrupted or
foreign data raises SerializationError. The secret key is written only when asked for by
name: fhetorch.save(ctx, path, secret_key=True).
"""
from __future__ import annotations

import hashlib
import json
import warnings

import torch

from .ckks.ciphertext import Ciphertext
from .ckks.context import EncapsulationKeys
from .ckks.params import Params, make_params
from .errors import InsecureParametersWarning, SerializationError
from .rlwe import PublicKey, SecretKey, SwitchingKey
from .tensor import Context, EncryptedTensor

MAGIC, VERSION = "fhetorch", 1


def _digest(meta: dict, tensors: dict) -> str:
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        h.update(k.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def save(obj, f, *, secret_key: bool = False):
    """Write a Params, Context, EncryptedTensor, PublicKey or SwitchingKey to a
    path or file object. A Context is written without its secret key unless secret_key=True."""
    meta, tensors = _encode(obj, secret_key)
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    payload = {"magic": MAGIC, "version": VERSION, "meta": meta, "tensors": tensors,
               "digest": _digest(meta, tensors)}
    torch.save(payload, f)


def _encode(obj, secret_key):
    if isinstance(obj, Params):
        return {"kind": "params", "params": obj.describe()}, {}
    if isinstance(obj, Context):
        t = {}
        if obj.public_key is not None:
            t["public_key"] = obj.public_key.data
        if obj.relin_key is not None:
            t["relin.q"], t["relin.p"] = obj.relin_key.key_q, obj.relin_key.key_p
        for g, k in obj.galois_keys.items():
            t[f"galois.{g}.q"], t[f"galois.{g}.p"] = k.key_q, k.key_p
        enc = obj.encapsulation_keys
        if enc is not None:
            t["enc.sparse.q"], t["enc.sparse.p"] = enc.to_sparse.key_q, enc.to_sparse.key_p
            t["enc.dense.q"], t["enc.dense.p"] = enc.to_dense.key_q, enc.to_dense.key_p
        if secret_key:
            if obj.secret_key is None:
                raise SerializationError("save: secret_key=True but this context has no secret key")
            t["secret_key"] = obj.secret_key.s
        meta = {"kind": "context", "params": obj.params.describe(), "key_id": obj.key_id,
                "galois": sorted(obj.galois_keys), "secret_key": bool(secret_key),
                "encapsulation": None if enc is None else {"weight": enc.weight,
                                                           "special": [enc.special.start, enc.special.stop]}}
        return meta, t
    if isinstance(obj, EncryptedTensor):
        ct = obj.ciphertext
        meta = {"kind": "encrypted_tensor", "level": ct.level, "scale": ct.scale, "slots": ct.slots,
                "shape": list(obj.shape), "complex": obj.is_complex(), "key_id": obj.ctx.key_id,
                "params": obj.ctx.params.describe()}
        return meta, {"data": ct.data}
    if isinstance(obj, Ciphertext):
        raise SerializationError("save: a bare Ciphertext does not know its context; save the EncryptedTensor "
                                 "(ctx.encrypt returns one), which records its parameters and keys")
    if isinstance(obj, PublicKey):
        return {"kind": "public_key"}, {"data": obj.data}
    if isinstance(obj, SwitchingKey):
        return {"kind": "switching_key"}, {"q": obj.key_q, "p": obj.key_p}
    if isinstance(obj, SecretKey):
        raise SerializationError("save: a bare secret key is not saved; use fhetorch.save(ctx, path, secret_key=True)")
    raise SerializationError(f"save: cannot save a {type(obj).__name__}")


def load(f, ctx: Context | None = None, *, device=None):
    """Read what `save` wrote. Ciphertexts and keys need the context they belong to; a
    context is rebuilt on `device` (default: ctx's device, else CPU)."""
    try:
        payload = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated or not a torch file
        raise SerializationError(f"load: not a readable fhetorch file ({type(e).__name__}: {e})") from None
    if not isinstance(payload, dict) or payload.get("magic") != MAGIC:
        raise SerializationError("load: not an fhetorch file")
    if payload.get("version") != VERSION:
        raise SerializationError(f"load: file version {payload.get('version')}, this fhetorch reads {VERSION}")
    meta, tensors = payload.get("meta"), payload.get("tensors")
    if not isinstance(meta, dict) or not isinstance(tensors, dict) or "kind" not in meta \
            or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
        raise SerializationError("load: the file is corrupted (malformed content)")
    if _digest(meta, tensors) != payload.get("digest"):
        raise SerializationError("load: digest mismatch: the file is corrupted")
    try:
        return _decode(meta, tensors, ctx, device)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise SerializationError(f"load: the file is corrupted or incomplete ({type(e).__name__}: {e})") from None


def _decode(meta, tensors, ctx, device):
    kind = meta["kind"]
    dev = torch.device(device) if device is not None else (ctx.device if ctx is not None else torch.device("cpu"))
    if kind == "params":
        return _params(meta["params"])
    if kind == "context":
        if ctx is not None:  # a context file brings its own parameters and keys; ctx would be ignored
            raise SerializationError("load: this file holds a context, which carries its own parameters and keys; "
                                     "load it without one: fhetorch.load(f) (device=... picks the device)")
        return _load_context(meta, tensors, dev)
    if ctx is None:
        raise SerializationError(f"load: a {kind} needs its context: fhetorch.load(f, ctx)")
    _check_params(meta.get("params"), ctx, kind)
    if kind == "encrypted_tensor":
        ct = _ciphertext(meta, tensors, ctx)
        if meta.get("key_id") != ctx.key_id:
            raise SerializationError("load: the ciphertext was encrypted under other keys than this context's")
        return EncryptedTensor(ctx, ct, meta["shape"], meta["complex"])
    if kind == "public_key":
        _check_shape(tensors["data"], (2, ctx.q_count, ctx.n), kind)
        return PublicKey(tensors["data"].to(ctx.device))
    if kind == "switching_key":
        return _switching(tensors["q"], tensors["p"], ctx, kind)
    raise SerializationError(f"load: unknown kind {kind!r}")


def _params(d: dict) -> Params:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        bts = d.get("bootstrap")
        p = make_params(d["log_n"], chain=d["chain"], levels=None if bts else len(d["level_limbs"]) - 1,
                        dnum=d["dnum"], hamming_weight=d["hamming_weight"], name=d["name"], allow_insecure=True,
                        bootstrap=bts)
    if p.describe() != {**d}:
        raise SerializationError("load: parameters in the file do not match what this fhetorch builds for them")
    if p.security_bits == 0:
        warnings.warn(f"loaded parameters {p.name!r} are not 128-bit secure", InsecureParametersWarning, stacklevel=3)
    return p


def _check_params(d, ctx, kind):
    if d is not None and d != ctx.params.describe():
        raise SerializationError(f"load: the {kind} was made with other parameters ({d['name']}) than the context's "
                                 f"({ctx.params.name})")


def _check_shape(t, shape, kind):
    if tuple(t.shape) != tuple(shape) or t.dtype != torch.int32:
        raise SerializationError(f"load: {kind} has shape {tuple(t.shape)} / {t.dtype}, expected {tuple(shape)} int32")


def _ciphertext(meta, tensors, ctx) -> Ciphertext:
    level = meta["level"]
    if not 0 <= level <= ctx.max_level:
        raise SerializationError(f"load: level {level} out of range for {ctx.params.name}")
    data = tensors["data"]
    if data.dim() != 3 or data.shape[0] not in (2, 3):
        raise SerializationError(f"load: ciphertext data of shape {tuple(data.shape)}")
    _check_shape(data, (data.shape[0], len(ctx.level_idx(level)), ctx.n), "ciphertext")
    return Ciphertext(data.to(ctx.device), level, float(meta["scale"]), int(meta["slots"]))


def _switching(q, p, ctx, kind) -> SwitchingKey:
    # rotation keys made for bootstrapping's low levels hold only Q limbs [0, q_stop)
    q_stop = q.shape[2] if q.dim() == 4 and 0 < q.shape[2] <= ctx.q_count else ctx.q_count
    dnum = -(-q_stop // ctx.params.alpha)
    _check_shape(q, (dnum, 2, q_stop, ctx.n), kind)
    _check_shape(p, (dnum, 2, len(ctx.params.special_primes), ctx.n), kind)
    return SwitchingKey(q.to(ctx.device).contiguous(), p.to(ctx.device).contiguous())


def _load_context(meta, tensors, device) -> Context:
    params = _params(meta["params"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = Context(params=params, device=device)
    ctx.key_id = meta["key_id"]
    # never reuse a ChaCha20 stream: the loaded context gets a fresh key anyway (os.urandom)
    if "public_key" in tensors:
        _check_shape(tensors["public_key"], (2, ctx.q_count, ctx.n), "public key")
        ctx.public_key = PublicKey(tensors["public_key"].to(device))
    if "relin.q" in tensors:
        ctx.relin_key = _switching(tensors["relin.q"], tensors["relin.p"], ctx, "relinearisation key")
    for g in meta["galois"]:
        ctx.galois_keys[int(g)] = _switching(tensors[f"galois.{g}.q"], tensors[f"galois.{g}.p"], ctx, "rotation key")
    enc = meta.get("encapsulation")
    if enc:
        special = range(*enc["special"])
        lvl0 = ctx.level_idx(0)
        q, p = tensors["enc.sparse.q"], tensors["enc.sparse.p"]
        _check_shape(q, (1, 2, lvl0.stop, ctx.n), "encapsulation key")
        _check_shape(p, (1, 2, len(special), ctx.n), "encapsulation key")
        ctx.encapsulation_keys = EncapsulationKeys(
            SwitchingKey(q.to(device).contiguous(), p.to(device).contiguous()),
            _switching(tensors["enc.dense.q"], tensors["enc.dense.p"], ctx, "encapsulation key"), special,
            int(enc["weight"]))
    if meta.get("secret_key"):
        _check_shape(tensors["secret_key"], (ctx.q_count + len(params.special_primes), ctx.n), "secret key")
        ctx.secret_key = SecretKey(tensors["secret_key"].to(device))
    return ctx


