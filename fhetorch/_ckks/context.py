"""CKKS scheme context: parameters -> ring tables, encoder, sampler and keys.

This is the scheme layer (vectors in, ciphertexts out). The user-facing
`fhetorch.ckks.Context`, which packs torch tensors into EncryptedTensors, builds on it in
fhetorch/tensor/context.py.
"""
from __future__ import annotations

import math
import warnings

import torch

from .. import _ops
from ..errors import ContextError, EncodingError, InsecureParametersWarning, MissingKeyError, ScaleError
from .._ring import Ring, Sampler
from dataclasses import dataclass

from .._rlwe import (PublicKey, SecretKey, SwitchingKey, gen_public, gen_secret, gen_switching, gen_switching_level,
                    small_poly)
from .arguments import as_int, as_level, check_dense
from .ciphertext import Ciphertext, Plaintext
from .encoder import Encoder
from .params import Params, preset


@dataclass
class EncapsulationKeys:
    """Sparse-secret encapsulation for bootstrapping (Bossuat et al. 2022): switch a level-0
    ciphertext from the secret s to an ephemeral sparse secret s' (modulus Q_0 * P' only),
    ModRaise under s' (small Hamming weight: small overflow I), switch back to s at the top."""

    to_sparse: SwitchingKey  # s -> s' at level 0, special primes `special`
    to_dense: SwitchingKey  # s' -> s, every level
    special: range  # the special primes of to_sparse
    weight: int

    def to(self, device):
        return EncapsulationKeys(self.to_sparse.to(device), self.to_dense.to(device), self.special, self.weight)

    @property
    def nbytes(self) -> int:
        return self.to_sparse.nbytes + self.to_dense.nbytes


def galois_element(step: int, n: int) -> int:
    """Galois element of a left rotation by `step` slots (5^step mod 2N)."""
    return pow(5, step % (n // 2), 2 * n)


def check_scale(scale: float, what: str) -> float:
    """A scale is a finite number >= 1: below 1, rounding to integers loses the values."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 1):
        raise ScaleError(f"{what}: scale {scale!r} is not a finite number >= 1; values at such a scale round away "
                         "(encode at a level's nominal scale, ctx.nominal_scale(level))")
    return scale


def check_ciphertext_scale(ct: Ciphertext, what: str):
    """A ciphertext's scale label is a finite number >= 1, or its values are lost (ScaleError)."""
    s = ct.scale
    if not (math.isfinite(s) and s >= 1):
        raise ScaleError(f"{what}: the ciphertext's scale {s!r} is not a finite number >= 1, so its values are lost "
                         "(rounded away, or the scale label was altered); encrypt the values again")


def normalize_device(device) -> torch.device:
    """torch.device with the index made explicit ("cuda" -> "cuda:<current>"), so devices compare equal."""
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


class CKKSContext:
    def __init__(self, params: Params | str, device="cpu", *, seed: int | None = None):
        if isinstance(params, str):
            params = preset(params)
        self.params = params
        self.device = normalize_device(device)
        self.ring = Ring(params.log_n, params.primes + params.special_primes, self.device)
        self.encoder = Encoder(params.log_n)
        if seed is not None:
            warnings.warn("seed= makes keys and encryptions reproducible and therefore insecure; tests only",
                          InsecureParametersWarning, stacklevel=2)
        self.sampler = Sampler(self.device, seed=seed)
        self.secret_key: SecretKey | None = None
        self.public_key: PublicKey | None = None
        self.relin_key: SwitchingKey | None = None
        self.galois_keys: dict[int, SwitchingKey] = {}
        self.encapsulation_keys: EncapsulationKeys | None = None
        self._monomial_i = None
        self.circuit_cache: dict = {}  # higher layers' per-context state (bootstrapping's DFTs); not copied

    # --- shape of the chain ------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.params.n

    @property
    def slots(self) -> int:
        return self.params.slots

    @property
    def max_level(self) -> int:
        return self.params.max_level

    @property
    def q_count(self) -> int:
        return len(self.params.primes)

    def level_idx(self, level: int) -> range:
        return self.params.limbs(level)

    @property
    def special_idx(self) -> range:
        return range(self.q_count, self.q_count + len(self.params.special_primes))

    def basis(self, level: int):
        return self.ring.basis(tuple(self.level_idx(level)))

    def nominal_scale(self, level: int) -> float:
        return self.params.level_scales[level]

    @property
    def has_secret_key(self) -> bool:
        return self.secret_key is not None

    # --- keys ------------------------------------------------------------------------------
    def keygen(self, rotations=(), *, power_of_two_rotations: bool = True, conjugation: bool = True,
               relinearization: bool = True, low_level_rotations: dict | None = None,
               encapsulation_weight: int = 0):
        """Secret (if none yet), public, relinearisation, conjugation and rotation keys.

        Rotation keys: one for each step in `rotations`, plus +-2^i for every i when
        power_of_two_rotations (so any step composes from at most log2(slots) rotations).
        low_level_rotations {step: level}: keys only valid up to that level (fewer limbs:
        bootstrapping's SlotToCoeff), unless the step is also in the full set.
        encapsulation_weight > 0: the sparse-secret encapsulation keys of bootstrapping.
        """
        if self.secret_key is None:
            if self.public_key is not None:
                raise ContextError("keygen: this is a public context (no secret key); generate keys on the client")
            self.secret_key = gen_secret(self.ring, self.sampler, self.params.hamming_weight)
        sk = self.secret_key
        if self.public_key is None:
            self.public_key = gen_public(self.ring, self.sampler, sk, self.q_count)
        if relinearization and self.relin_key is None:
            b = self.ring.basis()
            self.relin_key = self._switching_key(_ops.mul(sk.s, sk.s, b.mod))
        steps = set(as_int(k, "keygen", "a rotation step") for k in rotations)
        if power_of_two_rotations:
            i = 1
            while i < self.slots:
                steps |= {i, -i}
                i *= 2
        full = {galois_element(k, self.n) for k in steps if k % self.slots}
        if conjugation:
            full.add(2 * self.n - 1)
        caps = {}
        for k, lvl in (low_level_rotations or {}).items():
            g = galois_element(int(k), self.n)
            if int(k) % self.slots and g not in full:
                caps[g] = max(caps.get(g, 0), int(lvl))
        for g in sorted(full):
            if g not in self.galois_keys or self.galois_keys[g].key_q.shape[2] < self.q_count:
                self.galois_keys[g] = self._switching_key(_ops.automorphism(sk.s, g))
        for g, lvl in sorted(caps.items()):
            stop = self.level_idx(lvl).stop
            if g not in self.galois_keys or self.galois_keys[g].key_q.shape[2] < stop:
                self.galois_keys[g] = self._switching_key(_ops.automorphism(sk.s, g), q_stop=stop)
        if encapsulation_weight and (self.encapsulation_keys is None
                                     or self.encapsulation_keys.weight != encapsulation_weight):
            self.encapsulation_keys = self._encapsulation_keys(encapsulation_weight)
        return self

    def _encapsulation_keys(self, weight: int) -> EncapsulationKeys:
        # The ephemeral secret exists only here: it is dropped once its two keys are made.
        eph = gen_secret(self.ring, self.sampler, weight)
        lvl0 = self.level_idx(0)
        special = range(self.q_count, self.q_count + min(len(lvl0) + 1, len(self.params.special_primes)))
        to_sparse = gen_switching_level(self.ring, self.sampler, eph, self.secret_key.s, lvl0, special)
        to_dense = self._switching_key(eph.s)
        return EncapsulationKeys(to_sparse, to_dense, special, weight)

    def _switching_key(self, s_from, q_stop=None):
        return gen_switching(self.ring, self.sampler, self.secret_key, s_from, self.q_count, self.params.alpha,
                             q_stop=q_stop)

    def key_bytes(self) -> int:
        keys = list(self.galois_keys.values()) + ([self.relin_key] if self.relin_key else [])
        enc = self.encapsulation_keys.nbytes if self.encapsulation_keys else 0
        return sum(k.nbytes for k in keys) + (self.public_key.data.numel() * 4 if self.public_key else 0) + enc

    def has_galois_key(self, g: int, level: int) -> bool:
        """Whether a key for Galois element g exists and holds the limbs of `level` (bootstrapping's
        SlotToCoeff keys hold only those of the low levels they run at)."""
        k = self.galois_keys.get(g)
        return k is not None and k.key_q.shape[2] >= self.level_idx(level).stop

    def galois_key(self, g: int, what: str, level: int | None = None, step: int | None = None) -> SwitchingKey:
        """The key of Galois element g holding `level`'s limbs (MissingKeyError naming the keygen
        call that adds it: `step` is the rotation it serves, when known)."""
        k = self.galois_keys.get(g)
        rotations = f"ctx.keygen(rotations=[{'...' if step is None else step}])"
        if k is None:
            how = "ctx.keygen(conjugation=True)" if g == 2 * self.n - 1 else rotations
            raise MissingKeyError(f"{what}: no key for it; generate it with {how} on the client")
        if level is not None and k.key_q.shape[2] < self.level_idx(level).stop:
            top = max(l for l in range(self.max_level + 1) if self.level_idx(l).stop <= k.key_q.shape[2])
            raise MissingKeyError(f"{what}: its key (made for bootstrapping) covers levels <= {top} only, the "
                                  f"ciphertext is at level {level}; generate a full key with {rotations} on the client")
        return k

    # --- encode / encrypt / decrypt ----------------------------------------------------
    def encode(self, values: torch.Tensor, *, level: int | None = None, scale: float | None = None,
               slots: int | None = None) -> Plaintext:
        level = self.max_level if level is None else as_level(level, self.max_level, "encode")
        scale = self.nominal_scale(level) if scale is None else check_scale(scale, "encode")
        check_dense(values, "encode")
        slots = values.numel() if slots is None else slots
        coeffs = self.encoder.embed(values.to(self.device), slots, scale)
        self._check_fits(coeffs, level, scale)
        return Plaintext(self.ring.from_integers(coeffs, self.basis(level)), level, scale, slots)

    def encode_extended(self, values: torch.Tensor, *, level: int, scale: float, slots: int) -> torch.Tensor:
        """encode()'s residues over the level's limbs and the special primes P, (L + K, N): a
        multiplicand of ciphertexts before their ModDown (fused linear transforms). A batch of
        vectors (D, slots) gives (D, L + K, N) in one pass."""
        return self.extended_residues(self.encode_coefficients(values, level=level, scale=scale, slots=slots), level)

    def encode_coefficients(self, values: torch.Tensor, *, level: int, scale: float, slots: int) -> torch.Tensor:
        """The int64 coefficients round(scale * m) of encoding `values` ((D, slots) -> (D, N)),
        checked to fit the level: the half of encoding that does not depend
        on the limbs (linear transforms keep it and redo only the residues)."""
        level = as_level(level, self.max_level, "encode")
        check_scale(scale, "encode")
        coeffs = self.encoder.embed(values.to(self.device), slots, scale)
        self._check_fits(coeffs, level, scale)
        return coeffs

    def extended_residues(self, coeffs: torch.Tensor, level: int) -> torch.Tensor:
        """NTT-domain residues of int64 coefficients over the level's limbs and P, (..., L + K, N)."""
        return self.ring.from_integers(coeffs, self.ring.basis(tuple(self.level_idx(level)) + tuple(self.special_idx)))

    def _check_fits(self, coeffs: torch.Tensor, level: int, scale: float):
        top = float(coeffs.abs().max()) if coeffs.numel() else 0.0
        self.check_fits(top, level, scale, "encode", "values")

    def check_fits(self, top: float, level: int, scale: float, what: str, noun: str):
        """A scaled magnitude `top` (an encoded coefficient, a constant times the scale) must
        stay well inside the level's modulus (a quarter of it), or decryption wraps around and
        returns garbage. Plaintext tensors, scalars and products by them share this bound."""
        log_q = math.log2(self.basis(level).product)
        if top > 0 and math.log2(top) > log_q - 2:
            raise EncodingError(f"{what}: {noun} too large for level {level}: {math.log2(top):.1f} bits at scale "
                                f"2^{math.log2(scale):.1f}, the level's modulus has {log_q:.1f} (at most "
                                f"{log_q - 2:.1f} usable); make the {noun} smaller or work at a higher level")

    def encrypt_vector(self, values: torch.Tensor, *, level: int | None = None, slots: int | None = None) -> Ciphertext:
        """Encrypt a vector of `slots` (power of two) complex or real values."""
        pt = self.encode(values, level=level, slots=slots)
        return self.encrypt_plaintext(pt)

    def encrypt_plaintext(self, pt: Plaintext) -> Ciphertext:
        idx = tuple(self.level_idx(pt.level))
        b = self.ring.basis(idx)
        lo, cnt = idx[0], len(idx)
        if self.secret_key is not None:
            a = self.sampler.uniform(b, 1, self.n)[0]
            s = self.secret_key.s.narrow(0, lo, cnt)
            e = small_poly(self.ring, self.sampler, idx)
            c0 = _ops.add(_ops.sub(e, _ops.mul(a, s, b.mod), b.mod), pt.data, b.mod)
            data = torch.stack([c0, a])
        elif self.public_key is not None:
            pk = self.public_key.data.narrow(1, lo, cnt).contiguous()
            v = small_poly(self.ring, self.sampler, idx, kind="ternary")
            e = torch.stack([small_poly(self.ring, self.sampler, idx), small_poly(self.ring, self.sampler, idx)])
            data = _ops.add(_ops.mul(pk, v, b.mod), e, b.mod)
            data[0] = _ops.add(data[0].contiguous(), pt.data, b.mod)
        else:
            raise MissingKeyError("encrypt: no public key; call ctx.keygen() first")
        return Ciphertext(data, pt.level, pt.scale, pt.slots)

    def decrypt_vector(self, ct: Ciphertext) -> torch.Tensor:
        """Complex128 (slots,) values of a ciphertext (needs the secret key)."""
        if self.secret_key is None:
            raise ContextError("decrypt: this context has no secret key (a public/server context); "
                               "decrypt on the client")
        check_ciphertext_scale(ct, "decrypt")
        idx = tuple(self.level_idx(ct.level))
        b = self.ring.basis(idx)
        s = self.secret_key.s.narrow(0, idx[0], len(idx)).contiguous()
        m = ct.data[ct.size - 1]
        for i in range(ct.size - 2, -1, -1):  # Horner: c0 + s (c1 + s c2)
            m = _ops.add(ct.data[i], _ops.mul(m, s, b.mod), b.mod)
        coeffs = self.ring.to_float(m, b, ct.scale)
        return self.encoder.unembed(coeffs, ct.slots)

    # --- constants ---------------------------------------------------------------------
    def monomial_i(self, level: int) -> torch.Tensor:
        """NTT of X^(N/2) over the level's limbs: multiplies every slot by i, exactly."""
        if self._monomial_i is None:
            c = torch.zeros(self.n, dtype=torch.int64)
            c[self.n // 2] = 1
            self._monomial_i = self.ring.from_integers(c, self.ring.basis(tuple(range(self.q_count))))
        r = self.level_idx(level)
        return self._monomial_i.narrow(0, r.start, len(r)).contiguous()

    # --- moving and sharing ----------------------------------------------------------
    def public(self) -> "CKKSContext":
        """The same context without the secret key: what a server gets."""
        c = self._copy(self.device)
        c.secret_key = None
        # a fresh ChaCha20 key: the client's generator (which drew the secret key) stays
        # with the client, and server-side encryptions never share its streams
        c.sampler = Sampler(self.device)
        return c

    def to(self, device) -> "CKKSContext":
        return self._copy(normalize_device(device))

    def __copy__(self) -> "CKKSContext":
        """copy.copy and copy.deepcopy: the key tensors (never changed in place) are shared,
        the random generator is new, so a copy never repeats the original's encryption
        randomness. Pickling: fhetorch/tensor/serialization.py (a secret key is never pickled)."""
        c = self._copy(self.device)
        c.sampler = Sampler(self.device)
        return c

    def __deepcopy__(self, memo) -> "CKKSContext":
        return self.__copy__()

    def _copy(self, device) -> "CKKSContext":
        c = self.__class__.__new__(self.__class__)
        c.__dict__.update(self.__dict__)
        c.device = device
        c.ring = self.ring if self.ring.device == device else self.ring.to(device)
        c.sampler = self.sampler.to(device)
        c.secret_key = self.secret_key.to(device) if self.secret_key else None
        c.public_key = self.public_key.to(device) if self.public_key else None
        c.relin_key = self.relin_key.to(device) if self.relin_key else None
        c.galois_keys = {g: k.to(device) for g, k in self.galois_keys.items()}
        c.encapsulation_keys = self.encapsulation_keys.to(device) if self.encapsulation_keys else None
        c._monomial_i = None
        c.circuit_cache = {}
        return c
