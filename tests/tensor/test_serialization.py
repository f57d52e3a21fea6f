"""fhetorch.save / fhetorch.load: round trips (path and file object) and validation errors."""
import dataclasses
import io
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch.tensor import serialization
from fhetorch._ckks import galois_element
from fhetorch._ckks import evaluator as ev
from fhetorch._rlwe import PublicKey, SwitchingKey

B10 = 1.5e-6  # toy-n10 after a multiplication and a rotation (measured ~1.5e-7)
B10_ADD = 1e-7  # toy-n10 fresh (measured ~1e-8)
B10_PK = 5e-6  # toy-n10 public-key encryption, then a multiplication or rotation (measured ~5e-7)


def _rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


def _roundtrip(obj, where, tmp_path, ctx=None, *, device=None, **save_kw):
    """save then load through a path or a file object."""
    if where == "path":
        p = tmp_path / "obj.fhe"
        fhe.save(obj, p, **save_kw)
        return fhe.load(p, ctx, device=device)
    f = io.BytesIO()
    fhe.save(obj, f, **save_kw)
    f.seek(0)
    return fhe.load(f, ctx, device=device)


def _bytes(obj, **kw) -> bytes:
    f = io.BytesIO()
    fhe.save(obj, f, **kw)
    return f.getvalue()


def _load_bytes(data: bytes, *args):
    return fhe.load(io.BytesIO(data), *args)


def _quiet_load(data: bytes, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return _load_bytes(data, *args)


WHERE = ["path", "fileobj"]


# --- round trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", ["toy-n10", "toy-n12", "n16-rr40", "toy-n13-bts"])
def test_params_roundtrip(name, where, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.ckks.preset(name)
    if p.security_bits == 0:
        with pytest.warns(fhe.InsecureParametersWarning):
            q = _roundtrip(p, where, tmp_path)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", fhe.InsecureParametersWarning)
            q = _roundtrip(p, where, tmp_path)
    assert isinstance(q, fhe.ckks.Params)
    assert q == p and q.describe() == p.describe()
    assert q.level_scales == p.level_scales and q.security_bits == p.security_bits


def test_context_keeps_its_bootstrapping_configuration(device, tmp_path):
    """A context's BootstrapConfig travels with it, also one no preset names."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.ckks.preset("toy-n13-bts")
        cfg = dataclasses.replace(fhe.ckks.bootstrap_config("toy-n13-bts"), cos_degree=58, k_range=12)
        ctx = fhe.ckks.Context(params=p, device=device, bootstrap=cfg).keygen(power_of_two_rotations=False)
        server = _roundtrip(ctx.public(), "path", tmp_path, device=device)
    assert server.bootstrap_config == cfg != fhe.ckks.bootstrap_config("toy-n13-bts")


@pytest.mark.parametrize("where", WHERE)
def test_public_context_roundtrip(ctx_n10, where, tmp_path, assert_close):
    with pytest.warns(fhe.InsecureParametersWarning):
        server = _roundtrip(ctx_n10, where, tmp_path, device=ctx_n10.device)
    assert isinstance(server, fhe.Context)
    assert server.secret_key is None, "the secret key is written only when asked for"
    assert server.params == ctx_n10.params and server.key_id == ctx_n10.key_id
    assert server.device == ctx_n10.device
    assert torch.equal(server.public_key.data, ctx_n10.public_key.data)
    assert sorted(server.galois_keys) == sorted(ctx_n10.galois_keys)
    assert torch.equal(server.relin_key.key_q, ctx_n10.relin_key.key_q)
    # the server computes on the client's ciphertexts; the client decrypts the result
    x, y = _rand(100), _rand(100)
    ex = fhe.load(io.BytesIO(_bytes(ctx_n10.encrypt(x))), server)
    ez = torch.roll(ex * server.encrypt(y) - 0.5, 3)
    with pytest.raises(fhe.ContextError, match="decrypt"):
        server.decrypt(ez)
    back = _load_bytes(_bytes(ez), ctx_n10)
    assert_close(ctx_n10.decrypt(back), torch.roll(x * y - 0.5, 3), B10_PK, "server round trip")


def test_secret_key_not_in_file(ctx_n10):
    data = _bytes(ctx_n10)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    assert "secret_key" not in payload["tensors"]
    assert payload["meta"]["secret_key"] is False
    sk = ctx_n10.secret_key.s.cpu().contiguous().numpy().tobytes()
    assert sk[:256] not in data and sk[-256:] not in data


@pytest.mark.parametrize("where", WHERE)
def test_context_with_secret_key(ctx_n10, where, tmp_path, assert_close):
    with pytest.warns(fhe.InsecureParametersWarning):
        client = _roundtrip(ctx_n10, where, tmp_path, device=ctx_n10.device, secret_key=True)
    assert client.secret_key is not None
    assert torch.equal(client.secret_key.s, ctx_n10.secret_key.s)
    x = _rand(4, 32)  # 128 values: rotate() is cyclic over exactly these
    # the loaded context decrypts the original's ciphertexts and vice versa
    ex = ctx_n10.encrypt(x)
    assert_close(client.decrypt(_load_bytes(_bytes(ex), client)), x, B10_ADD, "loaded context decrypts")
    assert_close(ctx_n10.decrypt(_load_bytes(_bytes(client.encrypt(x)), ctx_n10)), x, B10_ADD, "original decrypts")
    assert_close(client.decrypt(client.encrypt(x).rotate(5)), torch.roll(x.flatten(), -5).reshape(4, 32), B10,
                 "loaded keys rotate")


def test_save_secret_key_of_public_context_raises(ctx_n10):
    with pytest.raises(fhe.SerializationError, match="secret"):
        _bytes(ctx_n10.public(), secret_key=True)
    with pytest.raises(fhe.SerializationError):
        _bytes(ctx_n10.secret_key)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_encrypted_tensor_roundtrip(ctx_n10, where, complex_, tmp_path, assert_close):
    x = _rand(4, 5) if not complex_ else torch.complex(_rand(4, 5), _rand(4, 5))
    ex = ctx_n10.encrypt(x) * 0.5
    ey = _roundtrip(ex, where, tmp_path, ctx_n10)
    assert isinstance(ey, fhe.EncryptedTensor)
    assert ey.shape == ex.shape and ey.level == ex.level and ey.scale == ex.scale
    assert ey.is_complex() == complex_ and ey.device == ex.device
    assert torch.equal(ey.ciphertext.data, ex.ciphertext.data)
    assert torch.equal(ctx_n10.decrypt(ey), ctx_n10.decrypt(ex))
    assert_close(ctx_n10.decrypt(ey), 0.5 * x, B10, "loaded EncryptedTensor")


def test_bare_ciphertext_is_not_saved(ctx_n10, tmp_path):
    """A Ciphertext does not know its context: only EncryptedTensors (which do) are saved."""
    ct = ctx_n10.encrypt_vector(_rand(ctx_n10.slots).to(torch.complex128))
    with pytest.raises(fhe.SerializationError, match="EncryptedTensor"):
        fhe.save(ct, tmp_path / "ct.fhe")


@pytest.mark.parametrize("where", WHERE)
def test_keys_roundtrip(ctx_n10, where, tmp_path):
    pk = _roundtrip(ctx_n10.public_key, where, tmp_path, ctx_n10)
    assert isinstance(pk, PublicKey) and torch.equal(pk.data, ctx_n10.public_key.data)
    for key in (ctx_n10.relin_key, next(iter(ctx_n10.galois_keys.values()))):
        k = _roundtrip(key, where, tmp_path, ctx_n10)
        assert isinstance(k, SwitchingKey)
        assert torch.equal(k.key_q, key.key_q) and torch.equal(k.key_p, key.key_p)


def test_loaded_keys_work(ctx_n10, device, assert_close):
    """A context without keys, given the loaded public key and a loaded rotation key, encrypts and rotates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        bare = fhe.ckks.Context("toy-n10", device)
    bare.public_key = _load_bytes(_bytes(ctx_n10.public_key), ctx_n10)
    g = galois_element(5, ctx_n10.n)
    bare.galois_keys = {g: _load_bytes(_bytes(ctx_n10.galois_keys[g]), ctx_n10)}
    x = _rand(ctx_n10.slots).to(torch.complex128)
    ct = ev.rotate(bare, bare.encrypt_vector(x), 5)
    assert_close(ctx_n10.decrypt_vector(ct), torch.roll(x, -5), B10_PK, "public key and rotation key from files")


# --- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("what", ["params", "context", "encrypted_tensor"])
@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.999])
def test_truncated_file(ctx_n10, what, keep):
    obj = {"params": ctx_n10.params, "context": ctx_n10, "encrypted_tensor": ctx_n10.encrypt(_rand(10))}[what]
    data = _bytes(obj)
    with pytest.raises(fhe.SerializationError):
        _quiet_load(data[: int(len(data) * keep)], ctx_n10)


def _flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x01
    return bytes(b)


def test_flipped_byte_in_tensor_data(ctx_n10):
    ex = ctx_n10.encrypt(_rand(10))
    data = _bytes(ex)
    raw = ex.ciphertext.data.cpu().contiguous().numpy().tobytes()
    for off in (0, len(raw) // 2, len(raw) - 64):
        at = data.find(raw[off:off + 64])
        assert at >= 0
        with pytest.raises(fhe.SerializationError, match="load"):
            _load_bytes(_flip(data, at + 5), ctx_n10)


def test_flipped_byte_in_key(ctx_n10):
    data = _bytes(ctx_n10)
    raw = ctx_n10.relin_key.key_q.cpu().contiguous().numpy().tobytes()
    at = data.find(raw[1000:1064])
    assert at >= 0
    with pytest.raises(fhe.SerializationError):
        _quiet_load(_flip(data, at + 7))


def test_flipped_byte_in_metadata(ctx_n10):
    ex = ctx_n10.encrypt(_rand(10))
    data = _bytes(ex)
    at = data.find(ctx_n10.key_id.encode())
    assert at >= 0
    with pytest.raises(fhe.SerializationError):
        _load_bytes(_flip(data, at + 2), ctx_n10)


@pytest.mark.parametrize("key", [b"\x04\x00\x00\x00meta", b"\x07\x00\x00\x00tensors"], ids=["meta", "tensors"])
def test_flipped_byte_in_payload_keys(ctx_n10, key):
    data = _bytes(ctx_n10.encrypt(_rand(10)))
    at = data.find(key)
    assert at >= 0
    with pytest.raises(fhe.SerializationError):
        _load_bytes(_flip(data, at + 5), ctx_n10)


@pytest.mark.parametrize("frac", [0.05, 0.2, 0.4, 0.6, 0.8, 0.95])
def test_flipped_byte_anywhere(ctx_n10, frac):
    """Any change of the file either leaves what it holds intact or raises SerializationError."""
    x = _rand(10)
    ex = ctx_n10.encrypt(x)
    data = _bytes(ex)
    try:
        ey = _load_bytes(_flip(data, int(len(data) * frac)), ctx_n10)
    except fhe.SerializationError:
        return
    assert torch.equal(ey.ciphertext.data, ex.ciphertext.data) and ey.shape == ex.shape


def test_not_an_fhetorch_file(tmp_path):
    p = tmp_path / "x.pt"
    torch.save({"a": torch.zeros(3)}, p)
    with pytest.raises(fhe.SerializationError):
        fhe.load(p)
    p.write_bytes(b"not a torch file at all")
    with pytest.raises(fhe.SerializationError):
        fhe.load(p)


def test_encrypted_tensor_into_context_with_other_keys(ctx_n10, make_context):
    other = make_context("toy-n10", fresh=True, power_of_two_rotations=False, conjugation=False)
    data = _bytes(ctx_n10.encrypt(_rand(10)))
    with pytest.raises(fhe.SerializationError, match="other keys"):
        _load_bytes(data, other)


def test_encrypted_tensor_into_context_with_other_parameters(ctx_n10, ctx_n12):
    data = _bytes(ctx_n10.encrypt(_rand(10)))
    with pytest.raises(fhe.SerializationError, match="parameters"):
        _load_bytes(data, ctx_n12)


def test_keys_into_context_with_other_parameters(ctx_n10, ctx_n12):
    for key in (ctx_n10.public_key, ctx_n10.relin_key):
        with pytest.raises(fhe.SerializationError):
            _load_bytes(_bytes(key), ctx_n12)


@pytest.mark.parametrize("what", ["encrypted_tensor", "public_key", "switching_key"])
def test_load_without_context(ctx_n10, what):
    obj = {"encrypted_tensor": ctx_n10.encrypt(_rand(8)), "public_key": ctx_n10.public_key,
           "switching_key": ctx_n10.relin_key}[what]
    with pytest.raises(fhe.SerializationError, match="context"):
        _load_bytes(_bytes(obj))


def test_save_unsupported_object():
    with pytest.raises(fhe.SerializationError, match="save"):
        _bytes(torch.zeros(3))


# --- several ciphertexts and layouts ---------------------------------------------------------
def test_tensor_of_several_ciphertexts_roundtrip(ctx_n10, assert_close):
    x = _rand(3, 500)  # 1500 values: three ciphertexts of 512 slots
    ex = ctx_n10.encrypt(x) * 0.5
    ey = _load_bytes(_bytes(ex), ctx_n10)
    assert ey.multi and len(ey.ciphertexts) == 3 and ey.shape == ex.shape
    assert all(torch.equal(a.data, b.data) for a, b in zip(ey.ciphertexts, ex.ciphertexts))
    assert_close(ctx_n10.decrypt(ey), 0.5 * x, B10, "several ciphertexts from a file")


def test_image_layout_roundtrip(ctx_n10, assert_close):
    """A strided layer's output keeps its multiplexed layout through a file (it was dropped,
    and the loaded tensor decrypted to values in the wrong order)."""
    x = _rand(4, 8, 8)
    ey = torch.nn.functional.avg_pool2d(ctx_n10.encrypt(x), 2)
    ez = _load_bytes(_bytes(ey), ctx_n10)
    assert ez.layout == ey.layout and ez.layout.gap == 2
    assert_close(ctx_n10.decrypt(ez), torch.nn.functional.avg_pool2d(x, 2), B10, "image layout from a file")


# --- crafted files: fields altered, digest recomputed -----------------------------------------
def _tampered(data: bytes, edit, ctx=None) -> bytes:
    """The file with edit(ctx, meta, tensors) applied and its SHA-256 recomputed the way save
    computes it: what someone who knows the format can write."""
    payload = torch.load(io.BytesIO(data), weights_only=True)
    edit(ctx, payload["meta"], payload["tensors"])
    try:
        payload["digest"] = serialization._digest(payload["meta"], payload["tensors"])
    except RuntimeError:  # a sparse tensor has no digest; load must refuse it before asking
        payload["digest"] = ""
    f = io.BytesIO()
    torch.save(payload, f)
    return f.getvalue()


def _limb_prime(ctx, level, limb):
    return ctx.ring.primes[ctx.params.limbs(level)[limb]]


def _set(tensors, key, where, value):
    t = tensors[key].clone()
    t[where] = value
    tensors[key] = t


def _meta(**kw):
    return lambda ctx, meta, tensors: meta.update(kw)


def _residue(key, where, value):
    """Set one residue; value(ctx, meta) gives it (e.g. the prime of its limb)."""
    return lambda ctx, meta, tensors: _set(tensors, key, where, value(ctx, meta))


def _prime(limb, extra=0):
    return lambda ctx, meta: _limb_prime(ctx, meta["level"], limb) + extra


# edit(ctx, meta, tensors) of a 10-value tensor file (16 slots, level 7 of toy-n10)
CT_EDITS = {
    "residue=q": _residue("data", (0, 0, 7), _prime(0)),
    "residue>q": _residue("data", (1, -1, 3), _prime(-1, 1)),
    "residue=int32max": _residue("data", (1, 0, 0), lambda c, m: 2**31 - 1),
    "residue<0": _residue("data", (0, 0, 0), lambda c, m: -1),
    "level=-1": _meta(level=-1),
    "level>max": lambda ctx, meta, tensors: meta.update(level=ctx.max_level + 1),
    "level=float": lambda ctx, meta, tensors: meta.update(level=float(meta["level"])),
    "level=str": lambda ctx, meta, tensors: meta.update(level=str(meta["level"])),
    "scale=nan": _meta(scale=float("nan")),
    "scale=inf": _meta(scale=float("inf")),
    "scale=0": _meta(scale=0.0),
    "scale<0": _meta(scale=-(2.0**35)),
    "scale<1": _meta(scale=0.25),
    "scale>=Q": _meta(scale=1e300),
    "scale=str": _meta(scale="2^35"),
    "slots=3": _meta(slots=3),
    "slots=0": _meta(slots=0),
    "slots<0": _meta(slots=-16),
    "slots=N": lambda ctx, meta, tensors: meta.update(slots=ctx.n),
    "slots=float": _meta(slots=16.0),
    "shape>slots": _meta(shape=[17]),
    "shape=0": _meta(shape=[0]),
    "shape<0": _meta(shape=[-2, -5]),
    "shape=float": _meta(shape=[2.5, 4]),
    "shape=str": _meta(shape="10"),
    "shape=huge": _meta(shape=[2**40]),
    "complex=str": _meta(complex="yes"),
    "complex=int": _meta(complex=1),
    "layout=str": _meta(layout="nn"),
    "layout=grid": _meta(layout={"layout": [[10], 1, [4, 4]]}),
    "layout=bigger": _meta(layout={"layout": [[4, 4, 4], 1, [4, 4]]}),
    "ciphertexts=extra": lambda ctx, meta, tensors: meta.update(ciphertexts=[
        {"level": meta["level"], "scale": meta["scale"], "slots": 16}] * 2),
    "data=int64": lambda ctx, meta, tensors: tensors.update(data=tensors["data"].to(torch.int64)),
    "data=sparse": lambda ctx, meta, tensors: tensors.update(data=tensors["data"].to_sparse()),
}


@pytest.fixture(scope="module")
def tensor_file(ctx_n10):
    """A 10-value tensor (16 slots) after one multiplication, as a file."""
    ex = ctx_n10.encrypt(_rand(10)) * 0.5
    assert ex.slots == 16
    return ex, _bytes(ex)


def test_tamper_helper_keeps_a_valid_file(ctx_n10, tensor_file):
    """The helper alone (no edit) gives a file that loads: the tests below fail on their edit."""
    ex, data = tensor_file
    ey = _load_bytes(_tampered(data, lambda c, m, t: None), ctx_n10)
    assert torch.equal(ctx_n10.decrypt(ey), ctx_n10.decrypt(ex))


@pytest.mark.parametrize("edit", sorted(CT_EDITS))
def test_crafted_tensor_file(ctx_n10, tensor_file, edit):
    _, data = tensor_file
    with pytest.raises(fhe.SerializationError, match="load"):
        _load_bytes(_tampered(data, CT_EDITS[edit], ctx_n10), ctx_n10)


def test_crafted_file_of_several_ciphertexts(ctx_n10):
    ex = ctx_n10.encrypt(_rand(1300))  # three ciphertexts
    data = _bytes(ex)

    def drop_last(ctx, meta, tensors):  # 1300 values in two ciphertexts of 512 slots
        meta["ciphertexts"] = meta["ciphertexts"][:2]
        del tensors["data.2"]

    def sparse_chunk(ctx, meta, tensors):
        meta["ciphertexts"][1]["slots"] = 256

    q = _limb_prime(ctx_n10, ex.level, 0)
    for edit in (drop_last, sparse_chunk, lambda c, m, t: _set(t, "data.2", (0, 0, 5), q),
                 lambda c, m, t: m["ciphertexts"][2].update(scale=float("nan"))):
        with pytest.raises(fhe.SerializationError, match="load"):
            _load_bytes(_tampered(data, edit), ctx_n10)


@pytest.fixture(scope="module")
def keyed_file(make_context):
    """A toy-n10 context with a rotation key and the encapsulation keys, saved with its secret key."""
    ctx = make_context("toy-n10", rotations=(3,), fresh=True, power_of_two_rotations=False, conjugation=False,
                       encapsulation_weight=16)
    return ctx, _bytes(ctx, secret_key=True)


def _rename_galois(new):
    """The rotation key of step 3 filed under another Galois element `new(ctx)`."""
    def edit(ctx, meta, tensors):
        g, name = galois_element(3, ctx.n), new(ctx)
        meta["galois"] = [name]
        for part in ("q", "p"):
            tensors[f"galois.{name}.{part}"] = tensors.pop(f"galois.{g}.{part}")
    return edit


def _key_residue(key, where, value):
    """Set one residue of a key; value(ctx) gives it."""
    return lambda ctx, meta, tensors: _set(tensors, key if isinstance(key, str) else key(ctx), where, value(ctx))


def _q0(extra=0):
    return lambda ctx: ctx.ring.primes[0] + extra


def _p0(extra=0):
    return lambda ctx: ctx.params.special_primes[0] + extra


def _int32max(ctx):
    return 2**31 - 1


def _galois3(part):
    return lambda ctx: f"galois.{galois_element(3, ctx.n)}.{part}"


# edit(ctx, meta, tensors) of a toy-n10 context file (rotation key 3, encapsulation keys, secret key)
KEY_EDITS = {
    "public_key>q": _key_residue("public_key", (1, 0, 9), _q0()),
    "public_key<0": _key_residue("public_key", (0, 2, 9), lambda ctx: -7),
    "relin.q>q": _key_residue("relin.q", (0, 1, 0, 4), _q0(1)),
    "relin.p>p": _key_residue("relin.p", (0, 0, 0, 4), _p0()),
    "galois.q>q": _key_residue(_galois3("q"), (0, 0, 0, 0), _int32max),
    "galois.p<0": _key_residue(_galois3("p"), (0, 1, 0, 0), lambda ctx: -1),
    "galois=even": _rename_galois(lambda ctx: galois_element(3, ctx.n) + 1),
    "galois=0": _rename_galois(lambda ctx: 0),
    "galois>2N": _rename_galois(lambda ctx: 2 * ctx.n + 1),
    "galois=str": _rename_galois(lambda ctx: str(galois_element(3, ctx.n))),
    "galois=dup": lambda ctx, meta, tensors: meta.update(galois=meta["galois"] * 2),
    "enc.sparse>q": _key_residue("enc.sparse.q", (0, 0, -1, 1), _int32max),
    "enc.dense>p": _key_residue("enc.dense.p", (0, 1, 0, 1), _p0(3)),
    "enc.weight=0": lambda ctx, meta, tensors: meta["encapsulation"].update(weight=0),
    "enc.weight>N": lambda ctx, meta, tensors: meta["encapsulation"].update(weight=ctx.n + 1),
    "enc.special": lambda ctx, meta, tensors: meta["encapsulation"].update(special=[0, 3]),
    "secret_key>q": _key_residue("secret_key", (-1, 5), _int32max),
    "secret_key<0": _key_residue("secret_key", (0, 5), lambda ctx: -1),
    "secret_flag=str": _meta(secret_key="yes"),
    "key_id=int": _meta(key_id=12345),
}


@pytest.mark.parametrize("edit", sorted(KEY_EDITS))
def test_crafted_context_file(keyed_file, edit):
    ctx, data = keyed_file
    with pytest.raises(fhe.SerializationError, match="load"):
        _quiet_load(_tampered(data, KEY_EDITS[edit], ctx))


def test_crafted_context_helper_keeps_a_valid_file(keyed_file, assert_close):
    ctx, data = keyed_file
    back = _quiet_load(_tampered(data, lambda c, m, t: None))
    x = _rand(64)
    assert_close(back.decrypt(ctx.encrypt(x).rotate(3)), torch.roll(x, -3), B10, "untampered context file")


@pytest.mark.parametrize("what", ["public_key", "switching_key"])
def test_crafted_key_file(ctx_n10, what):
    key = ctx_n10.public_key if what == "public_key" else ctx_n10.relin_key
    name = "data" if what == "public_key" else "q"
    q0 = ctx_n10.ring.primes[0]
    data = _bytes(key)
    assert isinstance(_load_bytes(_tampered(data, lambda c, m, t: None), ctx_n10), type(key))
    for value in (q0, 2**31 - 1, -1):
        with pytest.raises(fhe.SerializationError, match="residues"):
            _load_bytes(_tampered(data, lambda c, m, t: _set(t, name, (0,) * t[name].dim(), value)), ctx_n10)
