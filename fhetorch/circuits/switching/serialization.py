"""SwitchKeys in a saved context (fhetorch.save / load of a CKKS Context made with
keygen(lut=...)): the configuration as plain data, the TFHE evaluation keys as
fhetorch._tfhe.serialization writes a public tfhe.Context, and the three GLWE key switches; every
tensor's shape and residues checked on load. There is no secret among them (the TFHE secrets are
dropped at keygen)."""
from __future__ import annotations

from dataclasses import asdict

import torch

from ..._tfhe import serialization as _tfhe_io
from ..._tfhe.entities import GlweKeyswitchKey
from ..._tfhe.glwe import packing_elements
from ..._tfhe.ring import TFHERing
from ...errors import FHEError, SerializationError
from .config import SwitchConfig
from .keys import SwitchKeys, tfhe_params

PREFIX = "switch."


def encode_switch_keys(keys: SwitchKeys) -> tuple[dict, dict]:
    """(meta, tensors named switch.*) of a context's SwitchKeys. Raises nothing."""
    tmeta, tt = _tfhe_io.encode(keys.tfhe)
    tensors = {f"{PREFIX}tfhe.{k}": v for k, v in tt.items()}
    tensors[f"{PREFIX}to_lwe"], tensors[f"{PREFIX}to_ckks"] = keys.to_lwe.data, keys.to_ckks.data
    for g, k in keys.packing.items():
        tensors[f"{PREFIX}pack.{g}"] = k.data
    return {"config": asdict(keys.config), "tfhe": tmeta}, tensors


def decode_switch_keys(meta: dict, tensors: dict, ring_log_n: int, device) -> SwitchKeys:
    """The SwitchKeys of a loaded context of ring degree 2^ring_log_n.
    Raises SerializationError for a malformed or altered entry."""
    try:
        c = dict(meta["config"])
        config = SwitchConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})
        params = tfhe_params(config)
    except (TypeError, KeyError, ValueError, FHEError) as e:
        raise SerializationError(f"load: malformed switching configuration {meta.get('config')!r}") from e
    tt = {k[len(PREFIX) + 5:]: v for k, v in tensors.items() if k.startswith(f"{PREFIX}tfhe.")}
    tctx = _tfhe_io.decode(meta["tfhe"], tt, device=device)
    if tctx.params != params or tctx.has_secret_key:
        raise SerializationError("load: the switching keys' TFHE set does not match their configuration")
    n, nt = 1 << ring_log_n, params.N
    if nt >= n or n % nt:
        raise SerializationError(f"load: a TFHE ring of {nt} does not fit the CKKS ring of {n}")

    def key(name, base_level, size):
        t = tensors.get(PREFIX + name)
        shape = (base_level[1], 2, 2, size)
        if t is None or tuple(t.shape) != shape or t.dtype != torch.int32:
            raise SerializationError(f"load: switching key {name} missing or not {shape} int32")
        q = torch.tensor(params.moduli, dtype=torch.int32, device=t.device).view(2, 1)
        if bool(((t < 0) | (t >= q)).any()):
            raise SerializationError(f"load: switching key {name} holds residues outside [0, q_i): the file was "
                                     "altered")
        return GlweKeyswitchKey(t.to(device).contiguous(), base_level[0], base_level[1])

    packing = {g: key(f"pack.{g}", config.packing, nt) for g in packing_elements(nt)}
    return SwitchKeys(config, tctx, TFHERing(ring_log_n, params.moduli, device), key("to_lwe", config.to_lwe, n),
                      key("to_ckks", config.to_ckks, n), packing)
