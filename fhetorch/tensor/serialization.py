"""fhetorch.save / fhetorch.load, and pickling: parameters, keys, contexts and ciphertexts.

A file is a torch.save'd dict of plain data and int32 tensors (loaded with weights_only=True,
so loading never runs code), with a SHA-256 digest over its content. Loading checks the
digest, the kind, that parameters and shapes match the context, and every field's range
(residues below their prime, levels in the chain, finite positive scales, power-of-two slot
counts, shapes that fit their slots): truncated, corrupted, crafted or foreign data raises
SerializationError. The secret key is written only when asked for by name:
fhetorch.save(ctx, path, secret_key=True).

pickle, torch.save and multiprocessing carry the same public content (registered below with
copyreg): a public context pickles as its public and evaluation keys; a context holding the
secret key refuses; an EncryptedTensor pickles as its ciphertexts, parameters and key id,
and unpickles tied to a live context of the process with those keys (docs/security.md).
"""
from __future__ import annotations

import copyreg
import hashlib
import json
import math
import warnings

import torch

from .._ckks.ciphertext import Ciphertext
from .._ckks.keygen import EncapsulationKeys
from .._ckks.params import Params, ParamsLiteral, make_params
from ..circuits.bootstrap_config import BootstrapConfig
from ..circuits.switching.serialization import decode_switch_keys, encode_switch_keys
from ..errors import FHEError, InsecureParametersWarning, SerializationError, warn
from .._rlwe import PublicKey, SecretKey, SwitchingKey
from .context import Context, find_context
from .encrypted_tensor import EncryptedTensor
from .layout import Layout

MAGIC, VERSION = "fhetorch", 2  # 2: parameters describe level_bits; contexts their bootstrapping configuration


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
    path or file object. A Context is written without its secret key unless secret_key=True.

    Raises SerializationError for anything else (a bare Ciphertext or secret key included), or
    secret_key=True on a context without one."""
    meta, tensors = _encode(obj, secret_key)
    write_payload(meta, tensors, f)


def write_payload(meta: dict, tensors: dict, f):
    """The file envelope: meta (plain data) and int32 tensors, with their SHA-256 digest, by
    torch.save to a path or file object (fhetorch/serialization.py writes TFHE content with
    it). Raises nothing of its own."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    payload = {"magic": MAGIC, "version": VERSION, "meta": meta, "tensors": tensors,
               "digest": _digest(meta, tensors)}
    torch.save(payload, f)


def _encode(obj, secret_key):
    if isinstance(obj, Params):
        return {"kind": "params", "params": obj.describe()}, {}
    if isinstance(obj, Context):
        return _encode_context(obj, secret_key)
    if isinstance(obj, EncryptedTensor):
        return _encode_tensor(obj)
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


def _encode_context(ctx, secret_key):
    t = {}
    if ctx.public_key is not None:
        t["public_key"] = ctx.public_key.data
    if ctx.relin_key is not None:
        t["relin.q"], t["relin.p"] = ctx.relin_key.key_q, ctx.relin_key.key_p
    for g, k in ctx.galois_keys.items():
        t[f"galois.{g}.q"], t[f"galois.{g}.p"] = k.key_q, k.key_p
    enc = ctx.encapsulation_keys
    if enc is not None:
        t["enc.sparse.q"], t["enc.sparse.p"] = enc.to_sparse.key_q, enc.to_sparse.key_p
        t["enc.dense.q"], t["enc.dense.p"] = enc.to_dense.key_q, enc.to_dense.key_p
    if secret_key:
        if ctx.secret_key is None:
            raise SerializationError("save: secret_key=True but this context has no secret key")
        t["secret_key"] = ctx.secret_key.s
    switch = None
    if ctx.switch_keys is not None:  # the scheme-switching keys (no secret among them)
        switch, st = encode_switch_keys(ctx.switch_keys)
        t.update(st)
    meta = {"kind": "context", "params": ctx.params.describe(), "key_id": ctx.key_id, "switch": switch,
            "bootstrap": None if ctx.bootstrap_config is None else ctx.bootstrap_config.describe(),
            "galois": sorted(ctx.galois_keys), "secret_key": bool(secret_key),
            "encapsulation": None if enc is None else {"weight": enc.weight,
                                                       "special": [enc.special.start, enc.special.stop]}}
    return meta, t


def _encode_tensor(et):
    """A one-ciphertext flat tensor keeps the original format (level, scale, slots, "data");
    several ciphertexts add "ciphertexts" (one entry each) and "data.1", "data.2", ..."""
    cts = et.ciphertexts
    meta = {"kind": "encrypted_tensor", "level": cts[0].level, "scale": cts[0].scale, "slots": cts[0].slots,
            "shape": list(et.shape), "complex": et.is_complex(), "key_id": et.ctx.key_id,
            "params": et.ctx.params.describe()}
    tensors = {"data": cts[0].data}
    if len(cts) > 1:
        meta["ciphertexts"] = [{"level": c.level, "scale": c.scale, "slots": c.slots} for c in cts]
        tensors.update({f"data.{j}": c.data for j, c in enumerate(cts[1:], 1)})
    if et.layout is not None:
        meta["layout"] = _encode_layout(et.layout)
    return meta, tensors


def _encode_layout(lay):
    """A layout as plain data: a Layout, or a tuple of str / int / Layout (a compiled model's)."""
    if isinstance(lay, Layout):
        return {"layout": [list(lay.shape), lay.gap, list(lay.grid)]}
    if isinstance(lay, tuple):
        return {"tuple": [_encode_layout(x) for x in lay]}
    if isinstance(lay, str) or (isinstance(lay, int) and not isinstance(lay, bool)):
        return lay
    raise SerializationError(f"save: cannot save a tensor packed in a layout of type {type(lay).__name__}")


def load(f, ctx: Context | None = None, *, device=None):
    """Read what `save` wrote. Ciphertexts and keys need the context they belong to; a
    context is rebuilt on `device` (default: ctx's device, else CPU).

    Raises SerializationError for unreadable, truncated, corrupted, crafted or foreign data,
    other parameters or keys than ctx's, or a ciphertext or key without its ctx."""
    meta, tensors = read_payload(f)
    return decode(meta, tensors, ctx, device)


def read_payload(f) -> tuple[dict, dict]:
    """(meta, tensors) of a file `write_payload` wrote, its digest checked; nothing unpickled.

    Raises SerializationError for unreadable, truncated, corrupted or foreign data."""
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
            or not _plain_int32(tensors) or not all(t.device.type == "cpu" for t in tensors.values()):
        raise SerializationError("load: the file is corrupted (malformed content)")
    try:
        digest = _digest(meta, tensors)
    except (TypeError, ValueError) as e:  # meta that is not plain data
        raise SerializationError(f"load: the file is corrupted (malformed content: {e})") from None
    if digest != payload.get("digest"):
        raise SerializationError("load: digest mismatch: the file is corrupted")
    return meta, tensors


def decode(meta: dict, tensors: dict, ctx: Context | None = None, device=None):
    """The CKKS object of a file's (meta, tensors) (see load). Raises SerializationError as load does."""
    return _guarded(_decode, meta, tensors, ctx, device)


def _plain_int32(tensors) -> bool:
    """Every tensor fhetorch writes (or pickles) is a dense int32 tensor with a str name."""
    return isinstance(tensors, dict) and all(
        isinstance(k, str) and isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dtype == torch.int32
        for k, t in tensors.items())


def _guarded(fn, *args):
    """fn(*args), any failure on malformed content reported as a SerializationError."""
    try:
        return fn(*args)
    except SerializationError:
        raise
    except (FHEError, KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as e:
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
        if meta.get("key_id") != ctx.key_id:
            raise SerializationError("load: the ciphertext was encrypted under other keys than this context's")
        return _tensor(meta, tensors, ctx)
    if kind == "public_key":
        return PublicKey(_public_key(tensors["data"], ctx).to(ctx.device))
    if kind == "switching_key":
        return _switching(tensors["q"], tensors["p"], ctx, kind)
    raise SerializationError(f"load: unknown kind {kind!r}")


# --- field checks --------------------------------------------------------------------------
def _int(v, what: str, lo: int, hi: int) -> int:
    """A Python int (not a bool) in [lo, hi]."""
    if type(v) is not int or not lo <= v <= hi:
        raise SerializationError(f"load: {what} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _bool(v, what: str) -> bool:
    if type(v) is not bool:
        raise SerializationError(f"load: {what} must be true or false, got {v!r}")
    return v


def _check_shape(t, shape, kind):
    if tuple(t.shape) != tuple(shape) or t.dtype != torch.int32:
        raise SerializationError(f"load: {kind} has shape {tuple(t.shape)} / {t.dtype}, expected {tuple(shape)} int32")


def _check_residues(t: torch.Tensor, primes, kind: str):
    """Residues are canonical: limb i (axis -2) holds values in [0, primes[i]). Others would
    decrypt to garbage (an integer >= q is not a residue modulo q)."""
    q = torch.tensor(primes, dtype=torch.int32, device=t.device).view(-1, 1)
    for slab in t.reshape(-1, *t.shape[-2:]):  # one (L, N) slab at a time: keys can be large
        if bool(((slab < 0) | (slab >= q)).any()):
            raise SerializationError(f"load: {kind} holds residues outside [0, q) of their limb's prime: "
                                     "the file was altered")


def _primes(ctx, idx) -> list:
    return [ctx.ring.primes[i] for i in idx]


def _params(d: dict) -> Params:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        bits = d.get("level_bits")
        p = make_params(ParamsLiteral(d["log_n"], chain=d["chain"], levels=len(d["level_limbs"]) - 1, dnum=d["dnum"],
                                      hamming_weight=d["hamming_weight"], level_bits=bits, name=d["name"]),
                        allow_insecure=True)
    if p.describe() != {**d}:
        raise SerializationError("load: parameters in the file do not match what this fhetorch builds for them")
    if p.security_bits == 0:
        warn(f"loaded parameters {p.name!r} are not 128-bit secure")
    return p


def _check_params(d, ctx, kind):
    if d is not None and d != ctx.params.describe():
        raise SerializationError(f"load: the {kind} was made with other parameters ({d['name']}) than the context's "
                                 f"({ctx.params.name})")


# --- ciphertexts ---------------------------------------------------------------------------
def _ciphertext(meta, data, ctx) -> Ciphertext:
    """One ciphertext from its fields: level in the chain, data (2 or 3, L, N) of canonical
    residues over the level's limbs, a finite scale in [1, Q_level), slots a power of two
    <= N/2."""
    level = _int(meta["level"], "level", 0, ctx.max_level)
    if data.dim() != 3 or data.shape[0] not in (2, 3):
        raise SerializationError(f"load: ciphertext data of shape {tuple(data.shape)}")
    idx = ctx.params.limbs(level)
    _check_shape(data, (data.shape[0], len(idx), ctx.n), "ciphertext")
    _check_residues(data, _primes(ctx, idx), "ciphertext")
    scale = meta["scale"]
    log_q = math.log2(ctx.basis(level).product)
    if type(scale) not in (int, float) or not math.isfinite(scale) or not (scale >= 1 and math.log2(scale) < log_q):
        raise SerializationError(f"load: ciphertext scale {scale!r} is not a finite number in [1, Q_level = "
                                 f"2^{log_q:.1f}) for level {level}")
    slots = _int(meta["slots"], "slots", 1, ctx.slots)
    if slots & (slots - 1):
        raise SerializationError(f"load: slots must be a power of two, got {slots}")
    return Ciphertext(data.to(ctx.device), level, float(scale), slots)


def _tensor(meta, tensors, ctx) -> EncryptedTensor:
    """An EncryptedTensor whose shape, ciphertexts and layout fit together (decrypt reads
    exactly the slots they describe)."""
    entries = meta.get("ciphertexts", [meta])
    if not isinstance(entries, list) or not 1 <= len(entries) <= len(tensors):
        raise SerializationError("load: the tensor's list of ciphertexts does not match its data")
    cts = [_ciphertext(e, tensors["data" if j == 0 else f"data.{j}"], ctx) for j, e in enumerate(entries)]
    shape = meta["shape"]
    if not isinstance(shape, list) or not all(type(d) is int and d >= 1 for d in shape):
        raise SerializationError(f"load: tensor shape {shape!r} is not a list of positive integers")
    numel = math.prod(shape)
    layout = _decode_layout(meta.get("layout"))
    _check_fits(numel, cts, layout, ctx)
    return EncryptedTensor(ctx, cts, shape, _bool(meta["complex"], "complex"), layout)


def _check_fits(numel: int, cts, layout, ctx):
    total = sum(c.slots for c in cts)
    if len(cts) > 1 and any(c.slots != ctx.slots for c in cts):
        raise SerializationError("load: a tensor of several ciphertexts has full slots in each")
    if layout is None:
        if len(cts) != -(-numel // cts[0].slots):
            raise SerializationError(f"load: {numel} values do not fit {len(cts)} ciphertext(s) of "
                                     f"{cts[0].slots} slots")
        return
    if isinstance(layout, Layout) and math.prod(layout.shape) != numel:
        raise SerializationError(f"load: the layout holds {math.prod(layout.shape)} values, the shape {numel}")
    for lay in _layouts_in(layout):
        if math.prod(lay.shape) > total or lay.span > total:
            raise SerializationError(f"load: the layout {lay} needs {lay.span} slots, the ciphertexts have {total}")


def _layouts_in(layout):
    if isinstance(layout, Layout):
        return [layout]
    if isinstance(layout, tuple):
        return [x for part in layout for x in _layouts_in(part)]
    return []


def _decode_layout(d, inner: bool = False):
    """None, a Layout, or a tuple (of str, int, Layout, tuple): what _encode_layout writes."""
    if d is None and not inner:
        return None
    if inner and (isinstance(d, str) or type(d) is int):
        return d
    if isinstance(d, dict) and list(d) == ["tuple"] and isinstance(d["tuple"], list):
        return tuple(_decode_layout(x, True) for x in d["tuple"])
    if isinstance(d, dict) and list(d) == ["layout"]:
        shape, gap, grid = d["layout"]
        ok = all(isinstance(v, list) and all(type(x) is int and x >= 1 for x in v) for v in (shape, grid))
        if ok and type(gap) is int and gap >= 1 and (len(shape), len(grid)) in ((1, 0), (3, 2)) \
                and (not grid or (grid[0] >= shape[1] * gap and grid[1] >= shape[2] * gap)):
            return Layout(tuple(shape), gap, tuple(grid))
    raise SerializationError(f"load: malformed layout {d!r}")


# --- keys ----------------------------------------------------------------------------------
def _public_key(t, ctx) -> torch.Tensor:
    q_count = len(ctx.params.primes)
    _check_shape(t, (2, q_count, ctx.n), "public key")
    _check_residues(t, _primes(ctx, range(q_count)), "public key")
    return t


def _switching(q, p, ctx, kind) -> SwitchingKey:
    # rotation keys made for bootstrapping's low levels hold only Q limbs [0, q_stop)
    q_count = len(ctx.params.primes)
    q_stop = q.shape[2] if q.dim() == 4 and 0 < q.shape[2] <= q_count else q_count
    dnum = -(-q_stop // ctx.params.alpha)
    _check_shape(q, (dnum, 2, q_stop, ctx.n), kind)
    _check_shape(p, (dnum, 2, len(ctx.params.special_primes), ctx.n), kind)
    _check_residues(q, _primes(ctx, range(q_stop)), kind)
    _check_residues(p, _primes(ctx, ctx.params.special_limbs), kind)
    return SwitchingKey(q.to(ctx.device).contiguous(), p.to(ctx.device).contiguous())


def _galois(g, n: int) -> int:
    """A Galois element: odd, in [1, 2N)."""
    if type(g) is not int or g % 2 == 0 or not 0 < g < 2 * n:
        raise SerializationError(f"load: rotation key element {g!r} is not an odd integer in [1, {2 * n})")
    return g


def _load_context(meta, tensors, device) -> Context:
    params = _params(meta["params"])
    bootstrap = meta.get("bootstrap")
    try:
        bootstrap = None if bootstrap is None else BootstrapConfig(**bootstrap)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ctx = Context(params=params, device=device, bootstrap=bootstrap)
    except (TypeError, FHEError) as e:
        raise SerializationError(f"load: malformed bootstrapping configuration {meta.get('bootstrap')!r}") from e
    if meta["key_id"] is not None and not isinstance(meta["key_id"], str):
        raise SerializationError(f"load: key id {meta['key_id']!r} is not a string")
    ctx.key_id = meta["key_id"]
    # never reuse a ChaCha20 stream: the loaded context gets a fresh key anyway (os.urandom)
    if "public_key" in tensors:
        ctx.public_key = PublicKey(_public_key(tensors["public_key"], ctx).to(device))
    if "relin.q" in tensors:
        ctx.relin_key = _switching(tensors["relin.q"], tensors["relin.p"], ctx, "relinearisation key")
    galois = meta["galois"]
    if not isinstance(galois, list) or len(set(map(str, galois))) != len(galois):
        raise SerializationError(f"load: malformed list of rotation keys {galois!r}")
    for g in galois:
        ctx.galois_keys[_galois(g, ctx.n)] = _switching(tensors[f"galois.{g}.q"], tensors[f"galois.{g}.p"], ctx,
                                                        "rotation key")
    enc = meta.get("encapsulation")
    if enc:
        ctx.encapsulation_keys = _encapsulation(enc, tensors, ctx)
    if meta.get("switch"):
        ctx.switch_keys = decode_switch_keys(meta["switch"], tensors, params.log_n, device)
    if _bool(meta["secret_key"], "secret_key"):
        s = tensors["secret_key"]
        _check_shape(s, (len(params.primes) + len(params.special_primes), ctx.n), "secret key")
        _check_residues(s, ctx.ring.primes, "secret key")
        ctx.secret_key = SecretKey(s.to(device))
    return ctx


def _encapsulation(enc, tensors, ctx) -> EncapsulationKeys:
    start, stop = enc["special"]
    special = ctx.params.special_limbs
    _int(start, "encapsulation special primes' start", special.start, special.start)
    _int(stop, "encapsulation special primes' end", start + 1, special.stop)
    weight = _int(enc["weight"], "encapsulation weight", 1, ctx.n)
    special = range(start, stop)
    lvl0 = ctx.params.limbs(0)
    q, p = tensors["enc.sparse.q"], tensors["enc.sparse.p"]
    _check_shape(q, (1, 2, lvl0.stop, ctx.n), "encapsulation key")
    _check_shape(p, (1, 2, len(special), ctx.n), "encapsulation key")
    _check_residues(q, _primes(ctx, range(lvl0.stop)), "encapsulation key")
    _check_residues(p, _primes(ctx, special), "encapsulation key")
    dense = _switching(tensors["enc.dense.q"], tensors["enc.dense.p"], ctx, "encapsulation key")
    return EncapsulationKeys(SwitchingKey(q.to(ctx.device).contiguous(), p.to(ctx.device).contiguous()), dense,
                             special, weight)


# --- pickle, torch.save, multiprocessing ------------------------------------------------------
def _reduce_context(ctx: Context):
    if ctx.secret_key is not None:
        raise SerializationError("pickle: this context holds the secret key, which is never pickled; pickle "
                                 "ctx.public() (what a server gets), or keep the client's keys with "
                                 "fhetorch.save(ctx, path, secret_key=True)")
    meta, tensors = _encode_context(ctx, False)
    return rebuild_context, (meta, tensors, str(ctx.device))


def rebuild_context(meta, tensors, device):
    """Unpickling of a public context (on its tensors' device, which torch.load's
    map_location may have changed)."""
    _check_pickled(meta, tensors, "context")
    dev = next(iter(tensors.values())).device if tensors else torch.device(device)
    return _guarded(_load_context, meta, tensors, dev)


def _check_pickled(meta, tensors, kind: str):
    if not isinstance(meta, dict) or meta.get("kind") != kind or not _plain_int32(tensors):
        raise SerializationError(f"unpickle: malformed fhetorch content (expected a {kind})")


def _reduce_tensor(et: EncryptedTensor):
    meta, tensors = _encode_tensor(et)
    return rebuild_encrypted_tensor, (meta, tensors)


def rebuild_encrypted_tensor(meta, tensors):
    """Unpickling of an EncryptedTensor: tied to a live context of this process with its keys
    and parameters (the client's, or a public context loaded or unpickled first)."""
    _check_pickled(meta, tensors, "encrypted_tensor")
    if "data" not in tensors:
        raise SerializationError("unpickle: an EncryptedTensor without its ciphertext data")
    ctx = find_context(meta.get("key_id"), meta.get("params"), tensors["data"].device)
    if ctx is None:
        raise SerializationError(
            "unpickle: no context with this tensor's keys is alive in this process (key id "
            f"{meta['key_id']}); load or unpickle its public context first (fhetorch.load(path) of "
            "fhetorch.save(ctx.public(), path)), or send tensors with fhetorch.save / fhetorch.load(f, ctx)")
    return _guarded(_tensor, meta, tensors, ctx)


copyreg.pickle(Context, _reduce_context)
copyreg.pickle(EncryptedTensor, _reduce_tensor)
