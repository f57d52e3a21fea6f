"""Encrypted sorting: a bitonic sorting network over the n slots of one Ciphertext, each
compare-exchange by a composite minimax sign (docs/circuits.md, "Sorting").

Network (Batcher 1968; the two-way case of Hong et al. 2021): for block sizes 2, 4, ..., n and
distances d = size / 2, ..., 1, slot i meets slot i ^ d; the lower slot of the pair keeps the
minimum when bit `size` of i is 0 (an ascending block), else the maximum. log2 n (log2 n + 1) / 2
stages, every pair of a stage at once (SIMD).

One stage, values y in [-1/2, 1/2] / (1 + margin) (the declared interval mapped there once), so
differences lie inside the sign's [-1, 1] with room for noise and drift (`margin`, below):
    D = y - rot(y, d)                   # at a lower slot i: y_i - y_(i+d); no level
    S = sign(D)                         # the composite (its depth)
    V = (low sigma / 2) D * S + (low / 2) D    # low: the 0/1 mask of lower slots, sigma = +-1
    y' = y - V + rot(V, -d)             # the exchange; V is 0 at upper slots
At a lower slot V = (sigma |D| + D) / 2, so y' = min (sigma = +1) or max (-1) of the pair, and
the upper slot gets the other. The masks multiply D while the sign runs, so a stage costs the
sign's depth + 1 level, two rotations and the sign's multiplications + 1.

Levels: before each step (a sign stage, the final product) the circuit bootstraps when the
levels left do not cover it: at a stage's start x alone, inside a stage the sign's partial
value u and x together (`bootstrap_pair(u, x)`, one bootstrapping of u + i x), after which D
and its masked copies are formed again from the refreshed x. Control flow depends only on
levels, so the whole sort is deterministic, sync-free after its plaintexts are encoded (kept
per level by the BitonicSort), and capturable in a CUDA graph.

Margin: a composite sign is wrong just outside [-1, 1] (the default's first stage changes sign at
1 + 1e-4; later stages grow like T_d(1 + delta) ~ 1 + d^2 delta), and 2^14 uniform values have
extremes within 1e-4 of the interval's ends, so noise can push such a difference over 1
(test_margin_absorbs_noise_at_the_interval_ends: 2^-8 of it costs the whole range without the
margin). So the interval maps onto [-1/2, 1/2] / (1 + margin), margin = max(2^-6, 4 error_bound /
(b - a)) (`width`): room for the noise and for the drift of the extremes (at most the noise-free
bound); the sign's resolution eps shrinks by the same 1.6 %.

Precision (any input in the interval): the pair sum is kept, and each exchange moves each
value by e = (|D| - D p(D)) / 2, |e| <= E / 2 with E = max over |t| <= 1 of |t| |1 - p(t)|
(`abs_error`); sorting is 1-Lipschitz in the max norm, so
    max |out - sorted(x)| <= stages * E / 2 * (b - a) + CKKS noise
(`error_bound`). Equal values are exact (D = 0); near-ties are only averaged (|e| <= |D| / 2).
On random inputs the errors partly cancel: measured bits are far above the bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._ckks import evaluator as ev
from .._ckks.ciphertext import Ciphertext
from ..errors import ApproximationError, LevelError, ShapeError
from .approximations import composite_sign_series
from .polynomial import cost, evaluate, plain_composite

# the 12-bit setting at 2^14 values (docs/circuits.md, "Sorting": the plaintext simulation): sign
# depth 4 + 4 + 4 + 5 = 17, a stage 18 levels
SORT_DEGREES = (15, 15, 15, 27)
SORT_EPS = 2.0**-12
# the composite sign per preset where another one is better (others: SORT_DEGREES, SORT_EPS). At
# n16-bts40 a sign of depth 16 makes a stage 17 levels, whose steps pack 12-level windows three per
# two stages: 156 bootstraps at 2^14 values instead of 207, 6.43 -> 5.09 s, and 12.0 -> 12.1 bits on
# the H100 (12.2 in the simulation against 12.5). At n16-bts35 the same sign gave 6.1 bits (its
# pair bootstraps then take the first stage's output from the lowest levels; not yet understood)
SORT_SIGN = {"n16-bts40": ((31, 31, 63), 2.0**-12)}
# the bootstraps' message ratio per preset (Bootstrapper.input_factor; others: the preset's own):
# the sign's values and partly sorted values are structured (most of the message in a few
# coefficients), which n16-bts40's default (6) serves badly: 11.1 -> 12.1 bits at 2^14 values on
# the H100; n16-bts35's precision is bound by its noise instead (ratio 8: 10.2 -> 9.6 bits)
SORT_MESSAGE_RATIO = {"n16-bts40": 8}
# the least room between the mapped values' differences and the sign's interval ends (module docstring)
SORT_MARGIN = 2.0**-6


def network(n: int) -> list:
    """[(size, d)] of the bitonic network on n slots, in order: log2 n (log2 n + 1) / 2 stages."""
    out, size = [], 2
    while size <= n:
        d = size // 2
        while d >= 1:
            out.append((size, d))
            d //= 2
        size *= 2
    return out


def stage_masks(n: int, size: int, d: int, descending: bool = False) -> tuple:
    """(low sigma / 2, low / 2) of one stage, float64 (n,): low the 0/1 mask of the lower slots of
    the pairs, sigma +1 where the lower slot keeps the minimum, -1 where it keeps the maximum."""
    i = torch.arange(n)
    low = ((i & d) == 0).to(torch.float64)
    sigma = torch.where((i & size) == 0, 1.0, -1.0).to(torch.float64)
    if descending:
        sigma = -sigma
    return low * sigma / 2, low / 2


def check_slots(n: int, slots: int, what: str = "sort"):
    """Raises ShapeError unless n is a power of two no larger than `slots`."""
    if n < 1 or n & (n - 1):
        raise ShapeError(f"{what}: the number of values must be a power of two (the bitonic network pairs slots "
                         f"i and i ^ d), got {n}; pad with a value above the interval's top")
    if n > slots:
        raise ShapeError(f"{what}: {n} values do not fit one ciphertext of {slots} slots")


def check_interval(interval) -> tuple:
    """(a, b) as floats. Raises ApproximationError unless a < b, both finite."""
    a, b = (float(v) for v in interval)
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ApproximationError(f"sort: the interval must be finite with a < b, got {interval}")
    return a, b


def abs_error(stages, points: int = 200001) -> float:
    """E = max over t in [0, 1] of t |1 - p(t)|, p the composite sign: the error of |t| ~ t p(t)."""
    t = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    return float((t * (1 - plain_composite(t, stages))).abs().max())


def error_bound(n: int, stages, interval=(-1.0, 1.0)) -> float:
    """The bound of max |sort(x) - sorted(x)| for any x in `interval` without CKKS noise:
    stages of the network * E / 2 * (b - a) (module docstring; the margin's 1.6 % included)."""
    a, b = check_interval(interval)
    return len(network(n)) * abs_error(stages) / 2 * width(n, stages, (a, b))


def width(n: int, stages, interval) -> float:
    """What the sort divides the centred values by: (b - a) (1 + margin), margin = max(SORT_MARGIN,
    4 x the noise-free bound / (b - a)) (module docstring, "Margin")."""
    a, b = interval
    return (b - a) * (1 + max(SORT_MARGIN, 4 * len(network(n)) * abs_error(stages) / 2))


def plain_sort(x: torch.Tensor, stages, *, descending: bool = False, interval=(-1.0, 1.0)) -> torch.Tensor:
    """The network on plaintext values (float64) with the same polynomial: what the encrypted
    sort computes, without noise (the simulation that chose SORT_DEGREES and SORT_EPS).

    Raises ShapeError for a length that is not a power of two, ApproximationError for a bad interval."""
    a, b = check_interval(interval)
    x = torch.as_tensor(x, dtype=torch.float64)
    n = x.numel()
    check_slots(n, n, "plain_sort")
    w = width(n, stages, (a, b))
    y = (x - (a + b) / 2) / w
    for size, d in network(n):
        c, h = stage_masks(n, size, d, descending)
        D = y - torch.roll(y, -d)
        V = c * D * plain_composite(D, stages) + h * D
        y = y - V + torch.roll(V, d)
    return y * w + (a + b) / 2


@dataclass
class SortCounts:
    """What one sort ran: stages, bootstraps (x alone / pairs), sign evaluations' multiplications."""
    stages: int = 0
    bootstraps: int = 0
    pair_bootstraps: int = 0
    rotations: int = 0


class BitonicSort:
    """The bitonic sort of one context's n-slot ciphertexts with a composite sign:

        bs = BitonicSort(ctx, n)              # degrees=None, eps=None, interval=(-1, 1), message_ratio=None
                                              # (None: the preset's, SORT_SIGN / SORT_MESSAGE_RATIO, else
                                              # SORT_DEGREES, SORT_EPS and the bootstrapper's ratio)
        out = bs(ct)                          # a Ciphertext, values ascending (descending=True: descending)

    It keeps the stage masks encoded per level, so repeated calls encode nothing (CUDA graphs).

    Raises ShapeError when n is not a power of two or exceeds ctx.slots, ApproximationError for
    bad degrees, eps or interval."""

    def __init__(self, ctx, n: int, *, degrees=None, eps: float | None = None, interval=(-1.0, 1.0),
                 descending: bool = False, message_ratio: int | None = None):
        check_slots(int(n), ctx.slots)
        degrees, eps = sort_sign(ctx.params.name, degrees, eps)
        self.ctx, self.n, self.descending = ctx, int(n), bool(descending)
        self.ratio = SORT_MESSAGE_RATIO.get(ctx.params.name) if message_ratio is None else int(message_ratio)
        self.interval = check_interval(interval)
        self.degrees, self.eps = tuple(int(d) for d in degrees), float(eps)  # the sign it runs (sort_sign)
        self.stages, self.sign_error = composite_sign_series(self.degrees, self.eps)
        self.depths = [cost(s).depth for s in self.stages]
        self.network = network(self.n)
        self.width = width(self.n, self.stages, self.interval)
        self._masks: dict = {}  # (size, d, level, scale) -> (Plaintext low sigma / 2, Plaintext low / 2)
        self.counts = SortCounts()

    @property
    def stage_depth(self) -> int:
        """Levels one compare-exchange stage consumes: the sign's depth + 1."""
        return sum(self.depths) + 1

    def error_bound(self) -> float:
        """The bound of max |out - sorted(x)| without CKKS noise (module docstring)."""
        return error_bound(self.n, self.stages, self.interval)

    def plain(self, x: torch.Tensor) -> torch.Tensor:
        """The same network on plaintext values (plain_sort)."""
        return plain_sort(x, self.stages, descending=self.descending, interval=self.interval)

    # --- encrypted ---------------------------------------------------------------------------
    def __call__(self, ct: Ciphertext) -> Ciphertext:
        """The sorted values of ct's n slots, a Ciphertext at the level its last stage left.

        Raises ShapeError when ct packs another slot count than n, MissingKeyError without the
        rotation keys of +-d or the bootstrapping keys when a stage needs a refresh, LevelError
        on a preset without bootstrapping when the levels run out."""
        ctx = self.ctx
        if ct.slots != self.n:
            raise ShapeError(f"sort: the ciphertext packs {ct.slots} slots, this sort {self.n}")
        self.counts = SortCounts(stages=len(self.network))
        if self.n == 1:
            return ct
        a, b = self.interval
        w = self.width
        y = self._refresh(ct, 1)
        y = ev.mul_scalar(ctx, y, 1.0 / w)  # [a, b] -> [-1/2, 1/2] / (1 + margin): one level
        if a + b:
            y = ev.add_scalar(ctx, y, -(a + b) / (2 * w))
        for size, d in self.network:
            y = self._stage(y, size, d)
        y = ev.mul_scalar(ctx, self._refresh(y, 1), w)  # one level
        return ev.add_scalar(ctx, y, (a + b) / 2) if a + b else y

    def _refresh(self, x: Ciphertext, need: int) -> Ciphertext:
        if x.level >= need:
            return x
        self._check_bootstrappable(need, x.level)
        self.counts.bootstraps += 1
        return self.ctx.bootstrapper.bootstrap(x, ratio=self.ratio, real=True)  # no imaginary noise for the sign to magnify

    def _masked(self, x: Ciphertext, size: int, d: int) -> tuple:
        """(D, low sigma / 2 * D, low / 2 * D) from x: one rotation, two plaintext products."""
        ctx = self.ctx
        D = ev.sub(ctx, x, ev.rotate(ctx, x, d))
        self.counts.rotations += 1
        key = (size, d, D.level, D.scale)
        pts = self._masks.get(key)
        if pts is None:
            c, h = stage_masks(self.n, size, d, self.descending)
            pts = self._masks[key] = (ev.encode_multiplicand(ctx, D, c), ev.encode_multiplicand(ctx, D, h))
        return D, ev.mul_plaintext(ctx, D, pts[0]), ev.mul_plaintext(ctx, D, pts[1])

    def _stage(self, x: Ciphertext, size: int, d: int) -> Ciphertext:
        ctx = self.ctx
        x = self._refresh(x, max(self.depths[0], 2))  # the masks' level and the first sign step
        D, m1, m2 = self._masked(x, size, d)
        u = D
        for k, (series, depth) in enumerate(zip(self.stages, self.depths)):
            if k and u.level < depth:
                u, x = self._pair(u, x)
                D, m1, m2 = self._masked(x, size, d)
            u = evaluate(ctx, u, series)
        if min(u.level, m1.level) < 1:
            u, x = self._pair(u, x)
            D, m1, m2 = self._masked(x, size, d)
        v = ev.add(ctx, ev.mul(ctx, m1, u), m2)
        self.counts.rotations += 1
        return ev.add(ctx, ev.sub(ctx, x, v), ev.rotate(ctx, v, -d))

    def _check_bootstrappable(self, need: int, level: int):
        if getattr(self.ctx, "bootstrap_config", None) is None:
            raise LevelError(f"sort: a step needs {need} level(s) ({self.stage_depth} per stage) but the value is "
                             f"at level {level} and preset {self.ctx.params.name!r} does not bootstrap; use a "
                             "bootstrappable preset (toy-n13-bts, n16-bts40, n16-bts35) or fewer values")

    def _pair(self, u: Ciphertext, x: Ciphertext) -> tuple:
        self._check_bootstrappable(2, u.level)
        self.counts.pair_bootstraps += 1
        return self.ctx.bootstrapper.bootstrap_pair(u, x, ratio=self.ratio)

    # --- the level plan, without ciphertexts --------------------------------------------------
    def plan(self, top: int, start: int | None = None) -> SortCounts:
        """The bootstraps and rotations of one sort when a bootstrap leaves `top` levels and the
        input is at `start` (default top): the same decisions as __call__, on levels only."""
        counts = SortCounts(stages=len(self.network))
        if self.n == 1:
            return counts
        lvl = start if start is not None else top
        if lvl < 1:
            lvl, counts.bootstraps = top, counts.bootstraps + 1
        lvl -= 1
        for _ in self.network:
            if lvl < max(self.depths[0], 2):
                lvl, counts.bootstraps = top, counts.bootstraps + 1
            m1 = lvl - 1
            counts.rotations += 2
            for k, depth in enumerate(self.depths):
                if k and lvl < depth:
                    lvl, counts.pair_bootstraps, counts.rotations = top, counts.pair_bootstraps + 1, counts.rotations + 1
                    m1 = top - 1
                lvl -= depth
            if min(lvl, m1) < 1:
                lvl, counts.pair_bootstraps, counts.rotations = top, counts.pair_bootstraps + 1, counts.rotations + 1
                m1 = top - 1
            lvl = min(lvl, m1) - 1
        if lvl < 1:  # the map back onto [a, b] (one level)
            counts.bootstraps += 1
        return counts


def sort_sign(preset: str, degrees=None, eps: float | None = None) -> tuple:
    """(degrees, eps) of the composite sign: the given ones, else the preset's (SORT_SIGN), else
    SORT_DEGREES and SORT_EPS. Raises nothing (BitonicSort checks them)."""
    d, e = SORT_SIGN.get(preset, (SORT_DEGREES, SORT_EPS))
    return (d if degrees is None else degrees), (e if eps is None else eps)


def sort(ctx, ct: Ciphertext, *, descending: bool = False, interval=(-1.0, 1.0), degrees=None,
         eps: float | None = None) -> Ciphertext:
    """The ct.slots values of ct sorted (ascending; descending=True: descending) by a bitonic
    network with composite-sign comparisons; values must lie in `interval`. Keys: the +-2^i
    rotations (default keygen) and, when the levels run out, ctx.keygen(bootstrap=True)
    (bootstrap_slots=[n] for the faster sparse circuit).

    Raises ShapeError when the slot count is not a power of two, ApproximationError for bad
    degrees, eps or interval, MissingKeyError without the rotation or bootstrapping keys,
    LevelError when the levels run out on a preset without bootstrapping."""
    return BitonicSort(ctx, ct.slots, degrees=degrees, eps=eps, interval=interval, descending=descending)(ct)


__all__ = ["BitonicSort", "SORT_DEGREES", "SORT_EPS", "SORT_MARGIN", "SORT_MESSAGE_RATIO", "SORT_SIGN", "SortCounts", "abs_error", "error_bound", "network",
           "plain_sort", "sort", "sort_sign", "stage_masks", "width"]
