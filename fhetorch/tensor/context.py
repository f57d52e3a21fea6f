"""The user-facing CKKS context: torch tensors in, EncryptedTensors out (fhetorch.ckks.Context)."""
from __future__ import annotations

import math
import secrets
import weakref

import torch

from .._ckks.arguments import as_level, check_dense
from .._ckks.context import CKKSContext, normalize_device
from .._ckks.params import Params
from .._ckks.sparse_security import check_encapsulation
from ..circuits import bootstrap as _bts
from ..circuits import switching as _switching
from ..circuits.bootstrap_config import BOOTSTRAP_PRESETS, BootstrapConfig
from ..circuits.presets import preset as _preset
from ..errors import ContextError, EncodingError, LayoutError, MissingKeyError, ParameterError
from .encrypted_tensor import EncryptedTensor
from .layout import Layout

# key id -> weak references to the live contexts with those keys (client, public copies,
# device copies, loaded ones), in the order they appeared: unpickling an EncryptedTensor
# ties it to one of them (fhetorch/tensor/serialization.py)
_LIVE: dict[str, list] = {}


def _register(ctx: "Context"):
    if ctx.key_id is not None:
        refs = [r for r in _LIVE.get(ctx.key_id, []) if r() is not None]
        _LIVE[ctx.key_id] = refs + [weakref.ref(ctx)]


def find_context(key_id, params: dict, device) -> "Context | None":
    """A live context of this process with these keys and parameters (params.describe()),
    on `device`; None if there is none."""
    for ref in _LIVE.get(key_id, []) if isinstance(key_id, str) else []:
        c = ref()
        if c is not None and c.params.describe() == params:
            return c.to(device)
    return None


class Context(CKKSContext):
    """A CKKS context on one device.

        ctx = fhetorch.ckks.Context(preset="toy-n12", device="cpu")
        ctx.keygen()                 # secret, public, relinearisation, conjugation, +-2^i rotations
        ex = ctx.encrypt(torch.rand(1000, dtype=torch.float64))
        ctx.decrypt(ex * ex + 1.0)   # float64 tensor of shape (1000,)

    A context holding the secret key is the client's; `ctx.public()` is what a server gets.
    A bootstrappable preset (or `bootstrap=`, a BootstrapConfig for parameters made by
    fhetorch.circuits.bootstrap_config.bootstrap_params) gives `ctx.bootstrap_config` and
    `ctx.bootstrapper`.

    Raises ParameterError for an unknown preset (SecurityError for insecure custom parameters,
    or a `bootstrap` config whose ephemeral_weight makes an encapsulation key a modelled attack
    breaks: docs/parameters.md).
    """

    def __init__(self, preset: str | Params = "toy-n12", device="cpu", *, params: Params | None = None,
                 seed: int | None = None, bootstrap: BootstrapConfig | None = None):
        p = params if params is not None else (preset if isinstance(preset, Params) else _preset(preset))
        super().__init__(p, device, seed=seed)
        if bootstrap is None and p.name in BOOTSTRAP_PRESETS and p.level_bits is not None:
            bootstrap = BOOTSTRAP_PRESETS[p.name][1]
        if bootstrap is not None:
            bootstrap.check(p)
            check_encapsulation(p, bootstrap.ephemeral_weight, "Context")
        self.bootstrap_config = bootstrap
        self._bootstrapper = None
        self.switch_keys = None  # keygen(lut=...): CKKS <-> TFHE switching (circuits/switching)
        self._switcher = None
        self.key_id = None  # set when keys are generated; shared by public() and to() copies
        self._copies = {self.device: self}

    @property
    def bootstrapper(self) -> _bts.Bootstrapper:
        """This context's Bootstrapper (its DFTs' encoded diagonals live as long as the context).
        Raises ParameterError for parameters that are not bootstrappable."""
        if self._bootstrapper is None:
            self._bootstrapper = _bts.Bootstrapper(self, self._required_bootstrap_config())
        return self._bootstrapper

    @property
    def switcher(self) -> _switching.Switcher:
        """This context's CKKS <-> TFHE switch (its SlotToCoeff diagonals live as long as it).
        Raises MissingKeyError without the switching keys (ctx.keygen(lut=True))."""
        if self.switch_keys is None:
            raise MissingKeyError("lut: no scheme-switching keys; generate them on the client with "
                                  "ctx.keygen(lut=True) (the server's ctx.public() carries them)")
        if self._switcher is None:
            self._switcher = _switching.Switcher(self, self.switch_keys)
        return self._switcher

    def key_bytes(self) -> int:
        """Bytes of the evaluation keys, the scheme-switching keys included. Raises nothing."""
        return super().key_bytes() + (self.switch_keys.nbytes if self.switch_keys is not None else 0)

    def _required_bootstrap_config(self) -> BootstrapConfig:
        if self.bootstrap_config is None:
            raise ParameterError(f"bootstrap: parameters {self.params.name!r} are not bootstrappable; use a preset "
                                 "made for it (n16-bts40, n16-bts35, or toy-n13-bts for tests)")
        return self.bootstrap_config

    def memory_report(self):
        """Device memory of this context's tables, plans, constants, bootstrapping state and
        keys (print() it for a table): CKKSContext.memory_report plus bootstrapping's DFTs.
        Raises nothing."""
        circuits = [("bootstrapping (DFT diagonals)", self._bootstrapper.tensors)] if self._bootstrapper else []
        return super().memory_report(circuits)

    @property
    def key_id(self) -> str | None:
        """Names the keys (random, set at the first keygen): contexts with the same key id
        share one secret key, and their ciphertexts mix."""
        return self._key_id

    @key_id.setter
    def key_id(self, value):
        self._key_id = value
        _register(self)

    def keygen(self, rotations=(), *, bootstrap: bool = False, bootstrap_slots=None, lut=False, **kw):
        """Keys: secret, public, relinearisation, conjugation, +-2^i rotations, `rotations`.

        lut=True (or a TFHE preset name, or a fhetorch.circuits.switching.SwitchConfig) adds
        everything `ex.lut(fn, interval)` needs: bootstrapping's keys (implied), a fresh TFHE
        key set (bootstrapping and key-switching keys; its secrets are dropped once the keys are
        made), the key switches between the CKKS secret and the TFHE GLWE key, and the LWE
        packing keys (fhetorch/circuits/switching/keys.py; memory: ctx.switch_keys.nbytes).

        bootstrap=True adds what bootstrapping needs (the preset must be bootstrappable): the
        rotations of its DFTs for each slot count in `bootstrap_slots`, SlotToCoeff's keys only
        over the limbs of the levels it runs at, and the sparse-secret encapsulation keys.
        The default, the full packing's keys, bootstraps tensors of every size (a sparse one
        runs the circuit of the smallest packing with keys that holds it, its values repeated);
        bootstrap_slots=[n, ...] adds the faster circuits of those sparse slot counts (more key
        memory: fhetorch.circuits.bootstrap.estimate_key_bytes; `ctx.key_bytes()` after).

        Raises ContextError on a public context (no secret key), ParameterError with
        bootstrap=True on a preset that is not bootstrappable, SlotError for a bootstrap slot
        count that is not a power of two up to ctx.slots, IntegerArgumentError for a rotation
        step that is not an int.
        """
        first = self.secret_key is None
        switch = None
        if lut is not False and lut is not None:
            switch = _switching.switch_config(self.params.name, lut)
            bootstrap = True
        if bootstrap:
            cfg = self._required_bootstrap_config()
            slots = [self.slots] if bootstrap_slots is None else [int(s) for s in bootstrap_slots]
            for n in slots:
                self.encoder.check_slots(n)
            top, low = set(rotations), dict(kw.pop("low_level_rotations", None) or {})
            for step, lvl in _bts.key_levels(self.params, cfg, slots).items():
                if lvl >= self.max_level:
                    top.add(step)
                else:
                    low[step] = max(low.get(step, 0), lvl)
            rotations = sorted(top)
            kw.update(low_level_rotations=low, encapsulation_weight=cfg.ephemeral_weight)
        super().keygen(rotations, **kw)
        if first:
            self.key_id = secrets.token_hex(8)
        if switch is not None:
            self.switch_keys = _switching.generate_switch_keys(self, switch)
            self._switcher = None
        return self

    # --- tensors ---------------------------------------------------------------------
    def encrypt(self, t, *, level: int | None = None) -> EncryptedTensor:
        """Pack a tensor into one ciphertext (at most `slots` values) or several (chunks of
        `slots` values in order).

        Raises MissingKeyError before keygen(), EncodingError for an empty tensor, NaN/inf,
        values too large for the level's scale, meta or sparse tensors, LevelError for a level
        outside [0, max_level], IntegerArgumentError for a level that is not an int."""
        t = torch.as_tensor(t)
        check_dense(t, "encrypt")
        is_complex = t.is_complex()
        values = t.detach().to(torch.complex128 if is_complex else torch.float64).flatten()
        n = values.numel()
        if n == 0:
            raise EncodingError("encrypt: empty tensor")
        if level is not None:
            level = as_level(level, self.max_level, "encrypt")
        if n > self.slots:  # several ciphertexts of full slots, the last one padded
            cts = []
            for j in range(0, n, self.slots):
                chunk = torch.zeros(self.slots, dtype=values.dtype)
                part = values[j : j + self.slots]
                chunk[: part.numel()] = part
                cts.append(self.encrypt_vector(chunk.to(self.device), level=level, slots=self.slots))
            return EncryptedTensor(self, cts, t.shape, is_complex)
        slots = 1 << max(0, math.ceil(math.log2(n)))
        padded = torch.zeros(slots, dtype=values.dtype)
        padded[:n] = values
        ct = self.encrypt_vector(padded.to(self.device), level=level, slots=slots)
        return EncryptedTensor(self, ct, t.shape, is_complex)

    def decrypt(self, et: EncryptedTensor) -> torch.Tensor:
        """float64 (complex128 for complex input) tensor of the encrypted tensor's shape.

        Raises ContextError for anything but an EncryptedTensor, one of another context, or on
        a public context (no secret key), LayoutError for a compiled model's output (use
        cm.decrypt), ScaleError for a ciphertext whose scale makes no sense."""
        if not isinstance(et, EncryptedTensor):
            raise ContextError(f"decrypt: expected an EncryptedTensor, got {type(et).__name__}")
        self.check_same_keys(et.ctx, "decrypt")
        if et.layout is not None and not isinstance(et.layout, Layout):
            raise LayoutError("decrypt: this tensor is packed in a compiled model's layout; use cm.decrypt(et)")
        if et.device != self.device:
            et = et.to(self.device)
        if et.multi:
            v = torch.cat([self.decrypt_vector(ct) for ct in et.ciphertexts])
        else:
            v = self.decrypt_vector(et.ciphertext)
        if isinstance(et.layout, Layout):  # an image layer's output (tensor/image.py)
            v = et.layout.unpack(v).reshape(et.shape)
        else:
            v = v[: et.numel()].reshape(et.shape)
        return v if et.is_complex() else v.real.contiguous()

    def check_same_keys(self, other: "Context", what: str):
        """Raises ContextError (naming `what`) unless `other` holds this context's keys and parameters."""
        if other is self:
            return
        if self.key_id is None or other.key_id != self.key_id or other.params != self.params:
            raise ContextError(f"{what}: the ciphertext belongs to another context (other keys or parameters)")

    # --- copies ------------------------------------------------------------------------
    def public(self) -> "Context":
        """The same context without the secret key: what a server gets.

        Raises nothing (a public context's decrypt and keygen raise ContextError)."""
        c = super().public()
        c._copies = {c.device: c}
        return c

    def __copy__(self) -> "Context":
        c = super().__copy__()
        c._copies = {c.device: c}
        return c

    def _copy(self, device) -> "Context":
        c = super()._copy(device)
        c._bootstrapper = None  # a copy's bootstrapping reads the copy's keys and device
        c._switcher = None
        if self.switch_keys is not None and device != self.device:
            c.switch_keys = self.switch_keys.to(device)
        _register(c)
        return c

    def to(self, device) -> "Context":
        """This context on `device` (one copy per device, keys shared).

        Raises RuntimeError (torch's) for a device this build or machine lacks."""
        device = normalize_device(device)
        c = self._copies.get(device)
        if c is None:
            c = self._copy(device)
            self._copies[device] = c  # shared dict: every copy finds the others
        return c
