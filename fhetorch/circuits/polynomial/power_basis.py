"""The power basis T_1(y), T_2(y), ... of one input, y = the input mapped from an interval onto
[-1, 1], computed on demand and shared by every polynomial evaluated on it.

T_i is computed lazily by doubling (T_2k = 2 T_k^2 - 1) and products (T_(m+n) = 2 T_m T_n -
T_(m-n)), each at depth ceil(log2 i) below y, and cached at every level it was needed at. The
affine map y = alpha x + beta costs 0 levels when alpha = 2 / (b - a) is an integer and the
input is at its nominal scale (e.g. [-1, 1], [0, 1], [-0.5, 0.5]), else exactly 1 level.
"""
from __future__ import annotations

from ..._ckks import evaluator as ev
from ...errors import ApproximationError, LevelError
from .ops import CiphertextOps, ceil_log2, is_free_constant
from .simulator import LevelSimulator, SimulatedValue


def affine_map(interval) -> tuple:
    """(alpha, beta) of y = alpha x + beta, which maps `interval` onto [-1, 1]."""
    a, b = (float(v) for v in interval)
    return 2.0 / (b - a), -(a + b) / (b - a)


class PowerBasis:
    """T_i(y) of one Ciphertext, y = the input mapped from `interval` onto [-1, 1].

        basis = PowerBasis(ctx, ct, interval=(-8, 8))
        evaluate(ctx, basis, p1); evaluate(ctx, basis, p2)  # T_i computed once, shared

    `T(i, level)` returns T_i dropped to `level` (cached too). `ops` counts the work done.

    Raises ApproximationError for an empty interval.
    """

    def __init__(self, ctx, ct, interval=(-1.0, 1.0), *, ops=None):
        self.ctx = ctx
        self.ops = ops if ops is not None else CiphertextOps(ctx)
        self.interval = tuple(float(v) for v in interval)
        if not self.interval[0] < self.interval[1]:
            raise ApproximationError(f"PowerBasis: the interval must have a < b, got {interval}")
        x = ct if ops is not None else ev.relinearize(ctx, ct)
        if isinstance(self.ops, CiphertextOps) and self.ops.nominal(x):
            # within SCALE_RTOL of nominal counts as nominal; make it exact, because each squaring
            # doubles a scale's relative deviation and T_(2^k) would leave the tolerance, costing a
            # level the plan did not count (2^-32 off at the input is 2^-29 at T_8)
            x = x.replace(scale=ctx.nominal_scale(x.level))
        self.x = x
        self._T: dict = {}  # i -> {level: value}

    # level bookkeeping (no work)
    @property
    def affine_levels(self) -> int:
        """Levels the map of the interval onto [-1, 1] costs: 0 or 1."""
        alpha, _ = affine_map(self.interval)
        return 0 if is_free_constant(alpha) and self.ops.nominal(self.x) else 1

    def level(self, i: int) -> int:
        """Level at which T_i is (or will be) first computed. Raises nothing."""
        if i in self._T:
            return max(self._T[i])
        return self.ops.level(self.x) - self.affine_levels - ceil_log2(i)

    def computed(self) -> set:
        """The indices i whose T_i this basis holds. Raises nothing."""
        return set(self._T)

    def T(self, i: int, level: int | None = None):
        """T_i, at `level` if given (dropped from a higher copy). Raises ApproximationError for
        i < 1, LevelError for a level above the one T_i was computed at."""
        if i < 1:
            raise ApproximationError(f"PowerBasis.T: the index must be >= 1, got {i}")
        if i not in self._T:
            self._T[i] = {}
            v = self._compute(i)
            self._T[i][self.ops.level(v)] = v
        versions = self._T[i]
        if level is None:
            return versions[max(versions)]
        v = versions.get(level)
        if v is None:
            higher = [lv for lv in versions if lv > level]
            if not higher:
                raise LevelError(f"PowerBasis.T: T_{i} is at level {max(versions)}, cannot raise it to {level}")
            v = self.ops.drop(versions[min(higher)], level)
            versions[level] = v
        return v

    def _compute(self, i: int):
        ops = self.ops
        if i == 1:
            alpha, beta = affine_map(self.interval)
            if alpha == 1.0 and beta == 0.0 and ops.nominal(self.x):
                return self.x
            return ops.lincomb([(alpha, self.x)], beta)
        if i & (i - 1) == 0:  # T_2k = 2 T_k^2 - 1
            t = self.T(i // 2)
            return ops.lincomb([(2, ops.mul(t, t))], -1.0)
        a = 1 << (ceil_log2(i) - 1)  # T_i = 2 T_a T_b - T_(a-b), a the largest power of two < i
        b = i - a
        ta = self.T(a)
        lv = ops.level(ta)
        prod = ops.mul(ta, self.T(b, min(lv, self.level(b))))
        # 2 prod - T_(a-b) in one pass (integer coefficients: no level)
        return ops.lincomb([(2, prod), (-1, self.T(a - b, ops.level(prod)))], 0.0)

    def simulated(self) -> "PowerBasis":
        """A copy on the level simulator, holding what this basis has computed so far. Raises nothing."""
        x = SimulatedValue(self.ops.level(self.x), bool(self.ops.nominal(self.x)))
        c = PowerBasis(self.ctx, x, self.interval, ops=LevelSimulator())
        c._T = {i: {lv: SimulatedValue(lv) for lv in v} for i, v in self._T.items()}
        return c

    @classmethod
    def fresh(cls, interval, level: int) -> "PowerBasis":
        """A simulated basis of a nominal input at `level`, for planning without a ciphertext.

        Raises ApproximationError for an empty interval."""
        return cls(None, SimulatedValue(level), interval, ops=LevelSimulator())
