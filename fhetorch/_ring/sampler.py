"""Cryptographic sampling: ChaCha20 keyed from os.urandom, counter-based (csrc/chacha.h).

Every draw takes a fresh 64-bit stream number, (rank << 40) | a host counter, so no two draws
under one key share ChaCha20 blocks, across the ranks of a torch.distributed job too (the rank is
the global one at the draw; 0 without torch.distributed). Sampling stays outside captured CUDA graphs (a replayed
graph would repeat its randomness).

Processes: a forked child gets a fresh os.urandom key for every live sampler (an
os.register_at_fork hook), so parent and child never draw the same streams; a spawned
process (torch.distributed ranks, multiprocessing "spawn") builds its contexts anew, with
keys of its own, and the rank in the stream number keeps even a key shared by ranks (a test
seed) from repeating a stream. A sampler is never pickled or copied with its key: a copy is a fresh
generator (new os.urandom key).
"""
from __future__ import annotations

import os
import struct
import weakref

import torch

from .. import _ops
from .._distributed import group_rank
from ..errors import InternalError, ParameterError


class _Key:
    """The ChaCha20 key and the stream counter that a sampler and its device copies share;
    the key tensor is made on a device when first used there (after a fork, the child's
    new key must not touch a device the parent initialised)."""

    def __init__(self, key: bytes):
        self.counter = 0
        self.rekey(key)

    def rekey(self, key: bytes):
        self.words = struct.unpack("<8i", key)
        self.tensors = {}

    def tensor(self, device: torch.device) -> torch.Tensor:
        t = self.tensors.get(device)
        if t is None:
            t = self.tensors[device] = torch.tensor(self.words, dtype=torch.int32, device=device)
        return t


_LIVE_KEYS: "weakref.WeakSet[_Key]" = weakref.WeakSet()


def _rekey_after_fork():
    # the child inherits the parent's keys and counters: without new keys both would draw
    # the same masks and errors, and two ciphertexts sharing a mask leak x - y
    for k in list(_LIVE_KEYS):
        k.rekey(os.urandom(32))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rekey_after_fork)


STREAM_RANK_SHIFT = 40  # stream = (rank << 40) | counter: 2^40 draws per key and rank, 2^23 ranks


class Sampler:
    def __init__(self, device="cpu", *, seed: int | None = None):
        if seed is None:
            key = os.urandom(32)
        else:
            # Explicitly insecure: reproducible keys for tests only (a forked child still
            # gets a fresh random key).
            key = struct.pack("<QQQQ", seed & (2**64 - 1), 0x6668_6574_6f72_6368, 0, 0)
        self.insecure_seed = seed is not None
        self.device = torch.device(device)
        self._key = _Key(key)  # shared by the device copies of this sampler: no stream is drawn twice
        _LIVE_KEYS.add(self._key)

    @property
    def key(self) -> torch.Tensor:
        """The (8,) int32 ChaCha20 key on this sampler's device."""
        return self._key.tensor(self.device)

    def to(self, device) -> "Sampler":
        """The same generator on another device (same key, one shared stream counter)."""
        s = Sampler.__new__(Sampler)
        s.__dict__.update(self.__dict__)
        s.device = torch.device(device)
        return s

    def __reduce__(self):
        # pickle, torch.save, copy and deepcopy: a fresh generator, never this key
        return Sampler, (str(self.device),)

    def _next(self) -> int:
        self._key.counter += 1
        if self._key.counter >= 1 << STREAM_RANK_SHIFT:
            raise InternalError("sampler: 2^40 draws under one key; make a new context")
        return (group_rank(None) << STREAM_RANK_SHIFT) | self._key.counter

    def uniform(self, basis, rows: int, n: int) -> torch.Tensor:
        """(rows, L, n) uniform residues modulo each limb of `basis`."""
        return _ops.sample_uniform(self.key, self._next(), basis.mod, rows, n)

    def ternary(self, n: int) -> torch.Tensor:
        return _ops.sample_ternary(self.key, self._next(), n)

    def error(self, n: int) -> torch.Tensor:
        """Centred binomial, eta = 21 (sigma = 3.24): the HE standard's error width."""
        return _ops.sample_cbd(self.key, self._next(), n)

    def uniform_int(self, n: int, lo: int, hi: int) -> torch.Tensor:
        """(n,) int64 uniform in [lo, hi] (hi - lo < 2^62), no modulo bias (TFHE's secrets and noise)."""
        return _ops.tfhe_sample_int(self.key, self._next(), n, lo, hi)

    def binary(self, n: int) -> torch.Tensor:
        """(n,) int64 uniform in {0, 1}: TFHE's binary secrets."""
        return self.uniform_int(n, 0, 1)

    def irwin_hall(self, n: int, width: int, terms: int = 4) -> torch.Tensor:
        """(n,) int64, each the sum of `terms` independent uniform integers in [-width, width]
        (variance terms * width * (width + 1) / 3): TFHE's integer-only noise."""
        if width < 0 or terms < 1:
            raise ParameterError(f"irwin_hall: need width >= 0 and terms >= 1, got {width}, {terms}")
        if width == 0:
            return torch.zeros(n, dtype=torch.int64, device=self.device)
        return self.uniform_int(terms * n, -width, width).view(terms, n).sum(0)

    def sparse_ternary(self, n: int, hamming_weight: int) -> torch.Tensor:
        """Exactly `hamming_weight` non-zero +-1 coefficients at uniformly random positions."""
        if not 0 < hamming_weight <= n:
            raise ParameterError(f"sparse_ternary: hamming_weight must be in [1, {n}], got {hamming_weight}")
        # Fisher-Yates over ChaCha20 words (rejection keeps the choice unbiased).
        words = iter(_ops.sample_uniform(self.key, self._next(), _word_mod().to(self.device), 1, 4 * n + 64).flatten().tolist())
        pos = list(range(n))
        for i in range(hamming_weight):
            span = n - i
            pick = i + _unbiased(words, span)
            pos[i], pos[pick] = pos[pick], pos[i]
        out = torch.zeros(n, dtype=torch.int64)
        for i in range(hamming_weight):
            out[pos[i]] = 1 - 2 * _unbiased(words, 2)
        return out.to(self.device)


_WORD_PRIME = 2147483647  # 2^31 - 1: uniform words in [0, 2^31 - 1)


def _word_mod():
    return torch.tensor([[_WORD_PRIME, _inv32(_WORD_PRIME)]], dtype=torch.int32)


def _inv32(q):
    v = pow(q, -1, 1 << 32)
    return v - (1 << 32) if v >= 1 << 31 else v


def _unbiased(words, span: int) -> int:
    limit = _WORD_PRIME - _WORD_PRIME % span
    for w in words:
        if w < limit:
            return w % span
    raise InternalError("sampler: ran out of words")  # probability < 2^-60
