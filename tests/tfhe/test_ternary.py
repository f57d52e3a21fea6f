"""Ternary secrets (secret_distribution="ternary", docs/tfhe.md "Ternary secrets") end to end on
the CPU at toy-tfhe-4bit-ternary: the context makes ternary keys and a bootstrapping key of 2n
GGSWs; every LUT exhaustively over the 4-bit message space (random tables, fresh encryptions)
with the NTT and the Fourier blind rotation; many-LUT; radix integers; save / load with and
without the secrets; pickling a public context carries no secret; a binary file's check refuses
a -1 and a ternary file's a 2."""
import dataclasses
import functools
import io
import pickle
import random
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch.tensor.serialization import read_payload, write_payload

TERNARY = "toy-tfhe-4bit-ternary"


@functools.lru_cache(maxsize=None)
def context(rotation: str = "fft", message_bits: int | None = None) -> fhe.tfhe.Context:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.tfhe.preset(TERNARY)
        if rotation != p.blind_rotation:
            p = fhe.tfhe.make_params(dataclasses.replace(p.literal(), blind_rotation=rotation,
                                                         name=f"{TERNARY}-{rotation}"), allow_insecure=True)
        if message_bits is not None:
            p = p.with_message_bits(message_bits, max_noise_level=4)
        return fhe.tfhe.Context(p).keygen()


def test_context_makes_ternary_keys():
    ctx = context()
    p = ctx.params
    assert p.secret_distribution == "ternary" and p.security_bits == 0 and p.log2_p_fail <= -64
    for key in (ctx.lwe_key, ctx.glwe_key):
        assert key.distribution == "ternary" and set(key.data.unique().tolist()) <= {-1, 0, 1}
    assert set(ctx.glwe_key.data.unique().tolist()) == {-1, 0, 1}  # 1024 values (the draw: tests/_tfhe)
    assert ctx.bootstrap_key.ternary and ctx.bootstrap_key.data.shape[0] == 2 * p.n
    assert ctx.bootstrap_key.input_dimension == p.n
    assert ctx.keyswitch_key.input_dimension == p.k * p.N and ctx.keyswitch_key.output_dimension == p.n


@pytest.mark.parametrize("rotation", ["ntt", "fft"])
def test_random_luts_exhaustively(rotation):
    ctx = context(rotation)
    assert ctx.params.blind_rotation == rotation
    mm = ctx.params.message_modulus
    rnd = random.Random()
    x = torch.arange(mm).repeat(2)
    for _ in range(3):
        table = [rnd.randrange(mm) for _ in range(mm)]
        ex = ctx.encrypt(x)  # fresh encryptions every time
        ey = fhe.tfhe.LUT.from_table(torch.tensor(table))(ex)
        assert ctx.decrypt(ey).tolist() == [table[v] for v in x.tolist()], table
        # a second PBS on the first one's output (the key-switched, bootstrapped path again)
        ez = fhe.tfhe.LUT(lambda m: (3 * m + 1) % mm, bits=4)(ey)
        assert ctx.decrypt(ez).tolist() == [(3 * table[v] + 1) % mm for v in x.tolist()]


def test_many_luts_and_linear_ops():
    ctx = context()
    x = torch.randint(0, 8, (24,))
    ex = fhe.tfhe.LUT(lambda m: m % 8, bits=4)(ctx.encrypt(x))  # degree 7: room for 2 functions
    lo, hi = ctx.apply_many_luts(ex, [fhe.tfhe.LUT(lambda m: m // 2, bits=3), fhe.tfhe.LUT(lambda m: 7 - m, bits=3)])
    assert torch.equal(ctx.decrypt(lo), x // 2) and torch.equal(ctx.decrypt(hi), 7 - x)
    s = lo + hi  # degrees 3 + 7 = 10 < 16
    assert torch.equal(ctx.decrypt(s), x // 2 + 7 - x)


def test_radix_integers():
    ctx = context(message_bits=2)
    x = [random.randrange(256) for _ in range(6)] + [255, 0]
    y = [random.randrange(256) for _ in range(6)] + [1, 255]
    a, b = ctx.encrypt_int(torch.tensor(x), 8), ctx.encrypt_int(torch.tensor(y), 8)
    assert ctx.decrypt_int(a + b).tolist() == [(u + v) % 256 for u, v in zip(x, y)]
    assert ctx.decrypt((a < b)).tolist() == [int(u < v) for u, v in zip(x, y)]


def _bytes(obj, **kw) -> bytes:
    f = io.BytesIO()
    fhe.save(obj, f, **kw)
    return f.getvalue()


def _load(data: bytes, ctx=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.load(io.BytesIO(data), ctx)


def _secret_windows(ctx) -> list:
    """Windows of 16 coefficients of both ternary secrets as int64, int32 and int8 bytes."""
    out = []
    for key in (ctx.lwe_key.data, ctx.glwe_key.data.flatten()):
        for dtype in (torch.int64, torch.int32, torch.int8):
            raw = key.to(dtype).contiguous().numpy().tobytes()
            width = 16 * key.to(dtype).element_size()
            out += [raw[i: i + width] for i in range(0, len(raw) - width + 1, max(width, len(raw) // 8))]
    return out


@pytest.mark.parametrize("rotation", ["ntt", "fft"])
def test_save_load_and_pickle_without_secrets(rotation):
    ctx = context(rotation)
    x = torch.randint(0, 16, (20,))
    ex = ctx.encrypt(x)
    windows = _secret_windows(ctx)
    assert any(w in _bytes(ctx, secret_key=True) for w in windows), "the search must find secrets where they are"
    for data in (_bytes(ctx.public()), pickle.dumps(ctx.public())):
        assert not any(w in data for w in windows), "a public ternary context carries a secret"
    server = _load(_bytes(ctx.public()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        again = pickle.loads(pickle.dumps(ctx.public()))
    for s in (server, again):
        assert not s.has_secret_key and s.key_id == ctx.key_id and s.params == ctx.params
        assert s.bootstrap_key.ternary and torch.equal(s.bootstrap_key.data, ctx.bootstrap_key.data)
    ey = fhe.tfhe.LUT(lambda m: m * m % 16, bits=4)(_load(_bytes(ex), server))  # the server's PBS
    assert torch.equal(ctx.decrypt(_load(_bytes(ey), ctx)), x * x % 16)
    client = _load(_bytes(ctx, secret_key=True))
    assert client.lwe_key.distribution == client.glwe_key.distribution == "ternary"
    assert torch.equal(client.lwe_key.data, ctx.lwe_key.data) and torch.equal(client.glwe_key.data, ctx.glwe_key.data)
    assert torch.equal(client.decrypt(_load(_bytes(ey), client)), x * x % 16)


def _edit_tensor(data: bytes, name: str, value: int) -> bytes:
    meta, tensors = read_payload(io.BytesIO(data))
    t = tensors[name].clone()
    t.view(-1)[0] = value
    tensors[name] = t
    f = io.BytesIO()
    write_payload(meta, tensors, f)
    return f.getvalue()


def test_crafted_secret_values_are_refused():
    secret = _bytes(context(), secret_key=True)
    for name in ("lwe_key", "glwe_key"):
        with pytest.raises(fhe.SerializationError, match="not ternary"):
            _load(_edit_tensor(secret, name, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        binary = fhe.tfhe.Context("toy-tfhe-4bit").keygen()
    with pytest.raises(fhe.SerializationError, match="not binary"):
        _load(_edit_tensor(_bytes(binary, secret_key=True), "lwe_key", -1))
