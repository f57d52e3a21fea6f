"""CKKS scheme context: validated parameters -> ring tables, level views, modulus plans,
encoder, sampler and keys.

This is the scheme layer (vectors in, ciphertexts out). The context holds what is shared;
the roles act on it, as SEAL's: `KeyGenerator` (_ckks/keygen.py) makes keys,
`Encryptor` (_ckks/encryptor.py) and `Decryptor` (_ckks/decryptor.py) encrypt and decrypt,
the evaluator's functions (_ckks/evaluator.py) compute. The user-facing
`fhetorch.ckks.Context`, which packs torch tensors into EncryptedTensors, builds on it in
fhetorch/tensor/context.py.
"""
from __future__ import annotations

import math

import torch

from ..errors import EncodingError, MissingKeyError, ScaleError, warn
from .._ring import Ring, Sampler
from .._ring.memory import MemoryReport
from .._rlwe import ModulusTables, PublicKey, SecretKey, SwitchingKey
from .arguments import as_level, check_dense
from .ciphertext import Ciphertext, Plaintext
from .decryptor import Decryptor, check_ciphertext_scale  # noqa: F401  (check_ciphertext_scale: re-exported)
from .encoder import Encoder
from .encryptor import Encryptor
from .keygen import EncapsulationKeys, KeyGenerator, galois_element  # noqa: F401  (galois_element: re-exported)
from .params import Params
from .presets import preset


def check_scale(scale: float, what: str) -> float:
    """A scale is a finite number >= 1: below 1, rounding to integers loses the values."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 1):
        raise ScaleError(f"{what}: scale {scale!r} is not a finite number >= 1; values at such a scale round away "
                         "(encode at a level's nominal scale, ctx.nominal_scale(level))")
    return scale


def normalize_device(device) -> torch.device:
    """torch.device with the index made explicit ("cuda" -> "cuda:<current>"), so devices compare equal."""
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return d


class CKKSContext:
    """The shared state of CKKS on one device: validated Params, the Ring's tables and each
    level's view of them (`basis(level)`), the ModulusTables of rescaling and key switching,
    the encoder, the sampler and the keys. Keys are made by KeyGenerator (`keygen`),
    encryption and decryption are Encryptor's and Decryptor's (`encrypt_plaintext`,
    `decrypt_vector`)."""

    def __init__(self, params: Params | str, device="cpu", *, seed: int | None = None):
        if isinstance(params, str):
            params = preset(params)
        self.params = params
        self.device = normalize_device(device)
        self._tables_on(self.device)
        self.encoder = Encoder(params.log_n)
        if seed is not None:
            warn("seed= makes keys and encryptions reproducible and therefore insecure; tests only")
        self.sampler = Sampler(self.device, seed=seed)
        self.secret_key: SecretKey | None = None
        self.public_key: PublicKey | None = None
        self.relin_key: SwitchingKey | None = None
        self.galois_keys: dict[int, SwitchingKey] = {}
        self.encapsulation_keys: EncapsulationKeys | None = None

    def _tables_on(self, device):
        """The ring, its level views and the (empty) plans on `device`; per-context constants reset."""
        p = self.params
        self.ring = Ring(p.log_n, p.primes + p.special_primes, device)
        self._levels = [self.ring.basis(p.limbs(level)) for level in range(p.max_level + 1)]
        self.special_basis = self.ring.basis(p.special_limbs)
        self.modulus_tables = ModulusTables(self.ring)
        self._monomial_i = None

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

    def basis(self, level: int):
        """The tables of a level's limbs (views of the ring's)."""
        return self._levels[level]

    def nominal_scale(self, level: int) -> float:
        return self.params.level_scales[level]

    @property
    def has_secret_key(self) -> bool:
        return self.secret_key is not None

    # --- keys ------------------------------------------------------------------------------
    def keygen(self, rotations=(), **kw):
        """Generate keys (KeyGenerator.generate: secret if none yet, public, relinearisation,
        conjugation, +-2^i rotations and `rotations`); returns self. Raises ContextError on a
        public context."""
        KeyGenerator(self).generate(rotations, **kw)
        return self

    def key_bytes(self) -> int:
        keys = list(self.galois_keys.values()) + ([self.relin_key] if self.relin_key else [])
        enc = self.encapsulation_keys.nbytes if self.encapsulation_keys else 0
        return sum(k.nbytes for k in keys) + (self.public_key.data.numel() * 4 if self.public_key else 0) + enc

    def has_galois_key(self, g: int, level: int) -> bool:
        """Whether a key for Galois element g exists and holds the limbs of `level` (bootstrapping's
        SlotToCoeff keys hold only those of the low levels they run at)."""
        k = self.galois_keys.get(g)
        return k is not None and k.key_q.shape[2] >= self.params.limbs(level).stop

    def galois_key(self, g: int, what: str, level: int | None = None, step: int | None = None) -> SwitchingKey:
        """The key of Galois element g holding `level`'s limbs (MissingKeyError naming the keygen
        call that adds it: `step` is the rotation it serves, when known)."""
        k = self.galois_keys.get(g)
        rotations = f"ctx.keygen(rotations=[{'...' if step is None else step}])"
        if k is None:
            how = "ctx.keygen(conjugation=True)" if g == 2 * self.n - 1 else rotations
            raise MissingKeyError(f"{what}: no key for it; generate it with {how} on the client")
        if level is not None and k.key_q.shape[2] < self.params.limbs(level).stop:
            top = max(l for l in range(self.max_level + 1) if self.params.key_limbs(l).stop <= k.key_q.shape[2])
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
        return self.ring.from_integers(coeffs, self.ring.basis(tuple(self.params.limbs(level)) +
                                                               tuple(self.params.special_limbs)))

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
        return Encryptor(self).encrypt(pt)

    def decrypt_vector(self, ct: Ciphertext) -> torch.Tensor:
        """Complex128 (slots,) values of a ciphertext (needs the secret key: Decryptor)."""
        return Decryptor(self).decrypt(ct)

    # --- constants ---------------------------------------------------------------------
    def monomial_i(self, level: int) -> torch.Tensor:
        """NTT of X^(N/2) over the level's limbs: multiplies every slot by i, exactly."""
        if self._monomial_i is None:
            c = torch.zeros(self.n, dtype=torch.int64)
            c[self.n // 2] = 1
            self._monomial_i = self.ring.from_integers(c, self.ring.basis(range(len(self.params.primes))))
        r = self.params.limbs(level)
        return self._monomial_i.narrow(0, r.start, len(r)).contiguous()

    # --- memory ------------------------------------------------------------------------
    def memory_report(self, circuits=()) -> MemoryReport:
        """Device memory this context holds, by what holds it: the ring's tables, the tables of
        limb subsets that are not views of them, the modulus plans of every level planned so
        far, scalar constants, encoder tables, higher layers' per-context state (`circuits`:
        (what, tensors) rows) and, separately, the keys. print() it for a table."""
        r = MemoryReport(f"{self.params.name} on {self.device}")
        r.add("ring tables (every limb)", self.ring.tables)
        bases = self.ring.bases
        r.add("limb-subset tables (bases)", [t for b in bases for t in b.tensors])
        r.add("modulus plans (rescale, ModUp, ModDown)", self.modulus_tables.tensors)
        r.add("scalar constants", [t for b in bases for t in b.scalars])
        r.add("encoder tables", self.encoder.tensors)
        r.add("constants (X^(N/2))", [] if self._monomial_i is None else [self._monomial_i])
        for what, tensors in circuits:
            r.add(what, tensors)
        keys = [self.secret_key.s] if self.secret_key else []
        keys += [self.public_key.data] if self.public_key else []
        for k in list(self.galois_keys.values()) + ([self.relin_key] if self.relin_key else []):
            keys += [k.key_q, k.key_p]
        if self.encapsulation_keys:
            e = self.encapsulation_keys
            keys += [e.to_sparse.key_q, e.to_sparse.key_p, e.to_dense.key_q, e.to_dense.key_p]
        r.add("keys", keys, keys=True)
        return r

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
        if device != self.device:
            c._tables_on(device)
        c.sampler = self.sampler.to(device)
        c.secret_key = self.secret_key.to(device) if self.secret_key else None
        c.public_key = self.public_key.to(device) if self.public_key else None
        c.relin_key = self.relin_key.to(device) if self.relin_key else None
        c.galois_keys = {g: k.to(device) for g, k in self.galois_keys.items()}
        c.encapsulation_keys = self.encapsulation_keys.to(device) if self.encapsulation_keys else None
        return c
