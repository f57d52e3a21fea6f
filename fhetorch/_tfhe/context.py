"""TFHEContext: parameters validated into ring tables, keys, encryption, decryption and LUTs.

A context holding secret keys is the client's; `public()` gives the server's (bootstrapping
and key-switching keys only). Messages are integers in [0, 2^message_bits); the atomic pattern
is TFHE-rs's KS-PBS: ciphertexts live under the big key (the GLWE key extracted, dimension
k N), a PBS key-switches to the small LWE key (dimension n), then blind-rotates and extracts.
"""
from __future__ import annotations

import secrets
import weakref

import torch

from .._distributed import check_group, check_same, checksum, gather_rows, group_rank, group_size, shard
from .._ring import Sampler
from ..errors import ContextError, EncodingError, MessageOverflowError, MissingKeyError, ParameterError, ShapeError
from . import algorithms as alg
from .lut import test_polynomial
from .lwe_tensor import LWETensor
from .noise import TORUS, noise_width
from .params import TFHEParams
from .radix import RadixTensor, decrypt_int, encrypt_int
from .presets import preset as _preset
from .ring import TFHERing

# key id -> weak references to the live contexts with those keys (the client, its public()
# copies, loaded or unpickled ones): unpickling an LWETensor ties it to one of them
# (fhetorch/_tfhe/serialization.py)
_LIVE: dict[str, list] = {}


def _register(ctx: "TFHEContext"):
    if ctx.key_id is not None:
        refs = [r for r in _LIVE.get(ctx.key_id, []) if r() is not None]
        _LIVE[ctx.key_id] = refs + [weakref.ref(ctx)]


def find_context(key_id, params: dict, device) -> "TFHEContext | None":
    """A live context of this process with these keys and parameters (params.describe()) on
    `device`; None if there is none. Raises nothing."""
    for ref in _LIVE.get(key_id, []) if isinstance(key_id, str) else []:
        c = ref()
        if c is not None and c.params.describe() == params and c.device == torch.device(device):
            return c
    return None


class TFHEContext:
    def __init__(self, preset: str | TFHEParams = "toy-tfhe-4bit", device="cpu", *, seed: int | None = None,
                 message_bits: int | None = None):
        """message_bits: read the preset's bits as message_bits of message and the rest carry
        (TFHEParams.with_message_bits; e.g. tfhe-4bit with message_bits=2 is TFHE-rs's
        MESSAGE_2_CARRY_2, what radix integers use).

        Secrets are binary or ternary as params.secret_distribution says (a ternary key's PBS runs
        2n CMuxes: docs/tfhe.md, "Ternary secrets").

        Raises ParameterError for an unknown preset or message_bits outside [1, bits]; toy
        presets warn (InsecureParametersWarning)."""
        params = _preset(preset) if isinstance(preset, str) else preset
        if not isinstance(params, TFHEParams):
            raise ParameterError(f"tfhe.Context: preset must be a preset name or TFHEParams, got {type(preset).__name__}")
        if message_bits is not None:
            params = params.with_message_bits(message_bits)
        self.params = params
        self.device = torch.device(device)
        self.ring = TFHERing(params.log_n, params.moduli, self.device)
        # the tables now, not in the first PBS (host computations: no sync in a PBS or a graph)
        if params.grouping_factor > 1:
            if params.blind_rotation == "fft":
                self.ring.fourier_monomial_tables()
            else:
                self.ring.monomial_tables()
        if params.blind_rotation == "fft":
            _ = self.ring.twiddles
        self.modulus = self.ring.modulus
        self.sampler = Sampler(self.device, seed=seed)
        self.lwe_key = self.glwe_key = None
        self.bootstrap_key = self.keyswitch_key = None
        self.key_id = None  # set by keygen(); shared by public() and copies
        self._tv_cache: dict = {}
        self.sharded, self.group = False, None  # distribute(): batched PBS over a process group

    @property
    def key_id(self) -> str | None:
        """Names the keys (random, set by keygen()): contexts with the same key id hold the
        same evaluation keys, and their LWETensors mix."""
        return self._key_id

    @key_id.setter
    def key_id(self, value):
        self._key_id = value
        _register(self)

    # --- keys --------------------------------------------------------------------------------------
    def keygen(self) -> "TFHEContext":
        """Makes the LWE and GLWE secrets (binary or ternary: params.secret_distribution), the
        bootstrapping key (a ternary secret's: over its 2n split bits) and the key-switching key.

        Raises nothing."""
        p, s = self.params, self.sampler
        self.lwe_key = alg.generate_lwe_secret_key(s, p.n, p.secret_distribution)
        self.glwe_key = alg.generate_glwe_secret_key(s, p.k, p.N, p.secret_distribution)
        if p.grouping_factor > 1 and p.blind_rotation == "fft":
            self.bootstrap_key = alg.generate_fourier_multi_bit_bootstrap_key(
                s, self.ring, self.lwe_key, self.glwe_key, p.pbs_base_log, p.pbs_level,
                noise_width(p.glwe_noise_std, TORUS), p.grouping_factor)
        elif p.grouping_factor > 1:
            self.bootstrap_key = alg.generate_lwe_multi_bit_bootstrap_key(
                s, self.ring, self.lwe_key, self.glwe_key, p.pbs_base_log, p.pbs_level, p.glwe_noise_width,
                p.grouping_factor)
        elif p.blind_rotation == "fft":
            self.bootstrap_key = alg.generate_fourier_bootstrap_key(
                s, self.ring, self.lwe_key, self.glwe_key, p.pbs_base_log, p.pbs_level,
                noise_width(p.glwe_noise_std, TORUS))
        else:
            self.bootstrap_key = alg.generate_lwe_bootstrap_key(s, self.ring, self.lwe_key, self.glwe_key,
                                                                p.pbs_base_log, p.pbs_level, p.glwe_noise_width)
        self.keyswitch_key = alg.generate_lwe_keyswitch_key(s, self.ring, self.glwe_key.as_lwe_key(), self.lwe_key,
                                                           p.ks_base_log, p.ks_level, p.lwe_noise_width)
        self.key_id = secrets.token_hex(8)
        return self

    def public(self) -> "TFHEContext":
        """The server's context: the same parameters and evaluation keys, no secret.

        Raises MissingKeyError before keygen()."""
        self._need_eval_keys("public")
        ctx = self.__copy__()
        ctx.lwe_key = ctx.glwe_key = None
        return ctx

    def __copy__(self) -> "TFHEContext":
        """copy.copy and copy.deepcopy: the keys (never changed in place) are shared, the random
        generator is new, so a copy never repeats the original's encryption randomness.
        Pickling: fhetorch/_tfhe/serialization.py (a secret key is never pickled)."""
        ctx = TFHEContext.__new__(TFHEContext)
        ctx.__dict__.update(self.__dict__)
        ctx.sampler = Sampler(self.device)
        _register(ctx)
        return ctx

    def __deepcopy__(self, memo) -> "TFHEContext":
        return self.__copy__()

    def distribute(self, group=None, *, enable: bool = True) -> "TFHEContext":
        """Spread every batched PBS of this context (bootstrap, apply_lut, apply_many_luts, a
        circuit's waves) over the ranks of a torch.distributed process group (None: the default
        one): of a batch of n ciphertexts rank r bootstraps r, r + p, r + 2p, ... (an equal share of
        each LUT of a wave, whose ciphertexts come node by node) and the outputs are all-gathered,
        so every rank holds the whole result, bit for bit what one device computes. Every rank
        makes the same calls on the same ciphertexts, like DDP's replicas (each batch's size and
        checksum are compared first); each holds the evaluation keys (fhe.load of one saved public
        context). enable=False runs batches whole again. Returns self.

        Raises DistributedError without an initialised torch.distributed."""
        if enable:
            check_group(group, "tfhe.Context.distribute")
        self.sharded, self.group = bool(enable), group if enable else None
        return self

    @property
    def has_secret_key(self) -> bool:
        return self.glwe_key is not None

    def _need_secret(self, op):
        if self.glwe_key is None:
            raise ContextError(f"tfhe.Context.{op}: this context holds no secret key (a server context, or "
                               "keygen() not run); use the client's context")

    def _need_eval_keys(self, op):
        if self.bootstrap_key is None or self.keyswitch_key is None:
            raise MissingKeyError(f"tfhe.Context.{op}: no bootstrapping / key-switching key; run keygen() first")

    def _check_tensor(self, op, x):
        if not isinstance(x, LWETensor):
            raise ContextError(f"tfhe.{op}: expected an LWETensor, got {type(x).__name__}")
        other = x.context
        if other is not self and (self.key_id is None or other.key_id != self.key_id or other.params != self.params):
            raise ContextError(f"tfhe.{op}: the LWETensor belongs to another context (other parameters or keys)")

    # --- encryption --------------------------------------------------------------------------------
    def encrypt(self, x) -> LWETensor:
        """Integer messages (a tensor, list or int) in [0, 2^message_bits) -> LWETensor of x's shape.

        Raises ContextError without a secret key, EncodingError for non-integers or messages out of range."""
        self._need_secret("encrypt")
        x = torch.as_tensor(x)
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise EncodingError(f"tfhe.Context.encrypt: messages must be integers, got {x.dtype}")
        mm = self.params.message_modulus
        x = x.to(device=self.device, dtype=torch.int64)
        if x.numel() and (int(x.min()) < 0 or int(x.max()) >= mm):
            raise EncodingError(f"tfhe.Context.encrypt: messages must be in [0, {mm}) for {self.params.name} "
                                f"({self.params.message_bits} bits), got values in [{int(x.min())}, {int(x.max())}]")
        data = alg.encrypt_lwe_ciphertext(self.sampler, self.ring, self.glwe_key.as_lwe_key(),
                                          x * self.params.delta, self.params.glwe_noise_width)
        return LWETensor(self, data, mm - 1)

    def decrypt(self, ex: LWETensor, *, carries: bool = False) -> torch.Tensor:
        """LWETensor -> int64 tensor of messages in [0, 2^message_bits) (with carries=True, the
        whole value in [0, 2^(message_bits + carry_bits))).

        Raises ContextError without a secret key or for another context's tensor."""
        self._need_secret("decrypt")
        self._check_tensor("Context.decrypt", ex)
        phase = alg.decrypt_lwe_ciphertext(self.modulus, self.glwe_key.as_lwe_key(), ex.data)
        v = self.decode(phase)
        return v if carries else v % self.params.message_modulus

    def encrypt_int(self, x, bits: int) -> RadixTensor:
        """Unsigned integers in [0, 2^bits) -> RadixTensor (blocks of message_bits; fhetorch/_tfhe/radix.py).

        Raises ParameterError for bits not a multiple of message_bits or parameters without carry
        room (use message_bits=2 on a 4-bit preset), EncodingError for values out of range,
        ContextError without a secret key."""
        return encrypt_int(self, x, bits)

    def decrypt_int(self, r: RadixTensor) -> torch.Tensor:
        """RadixTensor -> int64 tensor of its integers. Raises ContextError without a secret key or
        for another context's integer, ShapeError for another type."""
        return decrypt_int(self, r)

    def decode(self, phase: torch.Tensor) -> torch.Tensor:
        """Phase in [0, q) -> round(phase / delta) mod 2p (p the message space), int64."""
        d, two_p = self.params.delta, 2 * self.params.message_space
        return (phase + d // 2) // d % two_p

    # --- programmable bootstrapping -------------------------------------------------------------
    def _test_polynomials(self, tables) -> torch.Tensor:
        key = tuple(tuple(t) for t in tables)
        tv = self._tv_cache.get(key)
        if tv is None:
            p = self.params
            tv = test_polynomial(list(tables), p.message_space, p.N, p.delta, p.q).to(self.device)
            self._tv_cache[key] = tv
        return tv

    def bootstrap(self, ex: LWETensor, tables, *, index: torch.Tensor | None = None) -> list:
        """KS-PBS of every ciphertext of ex. tables: a list of LUT groups, each a list of c output
        tables (c a power of two; c > 1: many-LUT, c outputs per PBS); index (ex's shape) picks
        each ciphertext's group (None: group 0). Returns c LWETensors.

        Raises MissingKeyError without keys, ContextError for another context's tensor,
        MessageOverflowError if ex's values may not fit the LUT's input space, ShapeError for a
        bad index or tables of different sizes (an index on the GPU out of range fails a device-side
        assertion instead: checking it on the host would synchronise)."""
        self._need_eval_keys("bootstrap")
        self._check_tensor("bootstrap", ex)
        p = self.params
        c = len(tables[0])
        if any(len(g) != c for g in tables):
            raise ShapeError("tfhe.bootstrap: every LUT group must hold the same number of functions")
        space = p.message_space // c
        if ex.degree >= space:
            raise MessageOverflowError(f"tfhe.bootstrap: {c} function(s) per PBS need inputs below {space}, the "
                                       f"tensor may hold values up to {ex.degree}; use fewer functions per PBS or "
                                       "apply a LUT first")
        tv = torch.stack([self._test_polynomials(g) for g in tables])
        if index is not None:
            index = torch.as_tensor(index, device=self.device).to(torch.int64)
            if tuple(index.shape) != tuple(ex.shape):
                raise ShapeError(f"tfhe.bootstrap: index has shape {tuple(index.shape)}, the tensor {tuple(ex.shape)}")
            in_range = ((index >= 0) & (index < len(tables))).all()
            if index.device.type != "cpu":
                torch._assert_async(in_range)  # checked on the device: no host sync in a batched PBS
            elif not bool(in_range):
                raise ShapeError(f"tfhe.bootstrap: index values must be in [0, {len(tables)})")
        positions = [i * (p.N // c) for i in range(c)]
        if self.sharded and group_size(self.group) > 1:
            outs = self._bootstrap_shard(ex, tv, index, positions)
        else:
            outs = self._bootstrap_rows(ex.data, tv, index, positions)
        degrees = [max(max(g[i]) for g in tables) for i in range(c)]
        return [LWETensor(self, o, d) for o, d in zip(outs, degrees)]

    def _bootstrap_rows(self, data, tv, index, positions) -> list:
        """KS(-centered MS)-PBS of LWE ciphertexts `data` (..., width): the outputs per position."""
        p = self.params
        ks = alg.keyswitch_lwe_ciphertext(self.keyswitch_key, data, self.modulus)
        if p.modulus_switch_type == "centered":
            ks = alg.center_modulus_switch(ks, self.modulus, p.log_n + 1, p.secret_distribution)
        return alg.programmable_bootstrap_lwe_ciphertext(self.ring, self.bootstrap_key, ks, tv, index, positions)

    def _bootstrap_shard(self, ex, tv, index, positions) -> list:
        """This rank's share of the batch (ciphertexts r, r + p, ...), then the outputs all-gathered."""
        flat = ex.data.reshape(-1, ex.data.shape[-1])
        idx = None if index is None else index.reshape(-1)
        n = flat.shape[0]
        check_same([n, flat.shape[1], len(positions), tv.shape[0], checksum(flat), checksum(tv),
                    -1 if idx is None else checksum(idx)], self.group, "tfhe.bootstrap (distributed)",
                   "the batch (its size, LUTs and checksums)")
        part = shard(n, group_rank(self.group), group_size(self.group))
        rows = flat[part]
        width = self.params.k * self.params.N + 1
        if rows.shape[0]:
            outs = self._bootstrap_rows(rows, tv, None if idx is None else idx[part], positions)
        else:  # fewer ciphertexts than ranks: this one has none
            outs = [flat.new_empty(0, width) for _ in positions]
        return [gather_rows(o, n, self.group).view(*ex.shape, width) for o in outs]

    def apply_lut(self, ex: LWETensor, lut, *, index: torch.Tensor | None = None) -> LWETensor:
        """lut: a LUT, or a list of LUTs with index (ex's shape) choosing each element's LUT (one
        launch whatever the functions). Returns the LWETensor of the outputs.

        Raises ParameterError, MessageOverflowError, MissingKeyError, ContextError, ShapeError
        (see bootstrap)."""
        luts = lut if isinstance(lut, (list, tuple)) else [lut]
        self._check_lut_input(ex, luts)
        return self.bootstrap(ex, [[l.tables_for(self.params.message_space)] for l in luts], index=index)[0]

    def apply_many_luts(self, ex: LWETensor, luts) -> list:
        """Several functions of one input in one PBS (many-LUT): needs ex's values below
        message_space / c, c = len(luts) rounded up to a power of two. Returns one LWETensor per LUT.

        Raises ParameterError, MessageOverflowError, MissingKeyError, ContextError (see bootstrap)."""
        luts = list(luts)
        c = 1 << (len(luts) - 1).bit_length()
        self._check_lut_input(ex, luts)
        tables = [l.tables_for(self.params.message_space, c) for l in luts]
        tables += [tables[0]] * (c - len(luts))
        return self.bootstrap(ex, [tables])[: len(luts)]

    def _check_lut_input(self, ex, luts):
        from_lut = min(1 << l.bits for l in luts)
        if isinstance(ex, LWETensor) and ex.degree >= from_lut:
            raise MessageOverflowError(f"tfhe.LUT: a LUT of {from_lut.bit_length() - 1} bits applied to values that "
                                       f"may reach {ex.degree}; use a LUT of more bits or reduce the values first")
