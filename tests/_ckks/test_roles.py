"""The scheme context's roles, as SEAL's: KeyGenerator makes keys into the context, Encryptor
and Decryptor encrypt and decrypt with them; the context delegates to them."""
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import CKKSContext, Decryptor, Encryptor, KeyGenerator, galois_element


def scheme_ctx(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        return CKKSContext(fhe.ckks.preset("toy-n10"), device)


def _values(n):
    return torch.complex(torch.rand(n, dtype=torch.float64) * 2 - 1, torch.rand(n, dtype=torch.float64) * 2 - 1)


def test_roles_round_trip(device, assert_close):
    ctx = scheme_ctx(device)
    assert ctx.secret_key is None
    with pytest.raises(fhe.MissingKeyError, match="keygen"):
        Encryptor(ctx).encrypt(ctx.encode(_values(8), slots=8))
    KeyGenerator(ctx).generate(rotations=[3], power_of_two_rotations=False)
    assert ctx.secret_key is not None and ctx.public_key is not None and ctx.relin_key is not None
    assert set(ctx.galois_keys) == {galois_element(3, ctx.n), 2 * ctx.n - 1}
    for level in (0, ctx.max_level):
        x = _values(16)
        ct = Encryptor(ctx).encrypt(ctx.encode(x, level=level, slots=16))
        assert ct.level == level and tuple(ct.data.shape) == (2, len(ctx.params.limbs(level)), ctx.n)
        assert_close(Decryptor(ctx).decrypt(ct), x, 1e-6, f"Encryptor -> Decryptor at level {level}")
        assert_close(ctx.decrypt_vector(ctx.encrypt_vector(x, level=level, slots=16)), x, 1e-6, "the context's")


def test_public_context_encrypts_with_the_public_key_only(device, assert_close):
    client = scheme_ctx(device)
    KeyGenerator(client).generate()
    server = client.public()
    x = _values(32)
    ct = Encryptor(server).encrypt(server.encode(x, slots=32))
    assert_close(Decryptor(client).decrypt(ct), x, 1e-6, "public-key encryption")
    with pytest.raises(fhe.ContextError, match="no secret key"):
        Decryptor(server).decrypt(ct)
    with pytest.raises(fhe.ContextError, match="public context"):
        KeyGenerator(server).generate()
