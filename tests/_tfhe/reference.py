"""Pure-Python references of the TFHE kernels (Python ints, schoolbook negacyclic products):
what the tfhe_* ops must equal bit for bit. Never used by the library."""
from __future__ import annotations


def modulus_switch(x: int, q: int, bits: int) -> int:
    """round(x * 2^bits / q) mod 2^bits, half up."""
    num = x * (1 << bits)
    return ((2 * num + q) // (2 * q)) % (1 << bits)


def decompose(x: int, q: int, base_log: int, level: int) -> list[int]:
    """Balanced digits, most significant first, of round(x B^level / q) mod B^level."""
    return balanced_digits(modulus_switch(x, q, base_log * level), base_log, level)


def balanced_digits(v: int, base_log: int, level: int) -> list[int]:
    """The level balanced base-2^base_log digits (in [-B/2, B/2)), most significant first, of v
    mod B^level."""
    b = 1 << base_log
    out = []
    for _ in range(level):
        d = v % b
        v //= b
        if d >= b // 2:
            d -= b
            v += 1
        out.append(d)
    return out[::-1]


def gadget(q: int, base_log: int, level: int) -> list[int]:
    return [(q + (1 << (base_log * (j + 1) - 1))) // (1 << (base_log * (j + 1))) for j in range(level)]


def negacyclic_mul(a: list[int], b: list[int], q: int) -> list[int]:
    n = len(a)
    out = [0] * n
    for i, x in enumerate(a):
        if x == 0:
            continue
        for j, y in enumerate(b):
            k = i + j
            if k < n:
                out[k] += x * y
            else:
                out[k - n] -= x * y
    return [v % q for v in out]


def keyswitch(ct: list[int], ksk, q: int, base_log: int, level: int) -> list[int]:
    """ksk[i][j]: LWE ciphertext (list of ints mod q) of s_in[i] * G_j."""
    n_out1 = len(ksk[0][0])
    out = [0] * n_out1
    out[-1] = ct[-1]
    for i, a in enumerate(ct[:-1]):
        for j, d in enumerate(decompose(a, q, base_log, level)):
            for c in range(n_out1):
                out[c] -= d * ksk[i][j][c]
    return [v % q for v in out]


def external_product(glwe: list[list[int]], ggsw, q: int, base_log: int, level: int) -> list[list[int]]:
    """ggsw[p][j]: GLWE (k+1 polynomials of ints mod q), coefficient form."""
    k1, n = len(glwe), len(glwe[0])
    out = [[0] * n for _ in range(k1)]
    for p in range(k1):
        digits = [decompose(c, q, base_log, level) for c in glwe[p]]
        for j in range(level):
            dpoly = [d[j] for d in digits]
            for r in range(k1):
                prod = negacyclic_mul(dpoly, ggsw[p][j][r], q)
                out[r] = [(x + y) % q for x, y in zip(out[r], prod)]
    return out


def rotate(poly: list[int], s: int, q: int) -> list[int]:
    """X^s * poly, negacyclic."""
    n = len(poly)
    out = [0] * n
    for i, c in enumerate(poly):
        k = (i + s) % (2 * n)
        if k < n:
            out[k] = (out[k] + c) % q
        else:
            out[k - n] = (out[k - n] - c) % q
    return out


def torus_negacyclic_mul(a: list[int], b: list[int]) -> list[int]:
    """a * b in Z_{2^64}[X]/(X^N + 1), as signed int64 values (two's complement)."""
    out = negacyclic_mul(a, b, 1 << 64)
    return [v - (1 << 64) if v >= 1 << 63 else v for v in out]


def torus_products(digits, keys):
    """out[s, c] = sum_r digits[s, r] * keys[r, c] in Z_{2^64}[X]/(X^N + 1), exactly, for torch
    int64 digits (S, R, N) with |d| <= 2^23 and keys (R, C, N) (any int64), N <= 2^14: each key
    polynomial is cut into six 12-bit limbs, each limb product is a float64 matrix product of the
    digits with the limb's negacyclic matrix, whose every partial sum is an integer below
    2^(23 + 12 + 14) < 2^53 (so exact in any summation order), and the limbs are joined by int64
    arithmetic, which wraps mod 2^64."""
    import torch

    s_, r_, n = digits.shape
    c_ = keys.shape[1]
    i = torch.arange(n)
    idx = (i.view(1, n) - i.view(n, 1)) % n  # [j, i]: the key coefficient that d_j meets at output i
    sign = torch.where(i.view(1, n) >= i.view(n, 1), 1.0, -1.0).to(torch.float64)
    d = digits.to(torch.float64)
    out = torch.zeros(s_, c_, n, dtype=torch.int64)
    for r in range(r_):
        for c in range(c_):
            for limb in range(6):
                part = (keys[r, c] >> (12 * limb)) & 0xFFF  # unsigned 12-bit pieces: sum_l part_l 2^(12 l) = key
                mat = part.to(torch.float64)[idx] * sign
                prod = (d[:, r] @ mat).to(torch.int64)
                out[:, c] += prod * (1 << (12 * limb))
    return out


def torus_decompose(x: int, base_log: int, level: int) -> list[int]:
    """Balanced digits, most significant first, of round(x / 2^(64 - base_log level)) for a torus
    value x (any int, read mod 2^64): sum_j d_j 2^(64 - base_log (j + 1)) = the rounded x mod 2^64."""
    shift = 64 - base_log * level
    return balanced_digits(((x % (1 << 64)) + (1 << (shift - 1))) >> shift, base_log, level)


def keyswitch_columns(ct_row, ksk, q, base_log, level, cols):
    """Output coefficients `cols` of the key switch of one ciphertext `ct_row` (Python ints, mod q)
    by the residue key ksk (n_in, level, n_out + 1), computed digit by digit in Python ints."""
    n_in, w = len(ct_row) - 1, ksk.shape[-1]
    kl = ksk[:, :, cols].tolist()
    digits = [decompose(a, q, base_log, level) for a in ct_row[:n_in]]
    out = []
    for ci, c in enumerate(cols):
        v = ct_row[-1] if c == w - 1 else 0
        for i in range(n_in):
            for j, dj in enumerate(digits[i]):
                v -= dj * kl[i][j][ci]
        out.append(v % q)
    return out
