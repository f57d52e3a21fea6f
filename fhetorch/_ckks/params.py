"""CKKS parameters: prime chains with rational rescaling, presets, security checks.

A chain is a list of levels; level l uses a contiguous slice of the stored prime list
[t_(K-1) ... t_0, q_0 ... q_(M-1)] (Cheddar's inverted-terminal layout): ~25-bit terminal
primes t and ~30-bit main primes q. Rescaling from level l to l-1 divides by the primes
that level l-1 lacks and multiplies by the ones it adds (rational rescaling, Cheddar 3.2),
so each level costs ~scale bits although every prime is below 2^31. See docs/parameters.md.
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

from ..errors import InsecureParametersWarning, InternalError, ParameterError, SecurityError
from .._ring import largest_ntt_primes
from .._ring.primes import ntt_prime_candidates

# Homomorphic Encryption Standard (2018), ternary secret, sigma = 3.2, 128-bit classical:
# max log2(PQ) per log2(N). N = 2^16 is the extrapolation libraries use (a hard limit here).
HE_STANDARD_128 = {10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772}

# Rescaling cycles: (terminal bits, main bits, start (k, m), steps (dk, dm) tried in order, max k).
# Each step adds scale_bits = tbits*dk + qbits*dm to log2(Q) going one level up.
CHAINS = {
    "rr40": dict(scale_bits=40, tbits=25, qbits=30, start=(2, 0), steps=[(-2, 3), (4, -2)], kmax=4),
    "rr35": dict(scale_bits=35, tbits=25, qbits=30, start=(2, 0), steps=[(-1, 2), (5, -3)], kmax=5),
    "dr56": dict(scale_bits=56, tbits=25, qbits=28, start=(0, 3), steps=[(0, 2)], kmax=0),
    # ~30-bit primes dropped two at a time: the benchmark shapes of Cheddar's Table 7
    "dr60": dict(scale_bits=60, tbits=25, qbits=30, start=(0, 2), steps=[(0, 2)], kmax=0),
}


@dataclass(frozen=True)
class BootstrapConfig:
    """Where bootstrapping's levels sit in a chain, and its EvalMod settings.

    Levels, bottom to top: 0 .. user_levels at the user scale (a bootstrap returns a
    ciphertext at level `user_levels`); then SlotToCoeff's levels; then EvalMod's; then
    CoeffToSlot's, whose top is the chain's top (the ModRaise target). Values inside
    bootstrapping need more precision than the user scale gives: EvalMod's output (sin 2 pi x
    ~ 2 pi eps) is ~2^-14 of a message coefficient's ModRaised size, its errors are magnified
    by Q_0 / Delta and by the SlotToCoeff DFT (~sqrt(slots)). So CoeffToSlot's levels carry
    2^cts_bits, EvalMod's (and SlotToCoeff's input level) 2^evalmod_bits, SlotToCoeff's
    other levels 2^stc_bits (Cheddar uses 2^55-2^58 inside bootstrapping).

    EvalMod (Han-Ki 2020, Bossuat et al. 2021) evaluates cos(2 pi (x - 1/4) / 2^r) on
    x in [-K, K] by a Chebyshev interpolant of `cos_degree`, then r double-angle steps give
    sin(2 pi x); `arcsine` adds a degree-3 arcsine correction (2 levels). With sparse-secret
    encapsulation (Bossuat et al. 2022; `ephemeral_weight` > 0) ModRaise runs under a
    Hamming-weight-`ephemeral_weight` secret, which bounds |x| by K = k_range.
    `message_ratio`: log2 of Q_0 / (scale of the message at ModRaise) for 2^15 slots (the
    input is first multiplied by an integer to get there; fewer slots, whose coefficients
    are larger, keep half a bit more per halving of the slot count).
    """

    user_levels: int
    cts_levels: int = 4
    stc_levels: int = 3
    cts_bits: int = 55
    evalmod_bits: int = 60
    stc_bits: int = 50
    k_range: int = 16
    double_angles: int = 2
    cos_degree: int = 63
    arcsine: bool = False
    ephemeral_weight: int = 32
    message_ratio: int = 6

    @property
    def evalmod_levels(self) -> int:
        return (self.cos_degree).bit_length() + self.double_angles + (2 if self.arcsine else 0)

    @property
    def depth(self) -> int:
        """Levels one bootstrap consumes (ModRaise target minus output level)."""
        return self.cts_levels + self.evalmod_levels + self.stc_levels

    @property
    def top(self) -> int:
        return self.user_levels + self.depth

    @property
    def evalmod_input_level(self) -> int:
        return self.top - self.cts_levels

    @property
    def stc_input_level(self) -> int:
        return self.user_levels + self.stc_levels

    def level_bits(self, user_bits: int) -> list:
        """Nominal scale bits of every level 0 .. top."""
        def bits(lvl):
            if lvl <= self.user_levels:
                return user_bits
            if lvl < self.stc_input_level:
                return self.stc_bits
            if lvl == self.stc_input_level:  # EvalMod's output meets SlotToCoeff's plaintexts, which
                return min(self.evalmod_bits, 60)  # are encoded at this scale in int64 (< 2^62)
            return self.evalmod_bits if lvl <= self.evalmod_input_level else self.cts_bits
        return [bits(lvl) for lvl in range(self.top + 1)]

    def describe(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PresetInfo:
    name: str
    N: int
    log_pq: float
    dnum: int
    levels: int
    scale_bits: int
    slots: int
    security_bits: int  # 0 for toy presets
    bootstrappable: bool = False
    levels_after_bootstrap: int | None = None


@dataclass(frozen=True)
class Params:
    """Validated, immutable CKKS parameters (make them with `make_params` or a preset)."""

    log_n: int
    chain: str
    primes: tuple  # Q_max in storage order
    special_primes: tuple  # P
    level_limbs: tuple  # level -> (start, stop) slice of `primes`
    level_scales: tuple  # level -> nominal scale (float)
    dnum: int
    hamming_weight: int | None = None  # None: dense uniform ternary secret
    name: str = "custom"
    security_bits: int = 128
    bootstrap: BootstrapConfig | None = None  # None: not bootstrappable

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
        """The limb range of `level` in `primes`. Raises IndexError for a level out of range."""
        s, e = self.level_limbs[level]
        return range(s, e)

    def info(self) -> PresetInfo:
        """The PresetInfo summary (N, log PQ, dnum, levels, scale, slots, security). Raises nothing."""
        bts = self.bootstrap
        return PresetInfo(self.name, self.n, round(self.log_pq, 2), self.dnum, self.max_level, self.scale_bits,
                          self.slots, self.security_bits, bts is not None, bts.user_levels if bts else None)

    def describe(self) -> dict:
        """Plain-data description used by serialization to check compatibility. Raises nothing."""
        return dict(log_n=self.log_n, chain=self.chain, primes=list(self.primes),
                    special_primes=list(self.special_primes), level_limbs=[list(x) for x in self.level_limbs],
                    dnum=self.dnum, hamming_weight=self.hamming_weight, name=self.name,
                    security_bits=self.security_bits,
                    bootstrap=self.bootstrap.describe() if self.bootstrap else None)


def _level_counts(kind: str, levels: int):
    c = CHAINS[kind]
    k, m = c["start"]
    counts = [(k, m)]
    for _ in range(levels):
        for dk, dm in c["steps"]:
            if 0 <= k + dk <= c["kmax"] and m + dm >= 0:
                k, m = k + dk, m + dm
                break
        else:
            raise InternalError("make_params: the rescaling cycle is stuck")
        counts.append((k, m))
    return counts


def _dp_counts(kind: str, bits: list, kmax: int):
    """Terminal/main prime counts (k, m) per level for per-level scale bits (bootstrappable
    chains). Going up into level l adds 2 bits[l] - bits[l-1] bits (a product at level l,
    rescaled, lands on level l-1's scale), made of dk terminal and dm main primes; a dynamic
    programme over k picks the steps that keep log Q_max, then the total limb count, small."""
    c = CHAINS[kind]
    tb, qb = c["tbits"], c["qbits"]
    k0, m0 = c["start"]
    # (k, max k, max m so far) -> (limbs summed over levels, path); log Q_max = tb max k + qb max m
    states = {(k0, k0, m0): (0, [(k0, m0)])}
    for lvl in range(1, len(bits)):
        step = 2 * bits[lvl] - bits[lvl - 1]
        nxt = {}
        for (k, kmx, mmx), (cost, path) in states.items():
            m = path[-1][1]
            for dk in range(-kmax, kmax + 1):
                rem = step - tb * dk
                if rem % qb or not 0 <= k + dk <= kmax or m + rem // qb < 0:
                    continue
                k2, m2 = k + dk, m + rem // qb
                if k2 + m2 == 0:
                    continue
                key = (k2, max(kmx, k2), max(mmx, m2))
                if key not in nxt or cost + k2 + m2 < nxt[key][0]:
                    nxt[key] = (cost + k2 + m2, path + [(k2, m2)])
        if not nxt:
            raise ParameterError(f"make_params: no prime counts reach level {lvl}'s scale 2^{bits[lvl]} "
                                 f"(step {step} bits); use another chain or fewer levels")
        states = nxt

    def q_bits(item):
        (k, kmx, mmx), (cost, path) = item
        return (tb * kmx + qb * mmx, cost)

    return min(states.items(), key=q_bits)[1][1]


def _choose_primes(log_n: int, kind: str, counts, bits=None):
    """Pick terminal and main primes level by level (going up) so that every nominal scale
    stays within a small fraction of a bit of 2^scale_bits.

    Nominal scales follow scale[l-1] = scale[l]^2 * A / D (a product at level l rescaled
    lands exactly on the next level's scale); computed upwards, scale[l] =
    sqrt(scale[l-1] * D / A) halves any deviation, so a greedy choice of new primes is
    stable.
    """
    c = CHAINS[kind]
    bits = [c["scale_bits"]] * len(counts) if bits is None else bits
    kmax = max(k for k, _ in counts)
    mmax = max(m for _, m in counts)
    pool_t = list(itertools.islice(ntt_prime_candidates(log_n, c["tbits"]), kmax + 24)) if kmax else []
    pool_q = list(itertools.islice(ntt_prime_candidates(log_n, c["qbits"], exclude=pool_t), mmax + 24))
    t, q = [], []

    def take(pool, used, n_new, target_log, fixed_log):
        """Choose n_new unused primes from pool making fixed_log + sum(log) closest to target_log."""
        free = [p for p in pool if p not in used][:16]
        if n_new == 0:
            return []
        best = min(itertools.combinations(free, n_new),
                   key=lambda comb: abs(fixed_log + sum(math.log2(p) for p in comb) - target_log))
        return list(best)

    k0, m0 = counts[0]
    t += pool_t[:k0]
    q += [p for p in pool_q if p not in t][:m0]
    log_scale = [float(bits[0])]
    for lvl in range(1, len(counts)):
        s = bits[lvl]
        (kp, mp), (k, m) = counts[lvl - 1], counts[lvl]
        # primes of this level beyond those chosen so far are new
        new_t, new_q = max(0, k - len(t)), max(0, m - len(q))
        # D: primes in level lvl not in lvl-1; A: in lvl-1 not in lvl (all already chosen)
        log_a = sum(math.log2(p) for p in t[k:kp]) + sum(math.log2(p) for p in q[m:mp])
        known_d = sum(math.log2(p) for p in t[kp:min(k, len(t))]) + sum(math.log2(p) for p in q[mp:min(m, len(q))])
        target_d = 2 * s - log_scale[-1] + log_a  # so that log scale[lvl] = s
        if new_q:  # new terminal primes (if any) in pool order, the main ones aimed at the target
            t += [p for p in pool_t if p not in t][:new_t]
            known_d = sum(math.log2(p) for p in t[kp:k]) + sum(math.log2(p) for p in q[mp:min(m, len(q))])
            q += take(pool_q, q, new_q, target_d, known_d)
        elif new_t:
            t += take(pool_t, t, new_t, target_d, known_d)
        log_d = sum(math.log2(p) for p in t[kp:k]) + sum(math.log2(p) for p in q[mp:m])
        log_scale.append((log_scale[-1] + log_d - log_a) / 2)
    return t, q, log_scale


def make_params(log_n: int, *, chain: str = "rr40", levels: int | None = None, dnum: int = 4,
                hamming_weight: int | None = None, name: str = "custom", allow_insecure: bool = False,
                bootstrap: BootstrapConfig | dict | None = None, _security_bits: int | None = None) -> Params:
    """Build and validate a parameter set.

    levels=None takes the most levels that keep log2(PQ) within the HE-standard 128-bit
    bound for N = 2^log_n. Parameters over the bound raise SecurityError unless
    allow_insecure=True (then they warn with InsecureParametersWarning).

    bootstrap: a BootstrapConfig (or its fields as a dict) makes a bootstrappable chain:
    user levels at the chain's scale, bootstrapping's levels above them (levels is then
    implied: bootstrap.top).

    Raises ParameterError for an unknown chain, log_n outside [10, 17], dnum or levels below 1,
    levels that contradict bootstrap.top or that no primes reach; SecurityError (a
    ParameterError) for parameters below 128-bit security without allow_insecure=True.
    """
    if isinstance(bootstrap, dict):
        bootstrap = BootstrapConfig(**bootstrap)
    if chain not in CHAINS:
        raise ParameterError(f"make_params: unknown chain {chain!r}; choose one of {sorted(CHAINS)}")
    if not 10 <= log_n <= 17:
        raise ParameterError(f"make_params: log_n must be in [10, 17], got {log_n}")
    if dnum < 1:
        raise ParameterError(f"make_params: dnum must be >= 1, got {dnum}")
    bound = HE_STANDARD_128.get(log_n)
    if bootstrap is not None:
        if levels is not None and levels != bootstrap.top:
            raise ParameterError(f"make_params: a bootstrappable chain has bootstrap.top = {bootstrap.top} levels; "
                                 f"got levels={levels}")
        levels = bootstrap.top
    if levels is None:
        if bound is None:
            raise ParameterError(f"make_params: give levels= for N = 2^{log_n} (no HE-standard bound)")
        levels = 1
        while _build(log_n, chain, levels + 1, dnum, hamming_weight, name, 0).log_pq <= bound:
            levels += 1
    if levels < 1:
        raise ParameterError(f"make_params: levels must be >= 1, got {levels}")
    p = _build(log_n, chain, levels, dnum, hamming_weight, name, 0, bootstrap)
    secure = bound is not None and p.log_pq <= bound and hamming_weight is None
    if _security_bits is not None:
        sec = _security_bits
    else:
        sec = 128 if secure else 0
    if not secure and not allow_insecure:
        why = (f"log2(PQ) = {p.log_pq:.1f} exceeds the HE-standard 128-bit bound {bound} for N = 2^{log_n}"
               if bound is not None and p.log_pq > bound else
               "sparse secrets outside bootstrapping are not covered by the HE standard" if hamming_weight else
               f"N = 2^{log_n} is below the HE-standard table")
        raise SecurityError(f"make_params: insecure parameters: {why}; use fewer levels, a larger N, "
                             "or pass allow_insecure=True for tests")
    if not secure:
        warnings.warn(f"parameters {name!r} are not 128-bit secure (log2 PQ = {p.log_pq:.1f}); use them for tests only",
                      InsecureParametersWarning, stacklevel=2)
    return Params(**{**p.__dict__, "security_bits": sec})


BTS_KMAX = 8  # terminal primes a bootstrappable chain may hold (more ways to make each step)


def _build(log_n, chain, levels, dnum, hamming_weight, name, sec, bootstrap=None) -> Params:
    if bootstrap is None:
        counts = _level_counts(chain, levels)
        t, q, log_scale = _choose_primes(log_n, chain, counts)
    else:
        bits = bootstrap.level_bits(CHAINS[chain]["scale_bits"])
        counts = _dp_counts(chain, bits, BTS_KMAX)
        t, q, log_scale = _choose_primes(log_n, chain, counts, bits)
    kmax = len(t)
    primes = tuple(reversed(t)) + tuple(q)
    level_limbs = tuple((kmax - k, kmax + m) for k, m in counts)
    alpha = -(-len(primes) // dnum)
    special = tuple(largest_ntt_primes(log_n, alpha, exclude=primes))
    return Params(log_n=log_n, chain=chain, primes=primes, special_primes=special, level_limbs=level_limbs,
                  level_scales=tuple(2.0 ** ls for ls in log_scale), dnum=dnum, hamming_weight=hamming_weight,
                  name=name, security_bits=sec, bootstrap=bootstrap)


# --- presets -------------------------------------------------------------------------
_PRESETS = {
    # insecure test sizes: scale >= 2^30, >= 8 levels
    "toy-n10": dict(log_n=10, chain="rr35", levels=8, dnum=3),
    "toy-n12": dict(log_n=12, chain="rr40", levels=10, dnum=3),
    "toy-n13": dict(log_n=13, chain="rr40", levels=16, dnum=4),
    # 128-bit secure, N = 2^16, most levels within the HE-standard bound
    "n16-rr40": dict(log_n=16, chain="rr40", levels=None, dnum=4),
    "n16-rr35": dict(log_n=16, chain="rr35", levels=None, dnum=4),
    "n16-dr56": dict(log_n=16, chain="dr56", levels=None, dnum=4),
    # bootstrappable (fhetorch/circuits/bootstrap.py): levels left after a bootstrap = user_levels
    # precise: 2^55 / 2^65 / 2^50 inside bootstrapping, 12 levels left at 2^40 (>= 21 bits on
    # the H100; user_levels=13 with evalmod_bits=60 fits too and measured 20.3-20.7 bits)
    "toy-n13-bts": dict(log_n=13, chain="rr40", dnum=3, bootstrap=dict(user_levels=6, cts_levels=3, stc_levels=2)),
    "n16-bts40": dict(log_n=16, chain="rr40", dnum=5, bootstrap=dict(user_levels=12, evalmod_bits=65)),
    # more levels (17 at 2^35), lower scales inside bootstrapping: less precise
    "n16-bts35": dict(log_n=16, chain="rr35", dnum=6,
                      bootstrap=dict(user_levels=17, cts_bits=50, evalmod_bits=55, stc_bits=45)),
}
_cache: dict = {}


def preset(name: str) -> Params:
    """The named preset's Params (toy presets warn with InsecureParametersWarning).

    Raises ParameterError for an unknown name."""
    if name not in _PRESETS:
        raise ParameterError(f"preset: unknown preset {name!r}; available: {', '.join(_PRESETS)}")
    toy = name.startswith("toy-")
    if name not in _cache:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureParametersWarning)
            _cache[name] = make_params(name=name, allow_insecure=toy, **_PRESETS[name])
    if toy:
        warnings.warn(f"preset {name!r} is insecure (toy size); use it for tests only", InsecureParametersWarning,
                      stacklevel=2)
    return _cache[name]


def presets() -> dict:
    """All presets as {name: PresetInfo}. Raises nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return {name: preset(name).info() for name in _PRESETS}
