"""A level-only simulator of polynomial evaluation: CiphertextOps' interface (ops.py) on values
that carry only a level and whether their scale is nominal. Running the evaluation on it gives
the exact depth and operation counts (`cost()`) and lets evaluation raise LevelError before any
work; levels may go negative here (the caller checks `min_level`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .ops import is_free_constant


@dataclass
class SimulatedValue:
    level: int
    nominal: bool = True


class LevelSimulator:
    """CiphertextOps on SimulatedValues: the same counts, no ciphertexts."""

    def __init__(self):
        self.mults = self.rescales = self.drops = 0
        self.min_level = math.inf

    def _new(self, level):
        self.min_level = min(self.min_level, level)
        return SimulatedValue(level)

    @staticmethod
    def level(a) -> int:
        return a.level

    @staticmethod
    def nominal(a) -> bool:
        return a.nominal

    def mul(self, a, b):
        self.mults += 1
        self.drops += abs(a.level - b.level)
        return self._new(min(a.level, b.level) - 1)

    def mul_sum(self, pairs, addend=None):
        self.mults += 1
        out = self._new(min(min(a.level, b.level) for a, b in pairs) - 1)
        assert addend is None or addend.level == out.level, (addend.level, out.level)
        return out

    def add(self, a, b):
        self.drops += abs(a.level - b.level)
        return self._new(min(a.level, b.level))

    sub = add

    @staticmethod
    def add_const(a, c):
        return a

    def drop(self, a, level):
        self.drops += a.level - level
        return self._new(level) if a.level != level else a

    def lincomb(self, terms, c0, level=None):
        lv = terms[0][1].level
        if all(is_free_constant(c) for c, _ in terms) and all(a.nominal for _, a in terms):
            v = self._new(lv)
            return v if level is None else self.drop(v, level)
        target = lv - 1 if level is None else level
        self.rescales += 1
        self.drops += lv - 1 - target
        return self._new(target)
