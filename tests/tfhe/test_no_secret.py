"""No TFHE secret leaves the client by any route (docs/tfhe.md "Saving, loading, pickling"):
pickle, torch.save and copy.deepcopy of an LWETensor or of a public context carry neither
secret key (LWE or GLWE) nor a sampler's ChaCha20 key; a client context and bare secret keys
refuse to be pickled; a forked child draws its own TFHE randomness.

The search for the secret's bytes is shown able to fail: it finds them where they are (a file
saved with secret_key=True, a naive pickle of the key)."""
import copy
import copyreg
import gc
import io
import os
import pickle
import select
import warnings

import pytest
import torch

import fhetorch as fhe


def _fresh(name: str = "toy-tfhe-4bit") -> fhe.tfhe.Context:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return fhe.tfhe.Context(name).keygen()


@pytest.fixture(scope="module")
def tctx():
    return _fresh()


def _secrets(ctx) -> list:
    """Byte strings that must appear in nothing a client sends: windows of 16 coefficients of
    both secret keys as int64, int32 and uint8, at spread offsets, and the sampler's key."""
    out = []
    for key in (ctx.lwe_key.data, ctx.glwe_key.data.flatten()):
        for dtype in (torch.int64, torch.int32, torch.uint8):
            raw = key.to(dtype).contiguous().numpy().tobytes()
            width = 16 * key.to(dtype).element_size()
            step = max(width, (len(raw) - width) // 8)
            out += [raw[i: i + width] for i in range(0, len(raw) - width + 1, step)]
    return out + [ctx.sampler.key.numpy().tobytes()]


def _leaks(data: bytes, ctx) -> bool:
    return any(s in data for s in _secrets(ctx))


def _torch_save(obj) -> bytes:
    f = io.BytesIO()
    torch.save(obj, f)
    return f.getvalue()


def _torch_load(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)


ROUTES = {"pickle": (pickle.dumps, pickle.loads), "torch.save": (_torch_save, _torch_load)}


def test_the_search_finds_secrets_where_they_are(tctx):
    f = io.BytesIO()
    fhe.save(tctx, f, secret_key=True)
    assert _leaks(f.getvalue(), tctx)
    assert _leaks(pickle.dumps(tctx.glwe_key.data), tctx)
    assert _leaks(pickle.dumps(tctx.lwe_key.data.to(torch.int32)), tctx)


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("shape", [(), (40,), (3, 5)])
def test_pickled_tensor_holds_no_secret(tctx, route, shape):
    dumps, loads = ROUTES[route]
    x = torch.randint(0, 16, shape)
    ex = fhe.tfhe.LUT(lambda m: m // 2, bits=4)(tctx.encrypt(x))
    data = dumps(ex)
    assert not _leaks(data, tctx), f"{route} of an LWETensor carries key material"
    assert len(data) < 2 * ex.data.numel() * 8 + 20000, "the tensor carries its context"
    back = loads(data)
    assert isinstance(back, fhe.tfhe.LWETensor) and back.context.key_id == tctx.key_id
    assert (back.degree, back.noise_level) == (ex.degree, ex.noise_level) and torch.equal(back.data, ex.data)
    assert torch.equal(tctx.decrypt(back), x // 2)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_public_context_pickles_its_evaluation_keys_only(tctx, route):
    dumps, loads = ROUTES[route]
    pub = tctx.public()
    data = dumps(pub)
    assert not _leaks(data, tctx), f"{route} of a public context carries the client's key material"
    assert pub.sampler.key.numpy().tobytes() not in data, "the server's ChaCha20 key was pickled"
    with pytest.warns(fhe.InsecureParametersWarning):
        server = loads(data)
    assert not server.has_secret_key and server.lwe_key is None and server.key_id == tctx.key_id
    assert not torch.equal(server.sampler.key, pub.sampler.key), "an unpickled context must draw fresh randomness"
    x = torch.randint(0, 16, (12,))
    ey = fhe.tfhe.LUT(lambda m: 15 - m, bits=4)(pickle.loads(pickle.dumps(tctx.encrypt(x))))
    assert torch.equal(tctx.decrypt(server.apply_lut(tctx.encrypt(x), fhe.tfhe.LUT(lambda m: 15 - m, bits=4))),
                       15 - x)
    assert torch.equal(tctx.decrypt(ey), 15 - x)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_client_context_and_secret_keys_refuse_pickling(tctx, route):
    dumps, _ = ROUTES[route]
    with pytest.raises(fhe.SerializationError, match=r"tctx\.public\(\).*secret_key=True"):
        dumps(tctx)
    with pytest.raises(fhe.SerializationError, match="secret key"):
        dumps({"model": [tctx]})  # anywhere inside another object
    for key in (tctx.lwe_key, tctx.glwe_key, tctx.glwe_key.as_lwe_key()):
        with pytest.raises(fhe.SerializationError, match="never pickled"):
            dumps(key)


def test_deepcopy_carries_no_secret_and_no_generator(tctx):
    x = torch.randint(0, 16, (30,))
    ex = tctx.encrypt(x)
    ey = copy.deepcopy(ex)
    assert ey.context is tctx, "copying a tensor must not copy the keys"
    assert ey.data.data_ptr() != ex.data.data_ptr() and torch.equal(ey.data, ex.data)
    assert copy.copy(ex).context is tctx
    pub = tctx.public()
    twin = copy.deepcopy(pub)
    assert twin.lwe_key is None and twin.glwe_key is None and twin.key_id == tctx.key_id
    assert not torch.equal(twin.sampler.key, pub.sampler.key) and not torch.equal(twin.sampler.key, tctx.sampler.key)
    assert torch.equal(tctx.decrypt(twin.apply_lut(ex, fhe.tfhe.LUT(lambda m: m, bits=4))), x)
    # a client copy stays in the process with its keys, but never repeats the original's masks
    client = copy.deepcopy(tctx)
    assert not torch.equal(client.encrypt(x).data, tctx.encrypt(x).data)
    assert torch.equal(tctx.decrypt(client.encrypt(x)), x)


def test_an_orphan_tensor_does_not_unpickle():
    ctx = _fresh()
    data = pickle.dumps(ctx.encrypt(torch.tensor([1, 2, 3])))
    key_id = ctx.key_id
    del ctx
    gc.collect()
    with pytest.raises(fhe.SerializationError, match=f"no tfhe.Context.*{key_id}"):
        pickle.loads(data)


def test_unpickled_tensor_is_validated(tctx):
    rebuild, (meta, tensors) = copyreg.dispatch_table[fhe.tfhe.LWETensor](tctx.encrypt(torch.tensor([1, 2])))
    with pytest.raises(fhe.SerializationError, match="degree"):
        rebuild({**meta, "degree": 99}, tensors)
    with pytest.raises(fhe.SerializationError, match="residues"):
        rebuild(meta, {"data": tensors["data"] + 2 ** 31 - 1 - tensors["data"]})
    with pytest.raises(fhe.SerializationError, match="malformed"):
        rebuild({**meta, "kind": "encrypted_tensor"}, tensors)


# --- fork -------------------------------------------------------------------------------------
def _encrypt_in_child(ctx, x) -> bytes:
    """Fork; the child encrypts x and sends its ciphertext's bytes through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "wb") as f:
                f.write(ctx.encrypt(x).data.contiguous().numpy().tobytes())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        while True:
            ready, _, _ = select.select([f], [], [], 120)
            if not ready:
                os.kill(pid, 9)
                pytest.fail("the forked child did not answer in 120 s")
            chunk = f.read1(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed"
    return b"".join(chunks)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_encrypts_with_other_masks(tctx):
    x = torch.randint(0, 16, (64,))
    tctx.encrypt(x)  # the generator has been used before the fork
    child = _encrypt_in_child(tctx, x)
    mine = tctx.encrypt(x).data
    theirs = torch.frombuffer(bytearray(child), dtype=torch.int64).reshape(mine.shape)
    assert not torch.equal(mine[:, :-1], theirs[:, :-1]), "parent and child encrypted with the same masks"
    assert not torch.equal(mine[:, -1], theirs[:, -1])
    # and the child's ciphertexts are valid ones under the same keys
    assert torch.equal(tctx.decrypt(fhe.tfhe.LWETensor(tctx, theirs, 15)), x)
