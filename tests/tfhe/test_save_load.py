"""fhe.save / fhe.load of TFHE objects: round trips (the server context, LWETensors with their
degree and noise level, the client context when its secret keys are asked for by name,
parameters), and every way a file can be wrong: another context, missing context, other
parameters or keys, crafted fields with a valid digest, corrupted or truncated bytes. A file
never yields a wrong result: it loads exactly, or raises SerializationError."""
import dataclasses
import functools
import io
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch.tensor.serialization import read_payload, write_payload


@functools.lru_cache(maxsize=None)
def context(name: str = "toy-tfhe-4bit", blind_rotation: str | None = None) -> fhe.tfhe.Context:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.tfhe.preset(name)
        if blind_rotation is not None:
            p = fhe.tfhe.make_params(dataclasses.replace(p.literal(), name=f"{name}-{blind_rotation}",
                                                         blind_rotation=blind_rotation), allow_insecure=True)
        return fhe.tfhe.Context(p).keygen()


def _bytes(obj, **kw) -> bytes:
    f = io.BytesIO()
    fhe.save(obj, f, **kw)
    return f.getvalue()


def _load(data: bytes, ctx=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.load(io.BytesIO(data), ctx, **kw)


def _crafted(data: bytes, edit) -> bytes:
    """The file with edit(meta, tensors) applied and a valid digest (what an attacker can write)."""
    meta, tensors = read_payload(io.BytesIO(data))
    edit(meta, tensors)
    f = io.BytesIO()
    write_payload(meta, tensors, f)
    return f.getvalue()


def test_the_issue_example(tmp_path):
    """server = tctx.public(); fhe.save(ex, path); fhe.load(path, server), then back to the client."""
    tctx = context()
    x = torch.randint(0, 16, (50,))
    ex = tctx.encrypt(x)
    fhe.save(tctx.public(), tmp_path / "server.pt")
    fhe.save(ex, tmp_path / "x.pt")
    with pytest.warns(fhe.InsecureParametersWarning, match="not 128-bit secure"):
        server = fhe.load(tmp_path / "server.pt")
    assert not server.has_secret_key and server.key_id == tctx.key_id and server.params == tctx.params
    assert torch.equal(server.bootstrap_key.data, tctx.bootstrap_key.data)
    assert torch.equal(server.keyswitch_key.data, tctx.keyswitch_key.data)
    ex_server = fhe.load(tmp_path / "x.pt", server)
    assert ex_server.context is server and torch.equal(ex_server.data, ex.data)
    ey = fhe.tfhe.LUT(lambda m: (3 * m + 1) % 16, bits=4)(ex_server)
    fhe.save(ey, tmp_path / "y.pt")
    back = fhe.load(tmp_path / "y.pt", tctx)
    assert torch.equal(tctx.decrypt(back), (3 * x + 1) % 16)
    assert tctx.decrypt(ey).tolist() == ((3 * x + 1) % 16).tolist()  # the same keys: the tensors mix


@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3)])
def test_tensor_round_trip_keeps_degree_and_noise_level(shape):
    tctx = context()
    x = torch.randint(0, 16, shape)
    small = fhe.tfhe.LUT(lambda m: m % 4, bits=4)(tctx.encrypt(x))
    ez = small * 2 + 1  # degree 7, noise level 4
    back = _load(_bytes(ez), tctx)
    assert (back.shape, back.degree, back.noise_level) == (ez.shape, 7, 4)
    assert torch.equal(back.data, ez.data) and back.data.dtype == torch.int64
    assert torch.equal(tctx.decrypt(back), 2 * (x % 4) + 1)
    with pytest.raises(fhe.MessageOverflowError):
        back * 2  # the loaded tensor's bounds still guard the message space


def test_client_context_with_its_secret_keys():
    tctx = context()
    x = torch.randint(0, 16, (20,))
    ex = tctx.encrypt(x)
    client = _load(_bytes(tctx, secret_key=True))
    assert client.has_secret_key and client.key_id == tctx.key_id
    assert torch.equal(client.glwe_key.data, tctx.glwe_key.data) and torch.equal(client.lwe_key.data, tctx.lwe_key.data)
    assert torch.equal(client.decrypt(_load(_bytes(ex), client)), x)
    assert torch.equal(tctx.decrypt(client.encrypt(x)), x)
    assert not torch.equal(client.sampler.key, tctx.sampler.key), "a loaded context draws fresh randomness"
    public = _load(_bytes(tctx))  # without secret_key=True: the evaluation keys only
    assert not public.has_secret_key and public.lwe_key is None
    with pytest.raises(fhe.SerializationError, match="no secret key"):
        _bytes(tctx.public(), secret_key=True)


def test_params_round_trip_and_device():
    tctx = context()
    assert _load(_bytes(tctx.params)) == tctx.params
    server = _load(_bytes(tctx.public()), device="cpu")
    assert server.device == torch.device("cpu")


# --- wrong context, missing key -------------------------------------------------------------
def test_a_tensor_needs_its_own_context():
    tctx = context()
    data = _bytes(tctx.encrypt(torch.tensor([1, 2])))
    with pytest.raises(fhe.SerializationError, match="needs its tfhe.Context"):
        _load(data)
    with pytest.raises(fhe.SerializationError, match="other parameters"):
        _load(data, context("toy-tfhe-2bit"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        stranger = fhe.tfhe.Context("toy-tfhe-4bit").keygen()  # same parameters, other keys
        ckks = fhe.ckks.Context("toy-n10")
    with pytest.raises(fhe.SerializationError, match="other keys"):
        _load(data, stranger)
    with pytest.raises(fhe.SerializationError, match="needs its tfhe.Context"):
        _load(data, ckks)
    with pytest.raises(fhe.SerializationError, match="CKKS content .* not a tfhe.Context"):
        _load(_bytes(ckks.params), tctx)
    with pytest.raises(fhe.SerializationError, match="load it without one"):
        _load(_bytes(tctx.public()), tctx)


def test_what_cannot_be_saved():
    tctx = context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        bare = fhe.tfhe.Context("toy-tfhe-4bit")
    with pytest.raises(fhe.SerializationError, match="keygen"):
        _bytes(bare)
    with pytest.raises(fhe.SerializationError, match="secret_key=True"):
        _bytes(tctx.glwe_key)
    with pytest.raises(fhe.SerializationError, match="save the tfhe.Context"):
        _bytes(tctx.bootstrap_key)


# --- crafted, corrupted, truncated ----------------------------------------------------------
def _set(key, value):
    def edit(meta, tensors):
        meta[key] = value
    return edit


def _tensor_edit(name, fn):
    def edit(meta, tensors):
        tensors[name] = fn(tensors[name].clone())
    return edit


def _poke(t, value):
    t.view(-1)[t.numel() // 2] = value
    return t


def _poke_prime(t, prime: int, value):
    """Set one residue of prime `prime` (axis -2) of t."""
    t[(0,) * (t.dim() - 2) + (prime, 3)] = value
    return t


Q0, Q1 = fhe.tfhe.preset("tfhe-4bit").moduli

TENSOR_CRAFTS = {
    "residue = q0": (_tensor_edit("data", lambda t: _poke(t, Q0)), "residues outside"),
    "negative residue": (_tensor_edit("data", lambda t: _poke(t, -1)), "residues outside"),
    "truncated ciphertext": (_tensor_edit("data", lambda t: t[..., :-1]), "shape"),
    "int64 data": (_tensor_edit("data", lambda t: t.to(torch.int64)), "malformed|corrupted"),
    "shape disagrees": (_set("shape", [5]), "shape"),
    "negative dimension": (_set("shape", [-7]), "shape"),
    "degree = message space": (_set("degree", 16), "degree"),
    "negative degree": (_set("degree", -1), "degree"),
    "float degree": (_set("degree", 3.0), "degree"),
    "bool degree": (_set("degree", True), "degree"),
    "noise level above nu^2": (_set("noise_level", 5), "noise level"),
    "no key id": (_set("key_id", None), "other keys"),
    "other key id": (_set("key_id", "0123456789abcdef"), "other keys"),
    "extra tensor": (lambda m, t: t.update(extra=torch.zeros(1, dtype=torch.int32)), "expected"),
    "params edited": (lambda m, t: m["params"].update(lwe_noise_std=m["params"]["lwe_noise_std"] * 2),
                      "parameters"),
    "delta edited": (lambda m, t: m["params"].update(delta=m["params"]["delta"] + 1), "parameters|delta"),
    "unknown kind": (_set("kind", "tfhe_polynomial"), "unknown"),
}


@pytest.mark.parametrize("craft", sorted(TENSOR_CRAFTS))
def test_crafted_tensor_is_refused(craft):
    tctx = context()
    edit, words = TENSOR_CRAFTS[craft]
    data = _crafted(_bytes(tctx.encrypt(torch.arange(14).view(2, 7))), edit)
    with pytest.raises(fhe.SerializationError, match=words):
        _load(data, tctx)


def _bootstrap_key_edit(fn):
    return _tensor_edit("bootstrap_key", fn)


CONTEXT_CRAFTS = {
    # the Fourier key travels as its complex128 bits in int32 words: word 1 is the first value's high half
    "bootstrapping key not finite": (_bootstrap_key_edit(lambda t: _poke_word(t, 1, 0x7FF80000)), "not finite"),
    "bootstrapping key truncated": (_bootstrap_key_edit(lambda t: t[:-1]), "shape"),
    "key-switching key residue": (_tensor_edit("keyswitch_key", lambda t: _poke(t, Q0 + 5)), "residues outside"),
    "key-switching key missing": (lambda m, t: t.pop("keyswitch_key"), "expected"),
    "secret claimed, absent": (_set("secret_key", True), "expected"),
    "secret flag not a bool": (_set("secret_key", 1), "true or false"),
    "malformed key id": (_set("key_id", "../../etc"), "hex"),
    "parameters not a dict": (_set("params", "toy-tfhe-4bit"), "malformed"),
    "unknown field": (lambda m, t: m["params"].update(colour="red"), "parameters"),
    "multi-bit parameters": (lambda m, t: m["params"].update(grouping_factor=2), "parameters|multi-bit"),
}


def _poke_word(t, index, value):
    t.view(-1)[index] = value
    return t


def test_crafted_residue_in_an_ntt_bootstrapping_key_is_refused():
    """A multi-bit (mod q, NTT form) bootstrapping key with a residue equal to its prime."""
    data = _crafted(_bytes(context("toy-tfhe-4bit-mb2", "ntt").public()),
                    _bootstrap_key_edit(lambda t: _poke_prime(t, 1, Q1)))
    with pytest.raises(fhe.SerializationError, match="residues outside"):
        _load(data)


@pytest.mark.parametrize("craft", sorted(CONTEXT_CRAFTS))
def test_crafted_context_is_refused(craft):
    edit, words = CONTEXT_CRAFTS[craft]
    data = _crafted(_bytes(context().public()), edit)
    with pytest.raises(fhe.SerializationError, match=words):
        _load(data)


def test_crafted_secret_keys_are_refused():
    secret = _bytes(context(), secret_key=True)
    for name, shape_cut in (("lwe_key", False), ("glwe_key", False), ("glwe_key", True)):
        fn = (lambda t: t[..., :-1]) if shape_cut else (lambda t: _poke(t, 2))
        with pytest.raises(fhe.SerializationError, match="shape" if shape_cut else "not binary"):
            _load(_crafted(secret, _tensor_edit(name, fn)))


def test_corrupted_or_truncated_bytes_are_refused():
    data = _bytes(context().encrypt(torch.arange(16)))
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    for bad in (bytes(flipped), data[: len(data) // 2], b"", b"not a torch file"):
        with pytest.raises(fhe.SerializationError):
            _load(bad, context())


class _Payload:
    """A pickled object whose unpickling would run code."""

    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_file_that_would_run_code_is_refused(capsys):
    f = io.BytesIO()
    torch.save({"magic": "fhetorch", "version": 2, "meta": {"kind": "tfhe_lwe_tensor", "x": _Payload()},
                "tensors": {}, "digest": ""}, f)
    with pytest.raises(fhe.SerializationError, match="not a readable"):
        _load(f.getvalue(), context())
    assert "must never run" not in capsys.readouterr().out
