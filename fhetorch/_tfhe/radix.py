"""Radix integers: unsigned integers of `bits` bits as little-endian blocks of message_bits-bit
messages (TFHE-rs's radix representation), one LWE ciphertext per block with carry bits above
the message (e.g. tfhe-4bit read as 2 message + 2 carry bits: Context("tfhe-4bit",
message_bits=2)). Between operations every block is clean (degree < 2^message_bits).

Every operation is a circuit (fhetorch/_tfhe/circuit.py), so its PBS run in waves, one batched
launch each. The algorithms (M = 2^message_bits, S = message space, docs/tfhe.md counts the
waves and PBS):
- carries in log depth: a block sum s < 2M - 1 has a carry state, none (s < M - 1), propagate
  (s = M - 1) or generate (s >= M); states combine as hi unless hi propagates, then lo, which
  one LUT reads off the pack 2 hi + lo (`_combine`); a Hillis-Steele parallel prefix over the
  states gives every block's carry in ceil(log2(blocks - 1)) waves;
- comparisons: per-block states less / equal / greater of a_i - b_i, reduced by the same
  combine in a tree of log2(blocks) waves; equality: per-block a_i == b_i, then sums of
  up to min(S - 1, max_noise_level^2) flags;
- multiplication: block products a_i b_j (i + j < blocks) by bivariate LUTs, low part in column
  i + j, high part in column i + j + 1, columns reduced by sums of up to
  min((S-1)/(M-1), max_noise_level^2) terms per LUT (a Wallace tree) down to two rows, then one
  carry-propagating add.
"""
from __future__ import annotations

import torch

from ..errors import EncodingError, IntegerArgumentError, ParameterError, ShapeError, UnsupportedOperationError
from .circuit import apply_bivariate, circuit, scale
from .lut import LUT
from .lwe_tensor import LWETensor

# a block's carry state (and the comparison state of a block pair: less, equal, greater)
NONE, PROPAGATE, GENERATE = 0, 1, 2
LESS, EQUAL, GREATER = 0, 1, 2


class RadixTensor:
    """Encrypted unsigned integers of `bits` bits, shaped like the integer tensor they encrypt:
    blocks is an LWETensor (..., bits / message_bits), least significant block first.
    Operators: + - * (another RadixTensor of the same bits, or a Python int; results mod
    2^bits), & | ^, comparisons eq/ne/lt/le/gt/ge (==, !=, <, <=, >, >=) giving LWETensors of
    0/1, max/min. Each is a circuit: its PBS run in waves of batched launches."""

    def __init__(self, blocks, bits: int):
        self.blocks = blocks
        self.bits = int(bits)

    @property
    def context(self):
        return self.blocks.context

    @property
    def shape(self) -> torch.Size:
        return self.blocks.shape[:-1]

    def __repr__(self) -> str:
        return f"RadixTensor(shape={tuple(self.shape)}, bits={self.bits})"

    def __getitem__(self, index) -> "RadixTensor":
        """Indexing over the batch dimensions. Raises IndexError as torch."""
        if not isinstance(index, tuple):
            index = (index,)
        return RadixTensor(self.blocks[(*index, slice(None))], self.bits)

    def _circuit_flatten(self):
        return (self.blocks,), self.bits

    @classmethod
    def _circuit_unflatten(cls, bits, children):
        return cls(children[0], bits)

    def __bool__(self):
        raise UnsupportedOperationError("RadixTensor: the truth value of an encrypted integer is unknown; decrypt it")

    __hash__ = None

    # --- operations (each a circuit; see the module) -------------------------------------------
    def _pair(self, op: str, other):
        if isinstance(other, RadixTensor):
            if other.bits != self.bits:
                raise ShapeError(f"RadixTensor.{op}: integers of {self.bits} and {other.bits} bits; use one width")
            return other
        if isinstance(other, bool) or not isinstance(other, int):
            raise IntegerArgumentError(f"RadixTensor.{op}: expected a RadixTensor or a Python int, "
                                       f"got {type(other).__name__}")
        return other % (1 << self.bits)

    def add(self, other) -> "RadixTensor":
        """self + other mod 2^bits. Raises ShapeError for another width, IntegerArgumentError for
        a non-integer, ContextError for another context's integer, MessageOverflowError /
        ParameterError for parameters without room for carries (see encrypt_int)."""
        other = self._pair("add", other)
        return (ADD if isinstance(other, RadixTensor) else ADD_SCALAR)(self, other)

    def sub(self, other) -> "RadixTensor":
        """self - other mod 2^bits. Raises as add."""
        other = self._pair("sub", other)
        if isinstance(other, RadixTensor):
            return SUB(self, other)
        return ADD_SCALAR(self, -other % (1 << self.bits))

    def mul(self, other) -> "RadixTensor":
        """self * other mod 2^bits. Raises as add."""
        other = self._pair("mul", other)
        return (MUL if isinstance(other, RadixTensor) else MUL_SCALAR)(self, other)

    def _compare(self, op: str, other):
        return COMPARE[op](self, self._pair(op, self._need_radix(op, other)))

    def _need_radix(self, op, other):
        if not isinstance(other, RadixTensor):
            raise UnsupportedOperationError(f"RadixTensor.{op}: compare with another RadixTensor (encrypt the "
                                            "constant with encrypt_int)")
        return other

    def eq(self, other) -> LWETensor:
        """1 where self == other, else 0. Raises ShapeError, ContextError, UnsupportedOperationError
        for a non-RadixTensor."""
        return self._compare("eq", other)

    def ne(self, other) -> LWETensor:
        """1 where self != other. Raises as eq."""
        return self._compare("ne", other)

    def lt(self, other) -> LWETensor:
        """1 where self < other. Raises as eq."""
        return self._compare("lt", other)

    def le(self, other) -> LWETensor:
        """1 where self <= other. Raises as eq."""
        return self._compare("le", other)

    def gt(self, other) -> LWETensor:
        """1 where self > other. Raises as eq."""
        return self._compare("gt", other)

    def ge(self, other) -> LWETensor:
        """1 where self >= other. Raises as eq."""
        return self._compare("ge", other)

    def max(self, other) -> "RadixTensor":
        """Element-wise maximum. Raises as eq."""
        return MAX(self, self._pair("max", self._need_radix("max", other)))

    def min(self, other) -> "RadixTensor":
        """Element-wise minimum. Raises as eq."""
        return MIN(self, self._pair("min", self._need_radix("min", other)))

    def _bitwise(self, op: str, other):
        return BITWISE[op](self, self._pair(op, self._need_radix(op, other)))

    def bitwise_and(self, other) -> "RadixTensor":
        """self & other. Raises as eq."""
        return self._bitwise("and", other)

    def bitwise_or(self, other) -> "RadixTensor":
        """self | other. Raises as eq."""
        return self._bitwise("or", other)

    def bitwise_xor(self, other) -> "RadixTensor":
        """self ^ other. Raises as eq."""
        return self._bitwise("xor", other)

    __add__ = __radd__ = add
    __sub__ = sub
    __mul__ = __rmul__ = mul
    __and__ = bitwise_and
    __or__ = bitwise_or
    __xor__ = bitwise_xor
    __eq__ = eq
    __ne__ = ne
    __lt__ = lt
    __le__ = le
    __gt__ = gt
    __ge__ = ge


# ---------------------------------------------------------------------------- encryption

def check_radix_params(params, bits: int, op: str = "encrypt_int") -> int:
    """The number of blocks of a bits-bit integer. Raises ParameterError when bits is not a
    positive multiple of message_bits (at most 62), or the parameters lack the carry room radix
    arithmetic needs (carry_bits >= message_bits: a product of two blocks fits one LUT input)."""
    m = params.message_bits
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 1 or bits > 62 or bits % m:
        raise ParameterError(f"tfhe.{op}: bits must be a positive multiple of message_bits = {m} up to 62, "
                             f"got {bits!r}")
    if params.carry_bits < m:
        raise ParameterError(f"tfhe.{op}: radix integers need carry_bits >= message_bits; {params.name} has "
                             f"{m} message + {params.carry_bits} carry bits: use e.g. "
                             "Context('tfhe-4bit', message_bits=2)")
    return bits // m


def encrypt_int(context, x, bits: int) -> RadixTensor:
    """Integers (a tensor, list or int) in [0, 2^bits) -> RadixTensor of x's shape.

    Raises ParameterError (see check_radix_params), EncodingError for non-integers or values out
    of range, ContextError without a secret key."""
    p = context.params
    nb = check_radix_params(p, bits)
    x = torch.as_tensor(x)
    if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        raise EncodingError(f"tfhe.Context.encrypt_int: integers expected, got {x.dtype}")
    x = x.to(torch.int64)
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= 1 << bits):
        raise EncodingError(f"tfhe.Context.encrypt_int: values must be in [0, 2^{bits}), got values in "
                            f"[{int(x.min())}, {int(x.max())}]")
    shifts = torch.arange(nb, dtype=torch.int64, device=x.device) * p.message_bits
    digits = (x.unsqueeze(-1) >> shifts) & (p.message_modulus - 1)
    return RadixTensor(context.encrypt(digits), bits)


def decrypt_int(context, r: RadixTensor) -> torch.Tensor:
    """RadixTensor -> int64 tensor of its shape. Raises ContextError without a secret key or for
    another context's integer, ShapeError for something other than a RadixTensor."""
    if not isinstance(r, RadixTensor):
        raise ShapeError(f"tfhe.Context.decrypt_int: expected a RadixTensor, got {type(r).__name__}")
    digits = context.decrypt(r.blocks)
    shifts = torch.arange(digits.shape[-1], dtype=torch.int64, device=digits.device) * context.params.message_bits
    return (digits << shifts).sum(-1)


# ---------------------------------------------------------------------------- block algorithms
# (functions of block tensors (..., blocks): LWETensors, or circuit stand-ins while tracing)

def _lut(x, fn):
    """fn over x's reachable values [0, degree] (0 beyond: the output's degree is fn's largest)."""
    top = x.degree
    return LUT(lambda v: fn(v) if v <= top else 0, bits=x.context.params.bits)(x)


def _combine(v: int) -> int:
    """The state of two blocks from the pack v = 2 hi + lo of their states in {0, 1, 2}: hi,
    unless hi is the middle state (propagate / equal), then lo. 2 hi + lo - 3 has the sign of
    hi - 1, or of lo - 1 when hi = 1."""
    return 0 if v < 3 else 1 if v == 3 else 2


def _pack_states(hi, lo):
    return scale(hi, 2, headroom=lo.noise_level) + lo


def propagate_carries(t, first_offset: int = 0, offset: int = 0):
    """Clean blocks of sum_i s_i M^i mod M^blocks, where block i of t holds s_i + offset
    (block 0: s_0 + first_offset), s_0 < 2M and s_i <= 2M - 2 (a carry out of at most 1).
    Waves: 2 + ceil(log2(blocks - 1)) (1 for one block)."""
    m = t.context.params.message_modulus
    nb = t.shape[-1]
    out0 = _lut(t[..., :1], lambda v: (v - first_offset) % m)
    if nb == 1:
        return out0
    states = [_lut(t[..., :1], lambda v: GENERATE if v - first_offset >= m else NONE)]
    if nb > 2:
        states.append(_lut(t[..., 1:nb - 1], lambda v: GENERATE if v - offset >= m else
                           PROPAGATE if v - offset == m - 1 else NONE))
    low2 = _lut(t[..., 1:], lambda v: 2 * ((v - offset) % m))  # doubled: the carry adds as 2 (GENERATE)
    x = torch.cat(states, -1)
    d = 1
    while d < nb - 1:  # Hillis-Steele: x_i <- combine(x_i, x_(i-d))
        x = torch.cat((x[..., :d], _lut(_pack_states(x[..., d:], x[..., :-d]), _combine)), -1)
        d *= 2
    # x_i is now NONE or GENERATE: the carry into block i + 1, times 2
    return torch.cat((out0, _lut(low2 + x, lambda v: v // 2 % m)), -1)


def add_blocks(a, b):
    return propagate_carries(a + b)


def sub_blocks(a, b):
    """a + (M - 1 - b) per block, carry 1 into block 0: -b holds z - b (z from its degree)."""
    m = a.context.params.message_modulus
    nb = -b
    z = nb.degree
    return propagate_carries(a + nb, z - m, z - m + 1)


def add_scalar_blocks(a, k: int):
    p = a.context.params
    digits = [(k >> (p.message_bits * i)) & (p.message_modulus - 1) for i in range(a.shape[-1])]
    if not any(digits):
        return a
    return propagate_carries(torch.cat([a[..., i:i + 1] + c for i, c in enumerate(digits)], -1))


def sum_columns(terms, columns: list, nb: int):
    """Clean blocks of sum_t terms_t M^columns[t] mod M^nb, terms (..., T) clean blocks.
    Columns of more than two terms are reduced by LUTs of sums of up to g terms (low part in
    the column, high part in the next) until two rows remain; then one carry-propagating add."""
    p = terms.context.params
    m, space = p.message_modulus, p.message_space
    g = min((space - 1) // (m - 1), p.max_noise_level ** 2 // max(terms.noise_level, 1))
    if g < 3:
        raise ParameterError(f"radix: summing blocks needs room for 3 terms per LUT (max_noise_level^2 >= 3 "
                             f"and enough carry bits); {p.name} allows {g}")
    zero = terms[..., :1] * 0
    while True:
        by_col = [[t for t, c in enumerate(columns) if c == col] for col in range(nb)]
        if max(len(ts) for ts in by_col) <= 2:
            break
        keep, groups = [], []
        for col, ts in enumerate(by_col):
            if len(ts) <= 2:
                keep += ts
                continue
            for i in range(0, len(ts), g):
                chunk = ts[i:i + g]
                if len(chunk) <= 2 and i:
                    keep += chunk
                else:
                    groups.append((col, chunk))
        pad = terms.shape[-1]
        x = torch.cat((terms, zero), -1)
        sums = x[..., [chunk + [pad] * (g - len(chunk)) for _, chunk in groups]].sum(-1)
        carried = [k for k, (col, _) in enumerate(groups) if col + 1 < nb]
        parts = [x[..., keep], _lut(sums, lambda v: v % m)]
        if carried:
            parts.append(_lut(sums[..., carried], lambda v: v // m))
        terms = torch.cat(parts, -1)
        columns = [columns[t] for t in keep] + [col for col, _ in groups] + [groups[k][0] + 1 for k in carried]
    pad = terms.shape[-1]
    x = torch.cat((terms, zero), -1)
    rows = [(ts + [pad, pad])[:2] for ts in ([t for t, c in enumerate(columns) if c == col] for col in range(nb))]
    return propagate_carries(x[..., [r[0] for r in rows]] + x[..., [r[1] for r in rows]])


def mul_blocks(a, b):
    p = a.context.params
    m, nb = p.message_modulus, a.shape[-1]
    pairs = [(i, j) for i in range(nb) for j in range(nb - i)]
    packed = scale(a, m, headroom=b.noise_level)[..., [i for i, _ in pairs]] + b[..., [j for _, j in pairs]]
    high = [k for k, (i, j) in enumerate(pairs) if i + j + 1 < nb]
    terms = [_lut(packed, lambda v: (v // m) * (v % m) % m)]
    if high:
        terms.append(_lut(packed[..., high], lambda v: (v // m) * (v % m) // m))
    columns = [i + j for i, j in pairs] + [pairs[k][0] + pairs[k][1] + 1 for k in high]
    return sum_columns(torch.cat(terms, -1), columns, nb)


def mul_scalar_blocks(a, k: int):
    p = a.context.params
    m, nb = p.message_modulus, a.shape[-1]
    digits = [(k >> (p.message_bits * j)) & (m - 1) for j in range(nb)]
    terms, columns = [], []
    for j, c in enumerate(digits):
        if c == 0:
            continue
        terms.append(a[..., :nb - j] if c == 1 else _lut(a[..., :nb - j], lambda v, c=c: v * c % m))
        columns += [i + j for i in range(nb - j)]
        if c > 1 and nb - j > 1:
            terms.append(_lut(a[..., :nb - j - 1], lambda v, c=c: v * c // m))
            columns += [i + j + 1 for i in range(nb - j - 1)]
    if not terms:
        return a * 0
    return sum_columns(torch.cat(terms, -1), columns, nb)


def compare_blocks(a, b, final):
    """final(state) of the comparison of a and b (state LESS / EQUAL / GREATER), (...) blocks
    of final's outputs: per-block states of a_i - b_i, then a tree of pair combines."""
    nd = -b
    z = nd.degree
    d = a + nd  # a_i - b_i + z
    sign = lambda v: LESS if v < z else EQUAL if v == z else GREATER  # noqa: E731
    if d.shape[-1] == 1:
        return _lut(d, lambda v: final(sign(v)))[..., 0]
    x = _lut(d, sign)
    while x.shape[-1] > 2:
        n = x.shape[-1]
        paired = _lut(_pack_states(x[..., 1::2], x[..., 0:n - 1:2]), _combine)
        x = torch.cat((paired, x[..., n - 1:]), -1) if n % 2 else paired
    return _lut(_pack_states(x[..., 1:], x[..., :1]), lambda v: final(_combine(v)))[..., 0]


def eq_blocks(a, b, equal: int):
    """1 where a == b (equal = 1) or a != b (equal = 0)."""
    p = a.context.params
    nd = -b
    z = nd.degree
    flags = _lut(a + nd, lambda v: int(v == z))
    g = min(p.message_space - 1, p.max_noise_level ** 2)
    while flags.shape[-1] > g:
        n = flags.shape[-1]
        one = flags[..., :1] * 0 + 1  # a noiseless 1 pads the last group
        x = torch.cat((flags, one), -1)
        idx = [[i if i < n else n for i in range(s, s + g)] for s in range(0, n, g)]
        flags = _lut(x[..., idx].sum(-1), lambda v: int(v == g))
    n = flags.shape[-1]
    return _lut(flags.sum(-1), lambda v: int((v == n) == bool(equal)))


def select_max_blocks(a, b, pick_b_when: int):
    """b where compare(a, b) == pick_b_when (LESS: max, GREATER: min), else a: a flag times
    f = (b_i - a_i + z).degree + 1 plus b_i - a_i + z reads the difference where picked, then
    a_i + it mod M."""
    m = a.context.params.message_modulus
    na = -a
    z = na.degree
    diff = b + na  # b_i - a_i + z
    f = diff.degree + 1
    flag = compare_blocks(a, b, lambda s: f if s == pick_b_when else 0)
    delta = _lut(flag.unsqueeze(-1) + diff, lambda v: (v - f - z) % m if v >= f else 0)
    return _lut(a + delta, lambda v: v % m)


def bitwise_blocks(a, b, fn):
    return apply_bivariate(fn, a, b)


# ---------------------------------------------------------------------------- the circuits

def _radix(fn):
    return circuit(lambda a, b: RadixTensor(fn(a.blocks, b) if isinstance(b, int) else fn(a.blocks, b.blocks),
                                            a.bits))


ADD = _radix(add_blocks)
SUB = _radix(sub_blocks)
ADD_SCALAR = _radix(add_scalar_blocks)
MUL = _radix(mul_blocks)
MUL_SCALAR = _radix(mul_scalar_blocks)
MAX = _radix(lambda a, b: select_max_blocks(a, b, LESS))
MIN = _radix(lambda a, b: select_max_blocks(a, b, GREATER))
BITWISE = {"and": _radix(lambda a, b: bitwise_blocks(a, b, lambda x, y: x & y)),
           "or": _radix(lambda a, b: bitwise_blocks(a, b, lambda x, y: x | y)),
           "xor": _radix(lambda a, b: bitwise_blocks(a, b, lambda x, y: x ^ y))}
_STATES = {"lt": (LESS,), "le": (LESS, EQUAL), "gt": (GREATER,), "ge": (GREATER, EQUAL)}
COMPARE = {op: circuit(lambda a, b, s=s: compare_blocks(a.blocks, b.blocks, lambda st: int(st in s)))
           for op, s in _STATES.items()}
COMPARE["eq"] = circuit(lambda a, b: eq_blocks(a.blocks, b.blocks, 1))
COMPARE["ne"] = circuit(lambda a, b: eq_blocks(a.blocks, b.blocks, 0))
