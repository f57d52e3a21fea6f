"""Prime chains with rational rescaling (Cheddar 3.2): which primes each level holds.

A chain is a list of levels; level l uses a contiguous slice of the stored prime list
[t_(K-1) ... t_0, q_0 ... q_(M-1)] (Cheddar's inverted-terminal layout): ~25-bit terminal
primes t and ~30-bit main primes q. Rescaling from level l to l-1 divides by the primes
that level l-1 lacks and multiplies by the ones it adds, so each level costs ~scale bits
although every prime is below 2^31. Each level has a nominal scale: a product at level l,
rescaled, lands exactly on level l-1's. See docs/parameters.md.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..errors import InternalError, ParameterError
from .._ring import largest_ntt_primes
from .._ring.primes import ntt_prime_candidates

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
class Chain:
    """The primes of a chain and where each level sits in them."""

    primes: tuple  # Q_max in storage order
    special_primes: tuple  # P: alpha primes, each larger than any digit's
    level_limbs: tuple  # level -> (start, stop) slice of `primes`
    level_scales: tuple  # level -> nominal scale (float)

    @property
    def log_pq(self) -> float:
        return sum(math.log2(q) for q in self.primes + self.special_primes)


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
    """Terminal/main prime counts (k, m) per level for per-level scale bits (e.g. the
    levels of bootstrapping). Going up into level l adds 2 bits[l] - bits[l-1] bits (a product at level l,
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
            raise ParameterError(f"no prime counts reach level {lvl}'s scale 2^{bits[lvl]} (step {step} bits)")
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


PER_LEVEL_KMAX = 8  # terminal primes a chain of per-level scales may hold (more ways to make each step)


def build_chain(log_n: int, chain: str, dnum: int, *, levels: int | None = None, level_bits=None) -> Chain:
    """The chain `chain` (a CHAINS name) at N = 2^log_n: `levels` levels at the chain's scale,
    or one level per entry of `level_bits` (nominal scale bits of levels 0, 1, ..., top),
    with ceil(|Q_max| / dnum) special primes."""
    if level_bits is None:
        counts = _level_counts(chain, levels)
        t, q, log_scale = _choose_primes(log_n, chain, counts)
    else:
        counts = _dp_counts(chain, list(level_bits), PER_LEVEL_KMAX)
        t, q, log_scale = _choose_primes(log_n, chain, counts, list(level_bits))
    kmax = len(t)
    primes = tuple(reversed(t)) + tuple(q)
    alpha = -(-len(primes) // dnum)
    return Chain(primes=primes, special_primes=tuple(largest_ntt_primes(log_n, alpha, exclude=primes)),
                 level_limbs=tuple((kmax - k, kmax + m) for k, m in counts),
                 level_scales=tuple(2.0 ** ls for ls in log_scale))
