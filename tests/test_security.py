"""No secret leaves the client by any route, weights load without running code, and a
forked process draws its own encryption randomness (docs/security.md).

1. pickle / torch.save / copy.deepcopy of what a server receives carry neither the secret
   key nor the sampler's ChaCha20 key; a client context refuses to be pickled.
2. Checkpoints and CIFAR batches whose unpickling would run code are refused, unrun.
3. After os.fork() parent and child encrypt with different masks.
"""
import copy
import copyreg
import gc
import io
import os
import pickle
import select
import warnings

import numpy as np
import pytest
import torch

import fhetorch as fhe
from fhetorch._ring import Sampler

B10_ADD = 1e-7  # toy-n10 fresh (measured ~1e-8)
B10_PK = 5e-6  # toy-n10 public-key encryption, then a multiplication (measured ~5e-7)


def _rand(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 2 - 1


def _fresh(device, **keygen_kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context("toy-n10", device)
    return ctx.keygen(**keygen_kw)


def _secrets(ctx) -> list:
    """Byte strings that must never appear in anything ctx sends: windows of the secret key's
    residues (64 bytes each, at spread offsets) and the sampler's 32-byte ChaCha20 key."""
    sk = ctx.secret_key.s.cpu().contiguous().numpy().tobytes()
    windows = [sk[i : i + 64] for i in range(0, len(sk) - 64, len(sk) // 16)]
    return windows + [ctx.sampler.key.cpu().numpy().tobytes()]


def _assert_no_secret(data: bytes, ctx, what: str):
    for s in _secrets(ctx):
        assert s not in data, f"{what}: the serialized bytes contain key material"


def _torch_save(obj) -> bytes:
    f = io.BytesIO()
    torch.save(obj, f)
    return f.getvalue()


def _torch_load(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)


ROUTES = {"pickle": (pickle.dumps, pickle.loads), "torch.save": (_torch_save, _torch_load)}


# --- 1. nothing secret in what a server receives ----------------------------------------------
@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("n", [10, 512, 1300], ids=["sparse", "full", "several"])
def test_pickled_tensor_holds_no_secret(ctx_n10, route, n, assert_close):
    dumps, loads = ROUTES[route]
    x = _rand(n)
    ex = ctx_n10.encrypt(x) * 0.5
    data = dumps(ex)
    _assert_no_secret(data, ctx_n10, f"{route} of an EncryptedTensor")
    assert len(data) < 4 * sum(ct.data.numel() * 4 for ct in ex.ciphertexts), "the tensor carries its context"
    back = loads(data)
    assert isinstance(back, fhe.EncryptedTensor) and back.shape == ex.shape and back.level == ex.level
    assert all(torch.equal(a.data, b.data) for a, b in zip(back.ciphertexts, ex.ciphertexts))
    assert_close(ctx_n10.decrypt(back), 0.5 * x, B10_ADD * 10, f"{route} round trip")


def test_deepcopy_of_tensor_shares_its_context(ctx_n10, assert_close):
    x = _rand(50)
    ex = ctx_n10.encrypt(x)
    ey = copy.deepcopy(ex)
    assert ey.ctx is ex.ctx, "copying a tensor must not copy the keys"
    assert ey.ciphertext.data.data_ptr() != ex.ciphertext.data.data_ptr()
    assert torch.equal(ey.ciphertext.data, ex.ciphertext.data)
    assert_close(ctx_n10.decrypt(ey), x, B10_ADD, "deepcopy")
    assert copy.copy(ex).ctx is ex.ctx


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_client_context_refuses_pickling(ctx_n10, route):
    dumps, _ = ROUTES[route]
    with pytest.raises(fhe.SerializationError, match=r"ctx\.public\(\).*secret_key=True"):
        dumps(ctx_n10)
    with pytest.raises(fhe.SerializationError, match="secret key"):
        dumps(ctx_n10.secret_key)
    with pytest.raises(fhe.SerializationError, match="secret key"):
        dumps({"model": [ctx_n10]})  # anywhere inside another object


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_public_context_pickles_its_public_keys(ctx_n10, route, assert_close):
    dumps, loads = ROUTES[route]
    pub = ctx_n10.public()
    data = dumps(pub)
    _assert_no_secret(data, ctx_n10, f"{route} of a public context")
    assert pub.sampler.key.cpu().numpy().tobytes() not in data, "the server's ChaCha20 key was pickled"
    with pytest.warns(fhe.InsecureParametersWarning):
        server = loads(data)
    assert server.secret_key is None and server.key_id == ctx_n10.key_id
    assert sorted(server.galois_keys) == sorted(ctx_n10.galois_keys)
    assert not torch.equal(server.sampler.key, pub.sampler.key), "an unpickled context must draw fresh randomness"
    x, y = _rand(64), _rand(64)
    ez = ctx_n10.encrypt(x) * server.encrypt(y)
    assert_close(ctx_n10.decrypt(ez), x * y, B10_PK, "unpickled public context")


def test_deepcopy_of_context_draws_fresh_randomness(ctx_n10, assert_close):
    """A copy sharing the original's ChaCha20 key and counter would encrypt with its masks."""
    x = _rand(ctx_n10.slots)
    twin = copy.deepcopy(ctx_n10)
    assert twin.secret_key is not None and twin.key_id == ctx_n10.key_id
    a, b = ctx_n10.encrypt(x).ciphertext.data, twin.encrypt(x).ciphertext.data
    assert not torch.equal(a[1], b[1]), "the copy repeats the original's mask"
    assert not torch.equal(a[0], b[0])
    assert_close(ctx_n10.decrypt(twin.encrypt(x)), x, B10_ADD, "copy encrypts under the same keys")


def test_tensor_travels_to_a_process_without_the_client(device, assert_close):
    """The server's process has only what was pickled: tensors tie to the public context
    unpickled first; without one they are refused; the client decrypts the result."""
    client = _fresh(device)
    x = _rand(100)
    pub_bytes, ex_bytes = pickle.dumps(client.public()), pickle.dumps(client.encrypt(x))
    key_file = io.BytesIO()
    fhe.save(client, key_file, secret_key=True)
    del client
    gc.collect()  # contexts hold reference cycles (their device copies)
    with pytest.raises(fhe.SerializationError, match="no context with this tensor's keys"):
        pickle.loads(ex_bytes)
    with pytest.warns(fhe.InsecureParametersWarning):
        server = pickle.loads(pub_bytes)
    ex = pickle.loads(ex_bytes)
    assert ex.ctx.secret_key is None and ex.ctx.key_id == server.key_id
    ez_bytes = pickle.dumps(torch.roll(ex * ex - 0.5, 3))
    del server, ex
    key_file.seek(0)
    with pytest.warns(fhe.InsecureParametersWarning):
        client = fhe.load(key_file, device=device)
    assert_close(client.decrypt(pickle.loads(ez_bytes)), torch.roll(x * x - 0.5, 3), B10_PK, "server round trip")


def test_unpickled_tensor_is_validated(ctx_n10):
    """Unpickling checks the fields like fhetorch.load (here: a residue >= q)."""
    ex = ctx_n10.encrypt(_rand(10))
    fn, (meta, tensors) = copyreg.dispatch_table[fhe.EncryptedTensor](ex)  # what pickle stores
    bad = tensors["data"].clone()
    bad[0, 0, 0] = ctx_n10.ring.primes[ctx_n10.params.limbs(ex.level)[0]]
    with pytest.raises(fhe.SerializationError, match="residues"):
        fn(meta, {**tensors, "data": bad})


# --- 2. weights without code ---------------------------------------------------------------------
class _Payload:
    """Unpickling this object writes a marker file: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def test_crafted_checkpoint_is_refused(tmp_path):
    from models.resnet20 import ResNet20, load_checkpoint

    marker, path = tmp_path / "marker", tmp_path / "evil.th"
    state = {f"module.{k}": v for k, v in ResNet20().state_dict().items()}
    torch.save({"state_dict": state, "best_prec1": _Payload(marker)}, path)
    with pytest.raises(fhe.SerializationError, match="refused without running it"):
        load_checkpoint(str(path))
    assert not marker.exists(), "the checkpoint's code ran"
    torch.save({"state_dict": state, "best_prec1": 91.0}, path)  # the same without the payload loads
    assert load_checkpoint(str(path))(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_crafted_digits_cache_is_refused(tmp_path, monkeypatch):
    import models.digits as digits

    marker, path = tmp_path / "marker", tmp_path / "resnet20_digits.pt"
    torch.save({"conv1.weight": _Payload(marker)}, path)
    monkeypatch.setattr(digits, "CACHE", str(path))
    with pytest.raises(fhe.SerializationError, match="refused without running it"):
        digits.trained_model()
    assert not marker.exists(), "the cached weights' code ran"


def _batch(path, n, rng, protocol=None, extra=None):
    d = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, n).tolist()}
    if extra is not None:
        d[b"extra"] = extra
    with open(path, "wb") as f:
        pickle.dump(d, f, protocol=protocol)
    return d


def test_crafted_cifar_batch_is_refused(tmp_path):
    from models.train_resnet20 import load_cifar, read_batch

    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    for protocol in (2, 4, 5):  # numpy arrays pickle differently per protocol
        d = _batch(tmp_path / "b", 5, rng, protocol)
        back = read_batch(str(tmp_path / "b"))
        assert np.array_equal(back[b"data"], d[b"data"]) and back[b"labels"] == d[b"labels"]
    marker = tmp_path / "marker"
    _batch(tmp_path / "data_batch_1", 4, rng)
    _batch(tmp_path / "test_batch", 4, rng, extra=_Payload(marker))
    with pytest.raises(fhe.SerializationError, match="refused without running it"):
        load_cifar(str(tmp_path))
    assert not marker.exists(), "the batch's code ran"


def test_real_checkpoint_loads():
    from models.resnet20 import cifar_data, load_checkpoint

    paths = cifar_data()
    if paths is None:
        pytest.skip("the akamaster checkpoint is absent (set FHETORCH_DATA)")
    model = load_checkpoint(paths[0])
    w = model.conv1.weight.detach()
    assert w.shape == (16, 3, 3, 3) and bool(torch.isfinite(w).all()) and float(w.abs().max()) > 0
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


# --- 3. fork safety ---------------------------------------------------------------------------
def _encrypt_in_child(ctx, x) -> bytes:
    """Fork; the child encrypts x and sends its ciphertext's bytes through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.close(r)
            data = ctx.encrypt(x).ciphertext.data.cpu().contiguous().numpy().tobytes()
            with os.fdopen(w, "wb") as f:
                f.write(data)
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
@pytest.mark.parametrize("who", ["client", "server"])
def test_forked_child_encrypts_with_other_masks(ctx_n10, who, assert_close):
    if ctx_n10.device.type != "cpu":
        pytest.skip("CUDA does not survive a fork")
    ctx = ctx_n10 if who == "client" else ctx_n10.public()
    x = _rand(ctx.slots)
    ctx.encrypt(x)  # the generator has been used before the fork
    child = _encrypt_in_child(ctx, x)
    ct = ctx.encrypt(x).ciphertext
    mine = ct.data.cpu().contiguous()
    theirs = torch.frombuffer(bytearray(child), dtype=torch.int32).reshape(mine.shape)
    assert not torch.equal(mine[1], theirs[1]), "parent and child encrypted with the same mask"
    assert not torch.equal(mine[0], theirs[0])
    # and each decrypts to x: the child's ciphertext is a valid one under the same keys
    other = fhe.EncryptedTensor(ctx_n10, ct.replace(data=theirs.to(ctx.device)), x.shape)
    assert_close(ctx_n10.decrypt(other), x, B10_PK, "the child's ciphertext")


def test_two_encryptions_in_one_process_differ(ctx_n10):
    x = _rand(ctx_n10.slots)
    for ctx in (ctx_n10, ctx_n10.public()):
        a, b = ctx.encrypt(x).ciphertext.data, ctx.encrypt(x).ciphertext.data
        assert not torch.equal(a[1], b[1]) and not torch.equal(a[0], b[0])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_sampler_gets_a_new_key():
    """Also a seeded (reproducible, test-only) sampler and its device copies."""
    s = Sampler(seed=int.from_bytes(os.urandom(4), "little"))
    copy_ = s.to("cpu")
    before = s.key.numpy().tobytes()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, s.key.numpy().tobytes() + copy_.key.numpy().tobytes())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    assert got[:32] != before, "the child kept the parent's ChaCha20 key"
    assert got[:32] == got[32:], "device copies share one key"
    assert s.key.numpy().tobytes() == before, "the parent's key is unchanged"
