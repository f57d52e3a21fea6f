"""Attack costs for the sparse secret of bootstrapping's encapsulation key (docs/parameters.md).

The encapsulation key (Bossuat et al. 2022) is RLWE under an ephemeral ternary secret of
Hamming weight h, modulo Q_0 P' only. The HE standard's table covers dense secrets, and the
lattice estimator (Albrecht, Player, Scott 2015) needs Sage, so the attacks that matter for a
very sparse secret are computed here with the estimator's published models, in log2 of work:

- primal uSVP by the "2016 estimate" (Alkim, Ducas, Poppelmann, Schwabe 2016): BKZ-beta finds
  the embedded error when sqrt(beta) sigma <= delta^(2 beta - d) Vol^(1/d), d = m + n + 1, the
  secret scaled up by nu = sigma / sigma_s (Bai-Galbraith; Albrecht 2017 for sparse secrets);
- primal on k kept coordinates, hoping the nonzero ones are kept (Albrecht 2017, section 5), and
  the same with w nonzero coordinates left outside, found by a meet-in-the-middle search over
  the dropped part (Howgrave-Graham's hybrid, its list sqrt(C(n - k, w) 2^w) as its time);
- a meet-in-the-middle search over the whole key (Odlyzko): sqrt(C(n, h) 2^h).

BKZ-beta costs 2^(0.292 beta) (core-SVP, the most pessimistic of the estimator's cost models;
0.265 with quantum sieving). At the HE standard's own 128-bit bounds it reads 92-96 bits
(`calibrate`). Not modelled: dual and dual-hybrid attacks (MATZOV 2022), May's Meet-LWE (2021).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import SecurityError
from .params import HE_STANDARD_128

SIGMA = 3.24  # the centred binomial error, eta = 21 (fhetorch/_ring/sampler.py)
CLASSICAL, QUANTUM = 0.292, 0.265


def log2_delta(beta: float) -> float:
    """log2 of BKZ-beta's root Hermite factor (Chen's limit, valid for beta > 50)."""
    return math.log2(((math.pi * beta) ** (1 / beta) * beta / (2 * math.pi * math.e)) ** (1 / (2 * (beta - 1))))


def usvp_beta(n: int, log_q: float, sigma_s: float, sigma: float = SIGMA, samples: int | None = None) -> float:
    """Smallest block size for which the 2016 estimate succeeds on LWE(n, q) with secret standard
    deviation sigma_s and error sigma, from at most `samples` samples (default 2n; the best count
    m is taken on a grid of 256)."""
    log_nu = math.log2(max(1.0, sigma / sigma_s))
    m = np.maximum(1, (samples or 2 * n) * np.arange(1, 257) // 256).astype(np.float64)
    d = m + n + 1
    volume = (m * log_q + n * log_nu) / d

    def succeeds(beta: float) -> bool:
        return bool(np.any(0.5 * math.log2(beta) + math.log2(sigma) <= (2 * beta - d) * log2_delta(beta) + volume))

    lo, hi = 50.0, 50.0
    while not succeeds(hi):
        lo, hi = hi, hi * 2
        if hi > 1e6:
            return math.inf
    if succeeds(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if succeeds(mid) else (mid, hi)
    return hi


def log2_binom(n: int, k: int) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)


@dataclass(frozen=True)
class Attack:
    name: str
    bits: float  # log2 of the expected work
    detail: str


@functools.lru_cache(maxsize=None)
def attacks(n: int, log_q: float, h: int, cost: float = CLASSICAL) -> tuple:
    """The modelled attacks on LWE(n, q) with a ternary secret of weight h, each at its cheapest
    parameters (Attack tuples)."""
    dense = usvp_beta(n, log_q, math.sqrt(h / n))
    out = [Attack("primal uSVP", cost * dense, f"beta {dense:.0f}")]
    best = {}
    ks = sorted({int(n / 2 ** (j / 8)) for j in range(8 * int(math.log2(n / h)))} | {n})
    for k in (k for k in ks if k >= 2 * h):
        for w in range(0, min(h, n - k + 1)):
            beta = usvp_beta(k, log_q, math.sqrt((h - w) / k))  # the kept part holds h - w nonzero
            # exactly w of the h nonzero coordinates fall outside the k kept ones
            log_p = log2_binom(k, h - w) + log2_binom(n - k, w) - log2_binom(n, h)
            search = 0.5 * (log2_binom(n - k, w) + w) if w else 0.0
            total = max(cost * beta, search) + 1 - log_p  # + 1: the two costs added; repeated 1 / p times
            name = "primal, dropped coordinates" + (" + MitM guess" if w else "")
            if name not in best or total < best[name].bits:
                best[name] = Attack(name, total, f"keep {k}, beta {beta:.0f}"
                                    + (f", {w} nonzero guessed (list 2^{search:.1f})" if w else "")
                                    + f", success 2^{log_p:.1f} a try")
    out += best.values()
    out.append(Attack("meet-in-the-middle on the key", 0.5 * (log2_binom(n, h) + h), "Odlyzko"))
    return tuple(out)


def cheapest(n: int, log_q: float, h: int) -> Attack:
    """The cheapest modelled attack, classical or with quantum sieving (core-SVP units)."""
    return min(attacks(n, log_q, h) + attacks(n, log_q, h, QUANTUM), key=lambda a: a.bits)


def calibrate() -> list:
    """(log N, log Q, bits) of the primal model at the HE standard's 128-bit bounds for uniform
    ternary secrets (sigma_s = sqrt(2/3)): 92-96 bits, the offset of core-SVP from the standard's
    cost model."""
    return [(log_n, log_q, CLASSICAL * usvp_beta(2 ** log_n, log_q, math.sqrt(2 / 3)))
            for log_n, log_q in sorted(HE_STANDARD_128.items()) if log_n >= 12]


def encapsulation_instance(params) -> tuple:
    """(N, log2 Q_0 P') of the parameters' encapsulation key."""
    q, special = params.encapsulation_limbs
    primes = params.primes + params.special_primes
    return params.n, sum(math.log2(primes[i]) for i in list(q) + list(special))


def check_encapsulation(params, weight: int, what: str):
    """Raises SecurityError when secure parameters (security_bits >= 128) would get an
    encapsulation key of Hamming weight `weight` that a modelled attack breaks in under 2^128
    core-SVP operations; insecure (toy) parameters already warned and pass. Weight 0 (no
    encapsulation) passes."""
    if not weight or params.security_bits < 128:
        return
    n, log_q = encapsulation_instance(params)
    a = cheapest(n, log_q, int(weight))
    if a.bits < 128:
        raise SecurityError(f"{what}: a sparse-secret encapsulation key of Hamming weight {weight} at N = {n}, "
                            f"log2(Q_0 P') = {log_q:.1f} falls to '{a.name}' in ~2^{a.bits:.0f} operations (core-SVP, "
                            "docs/parameters.md); use a larger ephemeral_weight (32 at N = 2^16), ephemeral_weight=0, "
                            "or parameters made with allow_insecure=True for tests")
