"""The operations a polynomial evaluation runs on Ciphertexts of one CKKSContext, counting
what they cost. LevelSimulator (simulator.py) runs the same interface on levels only, so one
evaluation code path both plans and computes.

Levels and scales: every value stays on its level's nominal scale (_ckks/evaluator.py), so
additions never lose a level to scale matching: products of nominal operands are nominal,
integer constants multiply without a level, real constants are folded into one rescale per
linear combination, and `drop_level` lands on the nominal scale.
"""
from __future__ import annotations

import math
from fractions import Fraction

from ... import _ops
from ..._ckks import evaluator as ev
from ..._rlwe.keyswitch import switch_modulus
from ...errors import EncodingError, LevelError

INT_LIMIT = 2**31  # integer constants below this multiply without a level (evaluator.mul_scalar)


def is_free_constant(c: float) -> bool:
    """Whether multiplying by c costs no level (an integer below INT_LIMIT)."""
    return float(c).is_integer() and abs(c) < INT_LIMIT


def ceil_log2(i: int) -> int:
    return (int(i) - 1).bit_length() if i > 0 else 0


class CiphertextOps:
    """Operations on Ciphertexts of one CKKSContext, counting ciphertext products, rescales of
    linear combinations and levels dropped to match operands."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.mults = 0  # ciphertext-ciphertext multiplications (relinearisations: a mul_sum counts once)
        self.rescales = 0  # rescales of scalar linear combinations
        self.drops = 0  # levels dropped to match operands

    @staticmethod
    def level(a) -> int:
        return a.level

    def nominal(self, a) -> bool:
        return ev.same_scale(a.scale, self.ctx.nominal_scale(a.level))

    def mul(self, a, b):
        self.mults += 1
        self.drops += abs(a.level - b.level)
        return ev.mul(self.ctx, a, b)

    def mul_sum(self, pairs, addend=None):
        """sum a_i b_i (+ addend, at the result's level: added in the same pass), one relinearisation and
        rescale; the operands at one level."""
        self.mults += 1
        return ev.mul_sum(self.ctx, pairs, addend)

    def add(self, a, b):
        self.drops += abs(a.level - b.level)
        return ev.add(self.ctx, a, b)

    def sub(self, a, b):
        self.drops += abs(a.level - b.level)
        return ev.sub(self.ctx, a, b)

    def add_const(self, a, c: float):
        return a if c == 0 else ev.add_scalar(self.ctx, a, float(c))

    def drop(self, a, level: int):
        if a.level == level:
            return a
        self.drops += a.level - level
        return ev.drop_level(self.ctx, a, a.level - level)

    def lincomb(self, terms, c0: float, level: int | None = None):
        """sum c_i a_i + c0, all a_i at one level, in one pass over the terms (_ops.lincomb, c0
        included). Integer c_i (nominal a_i): no level (dropped to `level` if given); else one
        modulus switch down to `level` (default: one level down; deeper at no extra cost), each
        constant scaled so that the result lands exactly on that level's nominal scale."""
        ctx = self.ctx
        lv = terms[0][1].level
        assert all(a.level == lv for _, a in terms)
        terms = [(c, ev.relinearize(ctx, a)) for c, a in terms]
        first = terms[0][1]
        xs = [a.data for _, a in terms]
        b = ctx.basis(lv)
        if all(is_free_constant(c) for c, _ in terms) and all(self.nominal(a) for _, a in terms):
            scalar = None if c0 == 0 else ev.encode_scalar(ctx, first, float(c0))
            out = first.replace(data=_ops.lincomb(xs, b.scalar_table([int(c) for c, _ in terms]), b.mod, scalar))
            return out if level is None else self.drop(out, level)
        target = lv - 1 if level is None else level
        if target < 0 or target >= lv:
            raise LevelError("polynomial: a scalar multiplication needs a level but the operand is at level "
                             f"{lv}{'' if level is None else f' (asked for level {level})'}; bootstrap first or start "
                             "from a higher level")
        scale = ev.landing_scale(ctx, lv, target)  # the sum's scale before the switch to target
        if not all(math.isfinite(float(c)) for c, _ in terms + [(c0, None)]):
            raise EncodingError(f"polynomial: a coefficient is not finite ({[c for c, _ in terms]}, {c0})")
        ks = [round(Fraction(float(c)) * scale / Fraction(a.scale)) for c, a in terms]
        k0 = round(Fraction(float(c0)) * scale)
        data = _ops.lincomb(xs, b.scalar_table(ks), b.mod, b.scalar(k0) if k0 else None)
        self.rescales += 1
        self.drops += lv - 1 - target
        data = switch_modulus(ctx.modulus_tables, data, tuple(ctx.params.limbs(lv)), tuple(ctx.params.limbs(target)))
        return first.replace(data=data, level=target, scale=ctx.nominal_scale(target))
