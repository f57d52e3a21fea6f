"""CKKS parameters in two steps: a plain `ParamsLiteral` the user fills, and the immutable,
validated `Params` that `make_params` builds from it (Lattigo's ParametersLiteral ->
Parameters). Presets are literals (fhetorch/_ckks/presets.py); the prime chain comes from
fhetorch/_ckks/chain.py; the security check is the Homomorphic Encryption Standard's.

The pattern is the one every scheme's parameters follow (TFHE's will too): the literal
holds only what a user chooses, with every default listed in its docstring; validation
and derivation happen once, in the constructor; the validated object is frozen and
describes itself as plain data (serialization rebuilds and compares it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import LevelError, ParameterError, SecurityError, warn
from .chain import CHAINS, build_chain

# Homomorphic Encryption Standard (2018), ternary secret, sigma = 3.2, 128-bit classical:
# max log2(PQ) per log2(N). N = 2^16 is the extrapolation libraries use (a hard limit here).
HE_STANDARD_128 = {10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772}


@dataclass
class ParamsLiteral:
    """What a user chooses for a CKKS parameter set; `make_params` validates it into Params.

    log_n           log2 of the ring degree N, in [10, 17] (required)
    chain           "rr40" (default), "rr35", "dr56" or "dr60": the rescaling chain and its
                    scale (2^40, 2^35: rational rescaling; docs/parameters.md)
    levels          levels above level 0; None (default): the most that keep log2(PQ)
                    within the HE-standard 128-bit bound for N (implied by level_bits)
    dnum            4 (default): key-switching digits
    hamming_weight  None (default): a dense uniform ternary secret; an int: a sparse secret
                    of that weight (not covered by the HE standard: insecure)
    level_bits      None (default): every level at the chain's scale; a sequence: the
                    nominal scale bits of levels 0, 1, ..., top (e.g. bootstrapping's levels,
                    fhetorch/circuits/bootstrap_config.py)
    name            "custom" (default); presets carry their name
    """

    log_n: int
    chain: str = "rr40"
    levels: int | None = None
    dnum: int = 4
    hamming_weight: int | None = None
    level_bits: tuple | None = None
    name: str = "custom"


@dataclass(frozen=True)
class Params:
    """Validated, immutable CKKS parameters (made by `make_params` from a ParamsLiteral)."""

    log_n: int
    chain: str
    primes: tuple  # Q_max in storage order
    special_primes: tuple  # P
    level_limbs: tuple  # level -> (start, stop) slice of `primes`; read it through limbs(level)
    level_scales: tuple  # level -> nominal scale (float)
    dnum: int
    hamming_weight: int | None = None  # None: dense uniform ternary secret
    name: str = "custom"
    security_bits: int = 128
    level_bits: tuple | None = None  # None: every level at the chain's scale

    @property
    def n(self) -> int:
        return 1 << self.log_n

    @property
    def slots(self) -> int:
        return self.n // 2

    @property
    def max_level(self) -> int:
        return len(self.level_limbs) - 1

    @property
    def scale_bits(self) -> int:
        return CHAINS[self.chain]["scale_bits"]

    @property
    def alpha(self) -> int:
        """Limbs per key-switching digit."""
        return -(-len(self.primes) // self.dnum)

    @property
    def log_pq(self) -> float:
        return sum(math.log2(q) for q in self.primes + self.special_primes)

    def limbs(self, level: int) -> range:
        """The limbs (indices into primes) of a level: the one accessor of a level's limbs.
        Raises LevelError for a level outside 0 .. max_level."""
        if not 0 <= level < len(self.level_limbs):
            raise LevelError(f"Params.limbs: level {level} is outside 0 .. {len(self.level_limbs) - 1}")
        s, e = self.level_limbs[level]
        return range(s, e)

    def key_limbs(self, level: int) -> range:
        """The Q limbs a switching key serving levels 0 .. level holds: 0 up to the highest stop
        among them (a level's limbs are a window of the chain, not a prefix: a low level can end
        higher than the levels above it). Raises LevelError for a level outside 0 .. max_level."""
        self.limbs(level)
        return range(0, max(e for _, e in self.level_limbs[: level + 1]))

    @property
    def special_limbs(self) -> range:
        """The limbs of the special primes P (after Q_max's in every ring of these parameters)."""
        return range(len(self.primes), len(self.primes) + len(self.special_primes))

    @property
    def encapsulation_limbs(self) -> tuple:
        """(Q limbs, special limbs) of bootstrapping's sparse-secret encapsulation key: level 0's
        limbs and one special prime more than they are (_ckks/keygen.py)."""
        lvl0, sp = self.limbs(0), self.special_limbs
        return lvl0, range(sp.start, sp.start + min(len(lvl0) + 1, len(sp)))

    def literal(self) -> ParamsLiteral:
        """The literal these parameters are made from. Raises nothing."""
        return ParamsLiteral(log_n=self.log_n, chain=self.chain, levels=self.max_level, dnum=self.dnum,
                             hamming_weight=self.hamming_weight, level_bits=self.level_bits, name=self.name)

    def describe(self) -> dict:
        """Plain-data description used by serialization to check compatibility. Raises nothing."""
        return dict(log_n=self.log_n, chain=self.chain, primes=list(self.primes),
                    special_primes=list(self.special_primes), level_limbs=[list(x) for x in self.level_limbs],
                    dnum=self.dnum, hamming_weight=self.hamming_weight, name=self.name,
                    security_bits=self.security_bits,
                    level_bits=None if self.level_bits is None else list(self.level_bits))


def make_params(literal: ParamsLiteral | int | None = None, *, allow_insecure: bool = False, **fields) -> Params:
    """Validate a ParamsLiteral into Params: `make_params(ParamsLiteral(16, chain="rr35"))`, or
    the literal's fields as arguments: `make_params(16, chain="rr35")` (fields given with a
    literal replace its own).

    Parameters over the HE-standard 128-bit bound for N = 2^log_n (or with a sparse secret)
    raise SecurityError (a ParameterError) unless allow_insecure=True (then they warn with
    InsecureParametersWarning). Raises ParameterError for an unknown chain, log_n outside
    [10, 17], dnum < 1, levels < 1, levels disagreeing with level_bits, or level scales no
    prime chain reaches.
    """
    if isinstance(literal, ParamsLiteral):
        lit = replace(literal, **fields)
    else:
        lit = ParamsLiteral(**fields) if literal is None else ParamsLiteral(literal, **fields)
    log_n, chain = lit.log_n, lit.chain
    if chain not in CHAINS:
        raise ParameterError(f"make_params: unknown chain {chain!r}; choose one of {sorted(CHAINS)}")
    if not 10 <= log_n <= 17:
        raise ParameterError(f"make_params: log_n must be in [10, 17], got {log_n}")
    if lit.dnum < 1:
        raise ParameterError(f"make_params: dnum must be >= 1, got {lit.dnum}")
    bound = HE_STANDARD_128.get(log_n)
    levels, level_bits = lit.levels, None if lit.level_bits is None else tuple(int(b) for b in lit.level_bits)
    if level_bits is not None:
        if levels is not None and levels != len(level_bits) - 1:
            raise ParameterError(f"make_params: level_bits gives {len(level_bits) - 1} levels; got levels={levels}")
        levels = len(level_bits) - 1
    if levels is None:
        if bound is None:
            raise ParameterError(f"make_params: give levels= for N = 2^{log_n} (no HE-standard bound)")
        levels = 1
        while build_chain(log_n, chain, lit.dnum, levels=levels + 1).log_pq <= bound:
            levels += 1
    if levels < 1:
        raise ParameterError(f"make_params: levels must be >= 1, got {levels}")
    c = build_chain(log_n, chain, lit.dnum, levels=levels, level_bits=level_bits)
    secure = bound is not None and c.log_pq <= bound and lit.hamming_weight is None
    if not secure and not allow_insecure:
        why = (f"log2(PQ) = {c.log_pq:.1f} exceeds the HE-standard 128-bit bound {bound} for N = 2^{log_n}"
               if bound is not None and c.log_pq > bound else
               "sparse secrets outside bootstrapping are not covered by the HE standard" if lit.hamming_weight else
               f"N = 2^{log_n} is below the HE-standard table")
        raise SecurityError(f"make_params: insecure parameters: {why}; use fewer levels, a larger N, "
                            "or pass allow_insecure=True for tests")
    if not secure:
        warn(f"parameters {lit.name!r} are not 128-bit secure (log2 PQ = {c.log_pq:.1f}); use them for tests only")
    return Params(log_n=log_n, chain=chain, primes=c.primes, special_primes=c.special_primes,
                  level_limbs=c.level_limbs, level_scales=c.level_scales, dnum=lit.dnum,
                  hamming_weight=lit.hamming_weight, name=lit.name, security_bits=128 if secure else 0,
                  level_bits=level_bits)
