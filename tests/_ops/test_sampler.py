"""ChaCha20 samplers (csrc/chacha.h): RFC 8439 block function, bit-exact models, statistics.

A pure-Python ChaCha20 block (checked against RFC 8439's own test vectors) models the
kernels word for word: element e of a draw reads block(key, counter, nonce = (stream_lo,
stream_hi, round ^ (hi bits of e) << 8)) at the word and round that csrc/chacha.h states.
"""
import math
import random
import struct

import pytest
import torch

from fhetorch import _ops
from fhetorch._ring import Ring, Sampler, largest_ntt_primes, ntt_primes
from .reference import mod_table, s32

M32 = 0xFFFFFFFF


def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def quarter_round(s, a, b, c, d):
    s[a] = (s[a] + s[b]) & M32; s[d] = rotl(s[d] ^ s[a], 16)  # noqa: E702
    s[c] = (s[c] + s[d]) & M32; s[b] = rotl(s[b] ^ s[c], 12)  # noqa: E702
    s[a] = (s[a] + s[b]) & M32; s[d] = rotl(s[d] ^ s[a], 8)  # noqa: E702
    s[c] = (s[c] + s[d]) & M32; s[b] = rotl(s[b] ^ s[c], 7)  # noqa: E702


def chacha20_block(key_words, counter, n0, n1, n2):
    """RFC 8439 section 2.3: 16 output words (key: 8 little-endian words)."""
    init = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *key_words, counter & M32, n0 & M32, n1 & M32, n2 & M32]
    s = list(init)
    for _ in range(10):
        quarter_round(s, 0, 4, 8, 12)
        quarter_round(s, 1, 5, 9, 13)
        quarter_round(s, 2, 6, 10, 14)
        quarter_round(s, 3, 7, 11, 15)
        quarter_round(s, 0, 5, 10, 15)
        quarter_round(s, 1, 6, 11, 12)
        quarter_round(s, 2, 7, 8, 13)
        quarter_round(s, 3, 4, 9, 14)
    return [(x + y) & M32 for x, y in zip(s, init)]


class Model:
    """Pure-Python sample_*_one of csrc/chacha.h, with a block cache."""

    def __init__(self, key_words, stream):
        self.key, self.stream, self.cache = list(key_words), stream, {}

    def block(self, counter, n2):
        k = (counter, n2)
        if k not in self.cache:
            self.cache[k] = chacha20_block(self.key, counter, self.stream & M32, self.stream >> 32, n2)
        return self.cache[k]

    def uniform(self, e, q):
        bound = q * (M32 // q)
        rnd = 0
        while True:
            w = self.block(e >> 2, rnd ^ ((e >> 34) << 8))
            for i in range(4):
                r = w[4 * (e & 3) + i]
                if r < bound:
                    return r % q
            rnd += 1

    def ternary(self, e):
        rnd = 0
        while True:
            r = self.block(e >> 4, rnd ^ ((e >> 36) << 8))[e & 15]
            if r != M32:
                return r % 3 - 1
            rnd += 1

    def cbd(self, e):
        w = self.block(e >> 3, (e >> 35) << 8)
        w0, w1 = w[2 * (e & 7)], w[2 * (e & 7) + 1]
        a = w0 & 0x1FFFFF
        b = (w0 >> 21) | ((w1 & 0x3FF) << 11)
        return bin(a).count("1") - bin(b).count("1")


def signed64(x: int) -> int:
    """The int64 the op's `int stream` argument takes for a 64-bit stream number."""
    return x - (1 << 64) if x >= 1 << 63 else x


def rand_key():
    words = [random.getrandbits(32) for _ in range(8)]
    return words, torch.tensor([s32(w) for w in words], dtype=torch.int32)


# --- RFC 8439 ------------------------------------------------------------------------
RFC_KEY = list(struct.unpack("<8I", bytes(range(32))))
RFC_NONCE = struct.unpack("<3I", bytes.fromhex("000000090000004a00000000"))
RFC_BLOCK = [  # section 2.3.2, "ChaCha state at the end of the ChaCha20 operation"
    0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3,
    0xC7F4D1C7, 0x0368C033, 0x9AAA2204, 0x4E6CD4C3,
    0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9,
    0xD19C12B5, 0xB94E16DE, 0xE883D0CB, 0x4E3C50A2,
]
RFC_SERIAL = bytes.fromhex(
    "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
    "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"
)


def test_python_model_matches_rfc8439():
    # 2.1.1 quarter round test vector
    s = [0x11111111, 0x01020304, 0x9B8D6F43, 0x01234567]
    quarter_round(s, 0, 1, 2, 3)
    assert s == [0xEA2A92F4, 0xCB1CF8CE, 0x4581472E, 0x5881C4BB]
    # 2.3.2 block test vector (and its serialization)
    blk = chacha20_block(RFC_KEY, 1, *RFC_NONCE)
    assert blk == RFC_BLOCK
    assert struct.pack("<16I", *blk) == RFC_SERIAL


def test_kernel_reproduces_rfc8439_block():
    """The RFC block through sample_uniform / sample_ternary / sample_cbd.

    stream = nonce words 0 and 1 (nonce word 2 = round 0 = 0), counter 1. sample_uniform
    element e in [4, 8) reads word 4*(e - 4) first; under two moduli just below 2^31 that
    word is accepted (it is below both bounds), and the CRT of the two residues is the word
    itself. Ternary elements 16..31 and CBD elements 8..15 read every word of the block.
    """
    key = torch.tensor([s32(w) for w in RFC_KEY], dtype=torch.int32)
    stream = RFC_NONCE[0] | RFC_NONCE[1] << 32
    assert RFC_NONCE[2] == 0
    q1, q2 = 2**31 - 1, 2**31 - 3
    out1 = _ops.sample_uniform(key, stream, mod_table([q1]), 1, 8)  # element e reads the
    out2 = _ops.sample_uniform(key, stream, mod_table([q2]), 1, 8)  # same word in both draws
    assert out1.shape == (1, 1, 8)
    for i, e in enumerate(range(4, 8)):
        w = RFC_BLOCK[4 * i]
        assert w < q1 * (M32 // q1) and w < q2 * (M32 // q2)
        r1, r2 = int(out1[0, 0, e]), int(out2[0, 0, e])
        crt = (r1 + q1 * ((r2 - r1) * pow(q1, -1, q2) % q2)) % (q1 * q2)
        assert crt == w, f"word {4 * i}: kernel gives {crt:#010x}, RFC {w:#010x}"
    t = _ops.sample_ternary(key, stream, 32)
    assert t[16:].tolist() == [w % 3 - 1 for w in RFC_BLOCK]
    c = _ops.sample_cbd(key, stream, 16)
    want = [bin(RFC_BLOCK[2 * i] & 0x1FFFFF).count("1")
            - bin((RFC_BLOCK[2 * i] >> 21) | ((RFC_BLOCK[2 * i + 1] & 0x3FF) << 11)).count("1") for i in range(8)]
    assert c[8:].tolist() == want


# --- kernels == model, bit for bit ---------------------------------------------------------
def _check_indices(total, first=64, extra=200):
    idx = set(range(min(first, total)))
    idx |= {random.randrange(total) for _ in range(extra)}
    idx.add(total - 1)
    return sorted(idx)


def test_sample_uniform_matches_model():
    kw, key = rand_key()
    stream = random.getrandbits(64)
    # a rejection-heavy modulus (bound ~ 2/3 * 2^32: later rounds are used), primes of the
    # ring, and tiny / largest odd moduli
    qs = [1431655767, random.choice(largest_ntt_primes(12, 4)), ntt_primes(12, 25, 1)[0], 3, 2**31 - 1]
    rows, n = 3, 1500  # 22500 elements: several threads, distinct limbs per row
    out = _ops.sample_uniform(key, signed64(stream), mod_table(qs), rows, n)
    assert out.shape == (rows, len(qs), n) and out.dtype == torch.int32
    m = Model(kw, stream)
    flat = out.view(-1)
    L = len(qs)
    for e in _check_indices(flat.numel(), first=n, extra=400):  # all of limb 0 (rejection-heavy q)
        q = qs[(e // n) % L]
        want = m.uniform(e, q)
        assert int(flat[e]) == want, f"element {e} (q={q}): kernel {int(flat[e])}, model {want}"
    later_rounds = sum(1 for (_, n2) in m.cache if n2 & 0xFF)
    assert later_rounds > 0, "no element needed a second round: rejection path not exercised"


def test_sample_ternary_and_cbd_match_model():
    kw, key = rand_key()
    stream = random.getrandbits(63)
    n = 20000
    t = _ops.sample_ternary(key, stream, n)
    c = _ops.sample_cbd(key, stream, n)
    assert t.shape == (n,) and t.dtype == torch.int64 and c.shape == (n,) and c.dtype == torch.int64
    m = Model(kw, stream)
    for e in _check_indices(n, first=100, extra=300):
        assert int(t[e]) == m.ternary(e), f"ternary element {e}"
        assert int(c[e]) == m.cbd(e), f"cbd element {e}"


def test_negative_stream_is_64bit():
    """stream is an int64 on the Python side; the kernel reads it as its 64-bit pattern."""
    kw, key = rand_key()
    stream = random.getrandbits(64) | (1 << 63)
    signed = signed64(stream)
    assert signed < 0
    m = Model(kw, stream)
    t = _ops.sample_ternary(key, signed, 40)
    assert t.tolist() == [m.ternary(e) for e in range(40)]


# --- statistics ----------------------------------------------------------------------
def test_uniform_statistics():
    _, key = rand_key()
    qs = [random.choice(largest_ntt_primes(10, 3)), ntt_primes(10, 25, 1)[0], 1431655767, 257]
    n = 1 << 16
    out = _ops.sample_uniform(key, random.getrandbits(62), mod_table(qs), 1, n)[0].to(torch.int64)
    for l, q in enumerate(qs):
        v = out[l].to(torch.float64)
        assert int(out[l].min()) >= 0 and int(out[l].max()) < q
        mean, sigma = v.mean().item(), math.sqrt((q * q - 1) / 12 / n)
        assert abs(mean - (q - 1) / 2) < 5 * sigma, f"q={q}: mean {mean}, expected {(q - 1) / 2} +- {sigma}"
        if q < 1000:  # every residue appears (expected count n/q ~ 255)
            counts = torch.bincount(out[l], minlength=q)
            assert (counts > 0).all()
            p = 1 / q
            sd = math.sqrt(n * p * (1 - p))
            assert ((counts - n * p).abs() < 6 * sd).all()
        else:  # both ends of [0, q) are reached
            assert int(out[l].min()) < q // 1000 and int(out[l].max()) > q - q // 1000


def test_ternary_statistics():
    _, key = rand_key()
    n = 1 << 17
    t = _ops.sample_ternary(key, random.getrandbits(62), n)
    assert set(t.unique().tolist()) == {-1, 0, 1}
    sd = math.sqrt(n * (1 / 3) * (2 / 3))
    for v in (-1, 0, 1):
        cnt = int((t == v).sum())
        assert abs(cnt - n / 3) < 5 * sd, f"value {v}: {cnt} of {n}"


def test_cbd_statistics():
    _, key = rand_key()
    n = 1 << 17
    c = _ops.sample_cbd(key, random.getrandbits(62), n)
    assert int(c.min()) >= -21 and int(c.max()) <= 21
    x = c.to(torch.float64)
    mean, var = x.mean().item(), x.var().item()
    assert abs(mean) < 5 * math.sqrt(10.5 / n), f"mean {mean}"
    assert abs(var - 10.5) < 0.05 * 10.5, f"variance {var}"
    # symmetric, and the full support is not degenerate
    assert abs(int((c > 0).sum()) - int((c < 0).sum())) < 5 * math.sqrt(n)


def test_streams_and_keys():
    _, key = rand_key()
    _, key2 = rand_key()
    s = random.getrandbits(62)
    mod = mod_table([random.choice(largest_ntt_primes(10, 3))])
    for draw in (lambda k, st: _ops.sample_uniform(k, st, mod, 2, 512),
                 lambda k, st: _ops.sample_ternary(k, st, 2048),
                 lambda k, st: _ops.sample_cbd(k, st, 2048)):
        a = draw(key, s)
        assert torch.equal(a, draw(key, s)), "same key and stream must repeat"
        assert not torch.equal(a, draw(key, s + 1)), "different streams must differ"
        assert not torch.equal(a, draw(key, s ^ (1 << 40))), "high stream bits must matter"
        assert not torch.equal(a, draw(key2, s)), "different keys must differ"
    # a longer draw extends a shorter one (counter-based: element e depends on e alone)
    assert torch.equal(_ops.sample_cbd(key, s, 5000)[:1000], _ops.sample_cbd(key, s, 1000))


# --- Sampler -------------------------------------------------------------------------
def test_sampler_streams():
    ring = Ring(6, largest_ntt_primes(6, 2))
    b = ring.basis()
    sa = Sampler()
    u1, u2 = sa.uniform(b, 2, 64), sa.uniform(b, 2, 64)
    assert u1.shape == (2, 2, 64) and not torch.equal(u1, u2)
    assert not torch.equal(sa.ternary(4096), sa.ternary(4096))
    assert not torch.equal(sa.error(4096), sa.error(4096))
    seed = random.getrandbits(64)
    s1, s2 = Sampler(seed=seed), Sampler(seed=seed)
    assert torch.equal(s1.uniform(b, 1, 64), s2.uniform(b, 1, 64))
    assert torch.equal(s1.error(256), s2.error(256))
    assert not torch.equal(Sampler().ternary(4096), Sampler().ternary(4096))
    # device copies share one stream counter: they never draw the same stream twice
    assert not torch.equal(sa.to("cpu").uniform(b, 1, 64), sa.uniform(b, 1, 64))


@pytest.mark.parametrize("n", [16, 1024, 4096])
def test_sparse_ternary_hamming_weight(n):
    s = Sampler()
    for h in {1, n, random.randint(1, n), random.randint(1, n // 2), min(n, 192)}:
        v = s.sparse_ternary(n, h)
        assert v.shape == (n,) and v.dtype == torch.int64
        assert set(v.unique().tolist()) <= {-1, 0, 1}
        assert int((v != 0).sum()) == h, f"n={n}: weight {int((v != 0).sum())} != {h}"
        if h >= 64:
            assert int((v == 1).sum()) > 0 and int((v == -1).sum()) > 0
    with pytest.raises(ValueError):
        s.sparse_ternary(n, 0)
    with pytest.raises(ValueError):
        s.sparse_ternary(n, n + 1)


def test_sparse_ternary_positions_uniform():
    """Each position is non-zero with probability h/n (5 sigma over repeated draws)."""
    s = Sampler()
    n, h, reps = 64, 16, 400
    hits = torch.zeros(n)
    plus = 0
    for _ in range(reps):
        v = s.sparse_ternary(n, h)
        hits += (v != 0).to(torch.float32)
        plus += int((v == 1).sum())
    p = h / n
    sd = math.sqrt(reps * p * (1 - p))
    assert ((hits - reps * p).abs() < 5 * sd).all(), hits.tolist()
    total = reps * h
    assert abs(plus - total / 2) < 5 * math.sqrt(total / 4)
