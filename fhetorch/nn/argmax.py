"""The encrypted argmax head (nn.compile(..., argmax=True)): the class of the logits as an
encrypted integer, by two lookup-table waves (CKKS <-> TFHE switching) and three slot maps.

On the K logits z divided by their bound B:
1. a slot map gives the K (K - 1) / 2 differences d_ij = (z_i - z_j) / 2, i < j;
2. one switch: s_ij = [grid point nearest d_ij >= 0] (the ReLU grid, which holds 0: a tie on
   the grid goes to the lower index);
3. a slot map counts wins: w_i = sum_{j > i} s_ij + sum_{j < i} (1 - s_ji), integers in [0, K - 1];
4. one switch on an integer grid (exact): h_i = [w_i = K - 1];
5. a slot map writes sum_i i h_i to slot 0 and sum_i h_i to slot 1.
Decryption rounds both: the class is slot 0 when slot 1 is 1, else -1: no logit beat every
other on the grid (the top logits within about one grid step of each other, where quantised
comparisons need not be transitive). Where the top logit leads the others by more than a grid
step (2 B / m, m = 2^bits / 2 - 1), the class is the plaintext argmax.
"""
from __future__ import annotations

import torch

from ..errors import UnsupportedLayerError
from ..tensor.layout import Layout, matrix_map
from .lut import LUTReLU, grid_interval


def pairs(k: int) -> list:
    return [(i, j) for i in range(k) for j in range(i + 1, k)]


def head_maps(n: int, k: int) -> tuple:
    """(differences, wins, output) SlotMaps over n slots for K = k logits at slots 0..k-1."""
    pr = pairs(k)
    if len(pr) > n:
        raise UnsupportedLayerError(f"nn.compile(argmax=True): {k} classes need {len(pr)} slots, more than {n}")
    diff = torch.zeros(len(pr), k, dtype=torch.float64)
    wins = torch.zeros(k, len(pr), dtype=torch.float64)
    bias = torch.zeros(k, dtype=torch.float64)
    for p, (i, j) in enumerate(pr):
        diff[p, i], diff[p, j] = 0.5, -0.5
        wins[i, p] = 1.0  # i wins when s_ij = 1
        wins[j, p] = -1.0  # j wins when s_ij = 0: 1 - s_ij
        bias[j] += 1.0
    out = torch.stack([torch.arange(k, dtype=torch.float64), torch.ones(k, dtype=torch.float64)])
    lz, ld, lo = Layout.vector(k), Layout.vector(len(pr)), Layout.vector(2)
    return (matrix_map(n, diff, None, lz, ld), matrix_map(n, wins, bias, ld, lz), matrix_map(n, out, None, lz, lo))


def win_interval(bits: int) -> tuple:
    """The second switch's interval: the integers 0 .. 2^bits - 1 are its grid points."""
    return (0.0, float((1 << bits) - 1))


def step(y: torch.Tensor) -> torch.Tensor:
    return (y >= 0).to(torch.float64)


def simulate_argmax(z: torch.Tensor, bits: int) -> torch.Tensor:
    """The head in float64 on logits / B (N, K): the class (int64, N), -1 without a unique winner."""
    k = z.shape[-1]
    wins = torch.zeros_like(z)
    for i, j in pairs(k):
        s = step(LUTReLU.quantise((z[:, i] - z[:, j]) / 2, bits))
        wins[:, i] += s
        wins[:, j] += 1 - s
    h = (wins == k - 1).to(torch.int64)
    cls = (h * torch.arange(k)).sum(-1)
    return torch.where(h.sum(-1) == 1, cls, torch.full_like(cls, -1))


def check_classes(k: int, bits: int):
    """UnsupportedLayerError unless the wins 0..K-1 fit the integer grid of 2^bits points."""
    if k < 2 or k > 1 << bits:
        raise UnsupportedLayerError(f"nn.compile(argmax=True): {k} outputs; the head needs 2 to 2^bits = {1 << bits} "
                                    "classes (the win counts sit on the lookup table's grid): a finer grid "
                                    "(LUTReLU(bits=...), tfhe='tfhe-6bit' or 'tfhe-8bit')")


def decode(slots: torch.Tensor, k: int) -> torch.Tensor:
    """(1,) int64 class from the head's decrypted slots 0 and 1 (-1 without a unique winner)."""
    cls, count = round(float(slots[0])), round(float(slots[1]))
    return torch.tensor([cls if count == 1 and 0 <= cls < k else -1], dtype=torch.int64)


__all__ = ["check_classes", "decode", "grid_interval", "head_maps", "pairs", "simulate_argmax", "step", "win_interval"]
