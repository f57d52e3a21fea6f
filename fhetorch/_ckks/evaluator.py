"""CKKS evaluator: homomorphic operations on Ciphertexts, as functions of a CKKSContext.

Scale management: level l has a nominal scale (params.level_scales) chosen so that a
product of two nominal-scale ciphertexts at level l, rescaled, lands exactly on level
l-1's nominal scale. Plaintexts and constants are encoded so that results stay nominal;
`drop_level` also normalises the scale. Scales within SCALE_RTOL count as equal (the
relative error that introduces is far below CKKS precision).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import torch

from .. import _ops
from .._distributed import check_same, sum_residues
from ..errors import EncodingError, LevelError, MissingKeyError, ScaleError, ShapeError, SlotError
from .._rlwe.keyswitch import keyswitch, keyswitch_inner_sum, mod_up, switch_modulus
from .arguments import as_int
from .ciphertext import Ciphertext
from .context import CKKSContext, check_ciphertext_scale, galois_element

SCALE_RTOL = 2.0**-30


def _mod(ctx: CKKSContext, level: int):
    return ctx.basis(level).mod


def same_scale(a: float, b: float) -> bool:
    return abs(a - b) <= SCALE_RTOL * max(abs(a), abs(b))


def _need_level(ct: Ciphertext, what: str, levels: int = 1):
    if ct.level < levels:
        raise LevelError(f"{what}: needs {levels} level(s) but the ciphertext is at level {ct.level}; "
                         "encrypt at a higher level, use a preset with more levels, or bootstrap")


# --- addition ----------------------------------------------------------------------
def match(ctx: CKKSContext, a: Ciphertext, b: Ciphertext, what: str = "add"):
    """Bring a and b to one level (dropping the higher) with equal scales."""
    check_ciphertext_scale(a, what)
    check_ciphertext_scale(b, what)
    if a.slots != b.slots:
        raise SlotError(f"{what}: operands pack {a.slots} and {b.slots} slots; encrypt them with the same layout")
    if a.level > b.level:
        a = drop_level(ctx, a, a.level - b.level)
    elif b.level > a.level:
        b = drop_level(ctx, b, b.level - a.level)
    if not same_scale(a.scale, b.scale):
        if a.level == 0:
            raise ScaleError(f"{what}: scales 2^{math.log2(a.scale):.3f} and 2^{math.log2(b.scale):.3f} differ at "
                             "level 0, where they cannot be matched; keep a level in reserve")
        a, b = drop_level(ctx, a, 1), drop_level(ctx, b, 1)
    return a, b


def _pad(x: torch.Tensor, k: int) -> torch.Tensor:
    """(..., j, L, N) -> (..., k, L, N): zero components appended."""
    j = x.shape[-3]
    if j == k:
        return x
    zeros = x.new_zeros(x.shape[:-3] + (k - j,) + x.shape[-2:])
    return torch.cat([x, zeros], dim=-3)


def _with_c0(a: Ciphertext, c0: torch.Tensor) -> Ciphertext:
    """a with component 0 replaced."""
    data = a.data.clone()
    data.select(-3, 0).copy_(c0)
    return a.replace(data=data)


def _per_component(pt: torch.Tensor, a: Ciphertext) -> torch.Tensor:
    """Plaintext residues (L, N), or (..., L, N) one per ciphertext of a's batch, as a
    multiplicand of every component of a."""
    if pt.dim() == 2:
        return pt  # the op broadcasts a trailing (L, N) operand
    if pt.shape[:-2] != a.batch_shape:
        raise ShapeError(f"multiply: {tuple(pt.shape[:-2])} plaintexts for a batch of {tuple(a.batch_shape)} "
                         "ciphertexts")
    return pt.unsqueeze(-3).expand(a.data.shape).contiguous()


def _same_batch(a: Ciphertext, b: Ciphertext, what: str):
    if a.batch_shape != b.batch_shape:
        raise ShapeError(f"{what}: batches of {tuple(a.batch_shape)} and {tuple(b.batch_shape)} ciphertexts; "
                         "operands must hold the same number of ciphertexts")


def add(ctx, a: Ciphertext, b: Ciphertext) -> Ciphertext:
    _same_batch(a, b, "add")
    a, b = match(ctx, a, b, "add")
    k = max(a.size, b.size)
    return a.replace(data=_ops.add(_pad(a.data, k), _pad(b.data, k), _mod(ctx, a.level)))


def sub(ctx, a: Ciphertext, b: Ciphertext) -> Ciphertext:
    _same_batch(a, b, "sub")
    a, b = match(ctx, a, b, "sub")
    k = max(a.size, b.size)
    return a.replace(data=_ops.sub(_pad(a.data, k), _pad(b.data, k), _mod(ctx, a.level)))


def sum_batch(ctx, a: Ciphertext) -> Ciphertext:
    """The ciphertexts of a batch (B, k, L, N) added into one (k, L, N): a tree of halves,
    ceil(log2 B) additions of whole half-batches."""
    while a.batch_shape:
        if a.data.dim() > 4:
            raise ShapeError("sum_batch: one batch dimension expected, got "
                             f"{tuple(a.batch_shape)}; flatten the batch first")
        b = a.data.shape[0]
        if b == 1:
            return a.replace(data=a.data[0])
        half = b // 2
        head = add(ctx, a.replace(data=a.data[:half]), a.replace(data=a.data[half : 2 * half]))
        if b % 2:  # the odd one out joins the first
            first = add(ctx, head.replace(data=head.data[0]), a.replace(data=a.data[-1]))
            head = head.replace(data=torch.cat([first.data[None], head.data[1:]]))
        a = head
    return a


def sum_ranks(ctx, a: Ciphertext, group, *, check: bool = True) -> Ciphertext:
    """a added over the ranks of a torch.distributed process group (None: the default one),
    every rank getting the sum: one all_reduce of int64 residue sums reduced mod each prime, bit
    for bit what adding the ranks' ciphertexts in one process gives. check: first compare the
    ranks' shapes, levels, scales and slot counts (one small all_gather and a host sync; a loop
    that repeats one call checks its first). Raises DistributedError where they differ."""
    if check:
        scale_bits = struct.unpack("<q", struct.pack("<d", float(a.scale)))[0]
        check_same([*a.data.shape, a.level, a.slots, scale_bits], group, "sum_ranks",
                   "shape, level, scale and slots")
    moduli = ctx.basis(a.level).mod[:, 0].to(torch.int64)
    return a.replace(data=sum_residues(a.data, moduli, group))


def neg(ctx, a: Ciphertext) -> Ciphertext:
    return a.replace(data=_ops.neg(a.data, _mod(ctx, a.level)))


def add_values(ctx, a: Ciphertext, values: torch.Tensor, *, subtract=False) -> Ciphertext:
    """a + values (a - values with subtract) for a slot vector of values."""
    return add_plaintext(ctx, a, ctx.encode(values, level=a.level, scale=a.scale, slots=a.slots), subtract=subtract)


def add_plaintext(ctx, a: Ciphertext, pt, *, subtract=False) -> Ciphertext:
    """a + pt for a Plaintext encoded at a's level and scale (encode once, add many times)."""
    check_ciphertext_scale(a, "add")
    if pt.level != a.level or not math.isclose(pt.scale, a.scale, rel_tol=1e-9):
        raise LevelError(f"add: the plaintext is at level {pt.level}, scale 2^{math.log2(pt.scale):.2f}; the "
                         f"ciphertext at level {a.level}, scale 2^{math.log2(a.scale):.2f}: encode it at the "
                         "ciphertext's level and scale")
    m = _mod(ctx, a.level)
    c0 = a.component(0).contiguous()
    pd = pt.data.expand_as(c0).contiguous() if pt.data.shape != c0.shape else pt.data
    return _with_c0(a, _ops.sub(c0, pd, m) if subtract else _ops.add(c0, pd, m))


def add_scalar(ctx, a: Ciphertext, c: complex, what: str = "add") -> Ciphertext:
    """a + c in every slot: a real constant is the constant coefficient, c * scale (checked
    against the level's modulus like a plaintext tensor's coefficients)."""
    check_ciphertext_scale(a, what)
    c = complex(c)
    if c.imag != 0:
        return add_values(ctx, a, torch.full((a.slots,), c, dtype=torch.complex128))
    b = ctx.basis(a.level)
    # one pass: every component times 1, the constant added to component 0
    data = _ops.lincomb([a.data.contiguous()], b.scalar_table([1]), b.mod, encode_scalar(ctx, a, c.real, what))
    return a.replace(data=data)


def encode_scalar(ctx, a: Ciphertext, c: float, what: str = "add") -> torch.Tensor:
    """The real constant c at a's level and scale: the per-limb Montgomery residues of
    round(c * a.scale) that add_scalar adds to component 0 (lincomb's `scalar`), checked
    against the level's modulus like a plaintext tensor's coefficients."""
    check_ciphertext_scale(a, what)
    k = _round_scaled(c, a.scale, what)
    ctx.check_fits(abs(k), a.level, a.scale, what, "constant")
    return ctx.basis(a.level).scalar(k)


SCALAR_LIMIT = 2.0**120  # scalar constants become per-limb residues, so any integer size works


def _round_scaled(c: float, scale: float, what: str) -> int:
    if not math.isfinite(c) or not math.isfinite(c * scale) or abs(c * scale) >= SCALAR_LIMIT:
        raise EncodingError(f"{what}: constant {c} at scale 2^{math.log2(scale):.1f} is too large; "
                            "use a smaller constant")
    return round(c * scale)


# --- multiplication ---------------------------------------------------------------
def _mul_operands(ctx, a: Ciphertext, b: Ciphertext):
    """a and b at one level and layout, both of 2 components."""
    _same_batch(a, b, "multiply")
    a, b = match(ctx, a, b, "multiply") if a.level != b.level or a.slots != b.slots else (a, b)
    if a.size != 2 or b.size != 2:
        a, b = relinearize(ctx, a), relinearize(ctx, b)
    return a, b


def mul_raw(ctx, a: Ciphertext, b: Ciphertext) -> Ciphertext:
    """Tensor product (3 components), no relinearisation, no rescale; scale a.scale * b.scale."""
    a, b = _mul_operands(ctx, a, b)
    data = _ops.tensor_product(a.data, b.data, _mod(ctx, a.level))
    return a.replace(data=data, scale=a.scale * b.scale)


def _need_relin_key(ctx, what: str) -> None:
    if ctx.relin_key is None:
        raise MissingKeyError(f"{what}: no relinearisation key; call ctx.keygen() on the client")


def relinearize(ctx, a: Ciphertext) -> Ciphertext:
    if a.size == 2:
        return a
    _need_relin_key(ctx, "relinearize")
    r = ctx.params.limbs(a.level)
    # (d0, d1) + ModDown(...): the addition happens inside the modulus switch.
    u = keyswitch(ctx.modulus_tables, a.component(2), ctx.relin_key, r, ctx.params.special_limbs, ctx.params.alpha,
                   addend=a.data.narrow(-3, 0, 2))
    return a.replace(data=u)


def rescale(ctx, a: Ciphertext) -> Ciphertext:
    """Divide by the primes level-1 lacks and multiply by those it adds (rational rescaling).

    Only meaningful on a product whose rescale was deferred: on a ciphertext at its nominal
    scale it would leave a scale near 1, where the rounding noise swamps the values, so a
    rescale leaving less than half the next level's nominal scale bits is refused."""
    _need_level(a, "rescale")
    check_ciphertext_scale(a, "rescale")
    src, dst = tuple(ctx.params.limbs(a.level)), tuple(ctx.params.limbs(a.level - 1))
    scale = a.scale * _ratio(ctx, src, dst)
    _check_rescaled(ctx, a, scale, "rescale")
    data = switch_modulus(ctx.modulus_tables, a.data, src, dst)
    return a.replace(data=data, level=a.level - 1, scale=scale)


def _bits(x: float) -> str:
    return f"{round(math.log2(x), 1) + 0.0}"  # + 0.0: no "-0.0"


def _check_rescaled(ctx, a: Ciphertext, scale: float, what: str):
    """The scale a rescale from a.level leaves must keep at least half of level - 1's nominal bits."""
    nominal = ctx.nominal_scale(a.level - 1)
    if scale < math.sqrt(nominal):
        if what == "rescale":
            cause = (f"the ciphertext's 2^{_bits(a.scale)} divided by the 2^{_bits(a.scale / scale)} a rescale removes")
            hint = ("Rescale only a product whose rescale was deferred (evaluator.mul(..., rescale_result=False)); "
                    "tensor operations rescale by themselves, and drop_level() moves down a level keeping the values")
        else:
            cause = "the operands' scales are too small for a product"
            hint = "Encrypt the operands at their level's nominal scale"
        raise ScaleError(f"{what}: would leave scale 2^{_bits(scale)} at level {a.level - 1} ({cause}), far below the "
                         f"level's nominal 2^{_bits(nominal)}: the noise would swamp the values. {hint}")


def _switch_products(ctx, src, dst) -> tuple:
    """(prod(dst - src), prod(src - dst)): the primes a switch from limbs src to dst adds and drops."""
    added = ctx.ring.basis(tuple(i for i in dst if i not in src)).product if set(dst) - set(src) else 1
    return added, ctx.ring.basis(tuple(i for i in src if i not in dst)).product


def _ratio(ctx, src, dst) -> float:
    """prod(dst - src) / prod(src - dst), exactly rounded."""
    added, dropped = _switch_products(ctx, src, dst)
    return added / dropped


def landing_scale(ctx, level: int, target: int) -> Fraction:
    """The scale a value at `level` must have for the modulus switch to `target` to land it
    exactly on target's nominal scale: nominal(target) * prod(dropped) / prod(added), exact
    (deep switches give scales beyond a float's exact range). Raises nothing."""
    added, dropped = _switch_products(ctx, tuple(ctx.params.limbs(level)), tuple(ctx.params.limbs(target)))
    return Fraction(ctx.nominal_scale(target)) * dropped / added


def mul(ctx, a: Ciphertext, b: Ciphertext, *, rescale_result: bool = True) -> Ciphertext:
    """a * b with relinearisation, then (by default) rescale.

    The tensor product, the ModUp of d2, the inner product with the key and + P * (d0, d1)
    over Q_l * P are one op; one modulus switch then drops P (ModDown), and with the rescale
    the level's top primes together with it (Cheddar Seq. fusion).
    """
    _need_level(min(a, b, key=lambda c: c.level), "multiply")
    check_ciphertext_scale(a, "multiply")
    check_ciphertext_scale(b, "multiply")
    _need_relin_key(ctx, "relinearize")
    a, b = _mul_operands(ctx, a, b)
    return _relinearize_product(ctx, a, a.scale * b.scale, a.data, rescale_result, b=b.data)


def _relinearize_product(ctx, a: Ciphertext, scale: float, x: torch.Tensor, rescale_result: bool = True,
                         addend: Ciphertext | None = None, **d01) -> Ciphertext:
    """The product at a's level whose d2 (or, with b=, tensor product) is x, relinearised and
    (by default) rescaled: key-switched d2 plus P * (d0, d1) over Q_l * P (d01: keyswitch's b= or
    inner_addend=), then one switch drops P, and with the rescale the level's top primes together.
    P * (d0, d1) vanishes mod P and ModDown divides it by P exactly, so the result equals
    (d0, d1) + ModDown(key-switched d2) bit for bit. addend (a ciphertext at the result's level and
    scale) is added by the switch's last pass: bit for bit add(result, addend)."""
    r = ctx.params.limbs(a.level)
    dst, level = tuple(r), a.level
    if rescale_result:
        dst, level = tuple(ctx.params.limbs(a.level - 1)), a.level - 1
        scale = scale * _ratio(ctx, tuple(r), dst)
        _check_rescaled(ctx, a, scale, "multiply")
    if addend is not None:
        _check_product_addend(a, addend, level, scale)
    data = keyswitch(ctx.modulus_tables, x, ctx.relin_key, r, ctx.params.special_limbs, ctx.params.alpha, dst,
                     None if addend is None else addend.data, c_add=_special_product_consts(ctx, a.level), **d01)
    return a.replace(data=data, level=level, scale=scale)


def _check_product_addend(a: Ciphertext, addend: Ciphertext, level: int, scale: float) -> None:
    """Raises unless addend can be added to the product of a's operands: 2 components at `level` and
    `scale`, a's slots and batch."""
    _same_batch(addend, a, "mul_sum")
    check_ciphertext_scale(addend, "mul_sum")
    if addend.size != 2 or addend.level != level or addend.slots != a.slots:
        raise LevelError(f"mul_sum: the addend must be a relinearised ciphertext at the product's level {level} with "
                         f"{a.slots} slots; got level {addend.level}, {addend.slots} slots, {addend.size} components "
                         "(drop_level and relinearize it first)")
    if not same_scale(addend.scale, scale):
        raise ScaleError(f"mul_sum: the addend's scale {addend.scale:.6g} differs from the product's {scale:.6g}; "
                         "bring it to the product's scale first")


def mul_sum(ctx, pairs, addend: Ciphertext | None = None) -> Ciphertext:
    """sum_i a_i * b_i (+ addend), relinearised and rescaled once (lazy relinearisation): the
    tensor products are added first, so T products cost one key switch and one modulus switch
    instead of T of each (the spines of polynomial evaluation, circuits/polynomial). addend, a
    ciphertext at the result's level and scale, is added by the key switch's last pass (no pass
    of its own; bit for bit add(mul_sum(pairs), addend)).

    Every operand must be a 2-component ciphertext at one level, slot count and batch, and
    the products' scales equal (the caller matches them: drop_level). Raises LevelError,
    SlotError, ShapeError or ScaleError otherwise."""
    pairs = list(pairs)
    if len(pairs) == 1 and addend is None:
        return mul(ctx, *pairs[0])
    a0, b0 = pairs[0]
    _need_level(a0, "multiply")
    for a, b in pairs:
        _same_batch(a, a0, "mul_sum")
        _same_batch(b, a0, "mul_sum")
        for c in (a, b):
            check_ciphertext_scale(c, "multiply")
            if c.level != a0.level or c.slots != a0.slots or c.size != 2:
                raise LevelError(f"mul_sum: every operand must be a relinearised ciphertext at level {a0.level} with "
                                 f"{a0.slots} slots; got level {c.level}, {c.slots} slots, {c.size} components "
                                 "(drop_level and relinearize them first)")
        if not same_scale(a.scale * b.scale, a0.scale * b0.scale):
            raise ScaleError("mul_sum: the products' scales differ; bring the operands to their nominal scales first")
    _need_relin_key(ctx, "mul_sum")
    if len(pairs) == 1:  # the tensor product inside the key switch, as mul's
        return _relinearize_product(ctx, a0, a0.scale * b0.scale, a0.data, addend=addend, b=b0.data)
    b = ctx.basis(a0.level)
    d = _ops.tensor_product([x.data for x, _ in pairs], [y.data for _, y in pairs], b.mod)  # (..., 3, L, N)
    return _relinearize_product(ctx, a0, a0.scale * b0.scale, d.select(-3, 2), addend=addend,
                                inner_addend=d.narrow(-3, 0, 2))


def _special_product_consts(ctx, level: int) -> torch.Tensor:
    """P mod q for the level's limbs, as Montgomery constants (the level's cached scalar P)."""
    return ctx.basis(level).scalar(ctx.special_basis.product)


def square(ctx, a: Ciphertext) -> Ciphertext:
    return mul(ctx, a, a)


def _target_scale_factor(ctx, a: Ciphertext) -> float:
    """Scale to encode a multiplicand at so that a * it, rescaled, is exactly nominal."""
    src, dst = tuple(ctx.params.limbs(a.level)), tuple(ctx.params.limbs(a.level - 1))
    return ctx.nominal_scale(a.level - 1) / _ratio(ctx, src, dst) / a.scale


def mul_values(ctx, a: Ciphertext, values: torch.Tensor, *, rescale_result: bool = True) -> Ciphertext:
    _need_level(a, "multiply")
    return mul_plaintext(ctx, a, encode_multiplicand(ctx, a, values), rescale_result=rescale_result)


def encode_multiplicand(ctx, a: Ciphertext, values: torch.Tensor):
    """A Plaintext of slot values at a's level and the scale that makes a * it, rescaled, nominal
    (encode once, multiply many times: mul_plaintext; encoding checks sizes on the host, so
    code captured in a CUDA graph multiplies by plaintexts encoded before)."""
    check_ciphertext_scale(a, "multiply")
    s = _target_scale_factor(ctx, a)
    top = float(values.abs().max()) if values.numel() else 0.0
    ctx.check_fits(top * s * a.scale, a.level, a.scale, "multiply", "plaintext values")  # the product must fit
    return ctx.encode(values, level=a.level, scale=s, slots=a.slots)


def mul_plaintext(ctx, a: Ciphertext, pt, *, rescale_result: bool = True) -> Ciphertext:
    """a * pt for a Plaintext at a's level (from encode_multiplicand)."""
    _need_level(a, "multiply")
    check_ciphertext_scale(a, "multiply")
    if pt.level != a.level:
        raise LevelError(f"multiply: the plaintext is at level {pt.level}, the ciphertext at {a.level}; encode it "
                         "at the ciphertext's level")
    out = a.replace(data=_ops.mul(a.data, _per_component(pt.data, a), _mod(ctx, a.level)), scale=a.scale * pt.scale)
    return rescale(ctx, out) if rescale_result else out


def mul_scalar(ctx, a: Ciphertext, c: complex) -> Ciphertext:
    """a * c. Integers multiply exactly without a level; other constants cost one rescale.
    The constant times the ciphertext's scale must fit the level (as a plaintext tensor's values)."""
    check_ciphertext_scale(a, "multiply")
    c = complex(c)
    b = ctx.basis(a.level)
    if c.imag == 0 and float(c.real).is_integer() and abs(c.real) < 2**31:
        ctx.check_fits(abs(c.real) * a.scale, a.level, a.scale, "multiply", "constant")
        return a.replace(data=_ops.mul_const(a.data, b.scalar(int(c.real)), b.mod))
    if c.real == 0 and c.imag != 0 and float(c.imag).is_integer() and abs(c.imag) < 2**31:
        return mul_scalar(ctx, mul_i(ctx, a), c.imag)
    _need_level(a, "multiply")
    s = _target_scale_factor(ctx, a)
    k_re, k_im = _round_scaled(c.real, s, "multiply"), _round_scaled(c.imag, s, "multiply")
    ctx.check_fits(abs(complex(k_re, k_im)) * a.scale, a.level, a.scale, "multiply", "constant")
    if c.imag == 0:
        data = _ops.mul_const(a.data, b.scalar(k_re), b.mod)
    else:
        data = _ops.lincomb([a.data, mul_i(ctx, a).data], b.scalar_table([k_re, k_im]), b.mod)
    return rescale(ctx, a.replace(data=data, scale=a.scale * s))


def mul_i(ctx, a: Ciphertext) -> Ciphertext:
    """a * i, exactly (multiplication by the monomial X^(N/2)); no level used."""
    return a.replace(data=_ops.mul(a.data, ctx.monomial_i(a.level), _mod(ctx, a.level)))


def drop_level(ctx, a: Ciphertext, levels: int = 1) -> Ciphertext:
    """Move `levels` levels down, landing on the nominal scale of the target level."""
    levels = as_int(levels, "drop_level", "levels")
    if levels < 0:
        raise LevelError(f"drop_level: levels must be >= 0, got {levels}")
    _need_level(a, "drop_level", levels)
    check_ciphertext_scale(a, "drop_level")
    a = relinearize(ctx, a)
    if levels == 0:
        return a
    # One modulus switch for all the levels: a * k over level l, then the primes of l - levels
    # replace l's, where the integer k = nominal(l - levels) * prod(dropped) / (scale * prod(added))
    # (exact rationals: k has about as many bits as the dropped primes, beyond a float's range
    # for deep drops).
    src, dst = tuple(ctx.params.limbs(a.level)), tuple(ctx.params.limbs(a.level - levels))
    # A scale within tolerance of nominal uses nominal's k: one k per (level, levels), folded into the
    # switch's cached constants. Any other scale: its own k, applied in one more pass (no table set per scale).
    nominal = same_scale(a.scale, ctx.nominal_scale(a.level))
    k = round(landing_scale(ctx, a.level, a.level - levels) / Fraction(ctx.nominal_scale(a.level) if nominal else a.scale))
    if k < 1:  # a scale far above nominal (an unrescaled product): k = 0 would zero the values
        raise ScaleError(f"drop_level: the ciphertext's scale 2^{math.log2(a.scale):.1f} is above what level "
                         f"{a.level - levels} can land on; rescale it first (it holds a product not yet rescaled)")
    if nominal:
        data = switch_modulus(ctx.modulus_tables, a.data, src, dst, factor=k)
    else:
        b = ctx.basis(a.level)
        data = switch_modulus(ctx.modulus_tables, _ops.mul_const(a.data, b.scalar(k), b.mod), src, dst)
    added, dropped = _switch_products(ctx, src, dst)
    return a.replace(data=data, level=a.level - levels, scale=float(Fraction(a.scale) * k * added / dropped))


# --- rotations ------------------------------------------------------------------------
def _naf(k: int) -> list:
    """Signed powers of two summing to k, fewest terms (non-adjacent form)."""
    out, bit = [], 1
    while k:
        if k & 1:
            d = 2 - (k & 3)  # +1 or -1
            out.append(d * bit)
            k -= d
        k >>= 1
        bit <<= 1
    return out


def decompose_rotation(ctx, step: int, slots: int, level: int | None = None) -> list:
    """Steps with keys covering `level` (default: the top) whose composition rotates `slots`
    slots left by `step`: a direct key if one covers the level, else the fewest +-2^i keys
    (a key made for bootstrapping's low levels is never picked above them)."""
    level = ctx.max_level if level is None else level
    r = step % slots
    if r == 0:
        return []
    has = lambda s: ctx.has_galois_key(galois_element(s, ctx.n), level)  # noqa: E731
    for cand in (r, r - slots):
        if has(cand):
            return [cand]
    plans = [_naf(r), _naf(r - slots)]
    plans.sort(key=len)
    for plan in plans:
        if all(has(s) for s in plan):
            return plan
    missing = [s for s in plans[0] if not has(s)]
    raise MissingKeyError(f"rotate: no key for step {step} at level {level} (nor for its power-of-two parts "
                          f"{missing}); generate it with ctx.keygen(rotations=[{step}]) on the client")


def apply_galois(ctx, a: Ciphertext, g: int, what: str, step: int | None = None) -> Ciphertext:
    key = ctx.galois_key(g, what, a.level, step)
    a = relinearize(ctx, a)
    r = ctx.params.limbs(a.level)
    # key switch of sigma(c1), + sigma(c0) on u0: the automorphisms read inside its passes
    u = keyswitch(ctx.modulus_tables, a.component(1), key, r, ctx.params.special_limbs, ctx.params.alpha,
                  addend=a.component(0), galois=g)
    return a.replace(data=u)


def rotate(ctx, a: Ciphertext, step: int) -> Ciphertext:
    """Left rotation of the slot vector: slot i takes slot i + step (cyclic over a.slots)."""
    step = as_int(step, "rotate", "the step")
    for s in decompose_rotation(ctx, step, a.slots, a.level):
        a = apply_galois(ctx, a, galois_element(s, ctx.n), f"rotate by {s}", s)
    return a


def rotate_hoisted(ctx, a: Ciphertext, steps) -> dict:
    """{step: rotate(a, step)} sharing one ModUp of a's second component (keys needed for each step)."""
    a = relinearize(ctx, a)
    r = ctx.params.limbs(a.level)
    d = mod_up(ctx.modulus_tables, a.component(1), r, ctx.params.special_limbs, ctx.params.alpha)  # read in place
    ext = tuple(r) + tuple(ctx.params.special_limbs)
    d, c0, c_p = d.unsqueeze(-4), a.data.narrow(-3, 0, 1).contiguous(), _special_product_consts(ctx, a.level)
    out = {}
    for s in steps:
        if s % a.slots == 0:
            out[s] = a
            continue
        g = galois_element(s, ctx.n)
        key = ctx.galois_key(g, f"rotate by {s} (hoisted rotations need a direct key per step)", a.level, s)
        # sigma(d)'s key products + P * sigma(c0) over P*Q, the digits read through the rotation (no
        # automorphism pass over them); ModDown then divides P * sigma(c0) back to sigma(c0) exactly
        u = keyswitch_inner_sum(ctx.modulus_tables, d, [key], [g], r, ctx.params.special_limbs, ctx.params.alpha,
                                addend=c0, c_add=c_p)
        out[s] = a.replace(data=switch_modulus(ctx.modulus_tables, u, ext, tuple(r)))
    return out


def conj(ctx, a: Ciphertext) -> Ciphertext:
    return apply_galois(ctx, a, 2 * ctx.n - 1, "conjugate")
