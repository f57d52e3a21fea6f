"""Counting the memory of tensors by what holds them.

A view shares its base's storage, so bytes are counted per storage, once, under the first
row that holds it: rows are added in order (the ring's tables first, so a level's views
count there and nowhere else).
"""
from __future__ import annotations

import torch


class MemoryReport:
    """Rows of (what, bytes, tensors counted); str() is a readable table."""

    def __init__(self, title: str = "memory"):
        self.title = title
        self.rows: list[tuple[str, int, int, bool]] = []  # (what, bytes, storages, is a key row)
        self._seen: set = set()

    def add(self, what: str, tensors, *, keys: bool = False) -> int:
        """Count the storages of `tensors` not counted yet under the row `what`; its bytes."""
        total, count = 0, 0
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            s = t.untyped_storage()
            key = (s.data_ptr(), t.device)
            if key in self._seen:
                continue
            self._seen.add(key)
            total += s.nbytes()
            count += 1
        self.rows.append((what, total, count, keys))
        return total

    def bytes(self, what: str) -> int:
        return sum(b for w, b, _, _ in self.rows if w == what)

    @property
    def tables(self) -> int:
        """Bytes of everything but the keys."""
        return sum(b for _, b, _, k in self.rows if not k)

    @property
    def keys(self) -> int:
        return sum(b for _, b, _, k in self.rows if k)

    def __str__(self) -> str:
        width = max([len(w) for w, *_ in self.rows] + [24])
        lines = [f"{self.title}", f"{'':{width}}  {'MiB':>10}  {'tensors':>8}"]
        for what, b, count, keys in self.rows:
            if not keys:
                lines.append(f"{what:{width}}  {b / 2**20:10.2f}  {count:8d}")
        lines.append(f"{'tables (total)':{width}}  {self.tables / 2**20:10.2f}")
        for what, b, count, keys in self.rows:
            if keys:
                lines.append(f"{what:{width}}  {b / 2**20:10.2f}  {count:8d}")
        lines.append(f"{'total with keys':{width}}  {(self.tables + self.keys) / 2**20:10.2f}")
        return "\n".join(lines)

    __repr__ = __str__
