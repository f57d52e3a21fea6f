"""Key generation, the client's role: secret, public, relinearisation, rotation (Galois) and
bootstrapping's encapsulation keys of a CKKSContext."""
from __future__ import annotations

from dataclasses import dataclass

from .. import _ops
from ..errors import ContextError
from .._rlwe import SwitchingKey, gen_public, gen_secret, gen_switching, gen_switching_level
from .arguments import as_int
from .sparse_security import check_encapsulation


def galois_element(step: int, n: int) -> int:
    """Galois element of a left rotation by `step` slots (5^step mod 2N)."""
    return pow(5, step % (n // 2), 2 * n)


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


class KeyGenerator:
    """Makes a context's keys and stores them in it (the context holds keys; this role makes
    them). Needs the secret key, which it draws first on a context without keys."""

    def __init__(self, ctx):
        self.ctx = ctx

    def generate(self, rotations=(), *, power_of_two_rotations: bool = True, conjugation: bool = True,
                 relinearization: bool = True, low_level_rotations: dict | None = None,
                 encapsulation_weight: int = 0):
        """Secret (if none yet), public, relinearisation, conjugation and rotation keys.

        Rotation keys: one for each step in `rotations`, plus +-2^i for every i when
        power_of_two_rotations (so any step composes from at most log2(slots) rotations).
        low_level_rotations {step: level}: keys only valid up to that level (fewer limbs:
        bootstrapping's SlotToCoeff), unless the step is also in the full set.
        encapsulation_weight > 0: the sparse-secret encapsulation keys of bootstrapping.
        Raises ContextError on a public context (no secret key), IntegerArgumentError for a
        rotation step that is not an int, SecurityError for an encapsulation weight a modelled
        attack breaks at secure parameters (before any key is made).
        """
        ctx = self.ctx
        p = ctx.params
        check_encapsulation(p, encapsulation_weight, "keygen")
        if ctx.secret_key is None:
            if ctx.public_key is not None:
                raise ContextError("keygen: this is a public context (no secret key); generate keys on the client")
            ctx.secret_key = gen_secret(ctx.ring, ctx.sampler, p.hamming_weight)
        sk = ctx.secret_key
        if ctx.public_key is None:
            ctx.public_key = gen_public(ctx.ring, ctx.sampler, sk, len(p.primes))
        if relinearization and ctx.relin_key is None:
            ctx.relin_key = self.switching_key(_ops.mul(sk.s, sk.s, ctx.ring.basis().mod))
        steps = set(as_int(k, "keygen", "a rotation step") for k in rotations)
        if power_of_two_rotations:
            i = 1
            while i < p.slots:
                steps |= {i, -i}
                i *= 2
        full = {galois_element(k, p.n) for k in steps if k % p.slots}
        if conjugation:
            full.add(2 * p.n - 1)
        caps = {}
        for k, lvl in (low_level_rotations or {}).items():
            g = galois_element(int(k), p.n)
            if int(k) % p.slots and g not in full:
                caps[g] = max(caps.get(g, 0), int(lvl))
        for g in sorted(full):
            if g not in ctx.galois_keys or ctx.galois_keys[g].key_q.shape[2] < len(p.primes):
                ctx.galois_keys[g] = self.switching_key(_ops.automorphism(sk.s, g))
        for g, lvl in sorted(caps.items()):
            stop = p.key_limbs(lvl).stop
            if g not in ctx.galois_keys or ctx.galois_keys[g].key_q.shape[2] < stop:
                ctx.galois_keys[g] = self.switching_key(_ops.automorphism(sk.s, g), q_stop=stop)
        if encapsulation_weight and (ctx.encapsulation_keys is None
                                     or ctx.encapsulation_keys.weight != encapsulation_weight):
            ctx.encapsulation_keys = self.encapsulation_keys(encapsulation_weight)

    def switching_key(self, s_from, q_stop=None) -> SwitchingKey:
        """A key switching s_from (all limbs, NTT) to the secret key, over Q limbs [0, q_stop)."""
        ctx = self.ctx
        return gen_switching(ctx.ring, ctx.sampler, ctx.secret_key, s_from, len(ctx.params.primes), ctx.params.alpha,
                             q_stop=q_stop)

    def encapsulation_keys(self, weight: int) -> EncapsulationKeys:
        # The ephemeral secret exists only here: it is dropped once its two keys are made.
        ctx = self.ctx
        eph = gen_secret(ctx.ring, ctx.sampler, weight)
        lvl0, special = ctx.params.encapsulation_limbs
        to_sparse = gen_switching_level(ctx.ring, ctx.sampler, eph, ctx.secret_key.s, lvl0, special)
        return EncapsulationKeys(to_sparse, self.switching_key(eph.s), special, weight)
