"""Scheme layer: evaluator functions on Ciphertexts of a keyed CKKSContext, compared with the
same computation on complex128 plaintext, each with a stated max-abs-error bound.

Values are uniform in [-1, 1] (real, or real and imaginary parts). The bounds are about 10x
the errors measured on CPU (toy-n12 at scale 2^40, toy-n10 at scale 2^35).
"""
import math
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import galois_element
from fhetorch._ckks import CKKSContext, evaluator as ev
from fhetorch._ckks.evaluator import decompose_rotation

# max-abs-error bounds per preset: fresh/linear ops, one multiplication or rotation (key switch)
BOUND = {  # measured maxima in comments
    "toy-n12": dict(fresh=1e-8,  # 8e-10
                    mul=2e-7,  # 2e-8 (multiply, rescale, drop_level)
                    rot=2e-7,  # 1.5e-8 (rotate, conjugate: key switching)
                    pk=6e-7,  # 6.5e-8 (public-key encryption, then multiply + rotate)
                    chain=3e-7),  # 3e-8 (10 multiplications down to level 0)
    "toy-n10": dict(fresh=1e-7,  # 1.1e-8
                    mul=1.5e-6,  # 1.3e-7
                    rot=1.5e-6,  # 1.4e-7
                    pk=5e-6,  # 5.2e-7
                    chain=2e-6),  # 1.7e-7 (8 multiplications)
}


@pytest.fixture(params=["toy-n12", "toy-n10"])
def sctx(request):
    return request.getfixturevalue({"toy-n12": "ctx_n12", "toy-n10": "ctx_n10"}[request.param])


def _bound(ctx, kind):
    return BOUND[ctx.params.name][kind]


def _rand(n, complex_=False, device="cpu"):
    v = torch.rand(n, dtype=torch.float64, device=device) * 2 - 1
    if complex_:
        v = torch.complex(v, torch.rand(n, dtype=torch.float64, device=device) * 2 - 1)
    return v.to(torch.complex128)


def _enc(ctx, complex_=False, slots=None, level=None):
    v = _rand(slots or ctx.slots, complex_, ctx.device)
    return v, ctx.encrypt_vector(v, level=level)


def _dec(ctx, ct):
    return ctx.decrypt_vector(ct)


def _nominal(ctx, ct):
    """The ciphertext sits on its level's nominal scale (within evaluator.SCALE_RTOL)."""
    return ev.same_scale(ct.scale, ctx.nominal_scale(ct.level))


# --- addition --------------------------------------------------------------------------------
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_add_sub_neg(sctx, complex_, assert_close):
    (x, cx), (y, cy) = _enc(sctx, complex_), _enc(sctx, complex_)
    b = _bound(sctx, "fresh")
    assert_close(_dec(sctx, ev.add(sctx, cx, cy)), x + y, b, "add")
    assert_close(_dec(sctx, ev.sub(sctx, cx, cy)), x - y, b, "sub")
    r = ev.neg(sctx, cx)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), -x, b, "neg")


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_add_plain(sctx, complex_, assert_close):
    (x, cx), p = _enc(sctx), _rand(sctx.slots, complex_, sctx.device)
    b = _bound(sctx, "fresh")
    r = ev.add_values(sctx, cx, p)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), x + p, b, "add_values")
    assert_close(_dec(sctx, ev.add_values(sctx, cx, p, subtract=True)), x - p, b, "add_values subtract")


@pytest.mark.parametrize("c", [0.75, -3, 1234.5, 0.25 - 1.5j, 2j])
def test_add_scalar(sctx, c, assert_close):
    x, cx = _enc(sctx, complex_=True)
    r = ev.add_scalar(sctx, cx, c)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), x + c, _bound(sctx, "fresh"), f"add_scalar {c}")


# --- multiplication --------------------------------------------------------------------------
def test_mul_raw_relinearize_rescale(sctx, assert_close):
    (x, cx), (y, cy) = _enc(sctx, True), _enc(sctx, True)
    b = _bound(sctx, "mul")
    t = ev.mul_raw(sctx, cx, cy)
    assert t.size == 3 and t.level == cx.level
    assert t.scale == pytest.approx(cx.scale * cy.scale, rel=1e-12)
    assert_close(_dec(sctx, t), x * y, b, "mul_raw (3 components)")
    r = ev.relinearize(sctx, t)
    assert r.size == 2 and r.level == cx.level and r.scale == t.scale
    assert_close(_dec(sctx, r), x * y, b, "relinearize")
    s = ev.rescale(sctx, r)
    assert s.size == 2 and s.level == cx.level - 1
    assert _nominal(sctx, s), "a product of nominal-scale operands rescales onto the nominal scale"
    assert tuple(s.data.shape) == (2, len(sctx.params.limbs(s.level)), sctx.n)
    assert_close(_dec(sctx, s), x * y, b, "rescale")


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_multiply_and_square(sctx, complex_, assert_close):
    (x, cx), (y, cy) = _enc(sctx, complex_), _enc(sctx, complex_)
    b = _bound(sctx, "mul")
    r = ev.mul(sctx, cx, cy)
    assert r.size == 2 and r.level == cx.level - 1 and _nominal(sctx, r)
    assert_close(_dec(sctx, r), x * y, b, "multiply")
    s = ev.square(sctx, cx)
    assert s.level == cx.level - 1 and _nominal(sctx, s)
    assert_close(_dec(sctx, s), x * x, b, "square")
    n = ev.mul(sctx, cx, cy, rescale_result=False)
    assert n.level == cx.level and n.size == 2
    assert_close(_dec(sctx, n), x * y, b, "multiply without rescale")


def test_mul_without_rescale_equals_its_composition(sctx):
    """mul(rescale_result=False) relinearises inside the fused op (the tensor product, ModUp of d2, the key
    products and P * (d0, d1) over Q_l * P, then ModDown to the level): bit for bit relinearize(mul_raw), whose
    ModDown adds (d0, d1) after the switch; one ciphertext and a batch."""
    _, cx = _enc(sctx, True)
    _, cy = _enc(sctx, True)
    batch = cx.replace(data=torch.stack([cx.data, cy.data]))
    for a, b in ((cx, cy), (batch, batch)):
        got = ev.mul(sctx, a, b, rescale_result=False)
        want = ev.relinearize(sctx, ev.mul_raw(sctx, a, b))
        assert got.level == want.level and got.scale == want.scale and got.size == 2
        assert torch.equal(got.data, want.data), f"batch {tuple(a.data.shape[:-3])} x {tuple(b.data.shape[:-3])}"


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_mul_plain(sctx, complex_, assert_close):
    (x, cx), p = _enc(sctx), _rand(sctx.slots, complex_, sctx.device)
    r = ev.mul_values(sctx, cx, p)
    assert r.level == cx.level - 1 and _nominal(sctx, r)
    assert_close(_dec(sctx, r), x * p, _bound(sctx, "mul"), "mul_values")


@pytest.mark.parametrize("c", [3, -5, 0, 1000])
def test_mul_scalar_integer_uses_no_level(sctx, c, assert_close):
    x, cx = _enc(sctx, True)
    r = ev.mul_scalar(sctx, cx, c)
    assert r.level == cx.level and r.scale == cx.scale
    # the error is multiplied by |c|
    assert_close(_dec(sctx, r), c * x, max(1, abs(c)) * _bound(sctx, "fresh"), f"mul_scalar {c}")


@pytest.mark.parametrize("c", [0.37, -1.5, 1e-3, 0.3 - 1.2j, 0.5j])
def test_mul_scalar_real_and_complex(sctx, c, assert_close):
    x, cx = _enc(sctx, True)
    r = ev.mul_scalar(sctx, cx, c)
    assert r.level == cx.level - 1 and _nominal(sctx, r)
    assert_close(_dec(sctx, r), c * x, _bound(sctx, "mul"), f"mul_scalar {c}")


@pytest.mark.parametrize("c", [1j, -2j])
def test_mul_scalar_imaginary_integer_uses_no_level(sctx, c, assert_close):
    x, cx = _enc(sctx, True)
    r = ev.mul_scalar(sctx, cx, c)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), c * x, 2 * _bound(sctx, "fresh"), f"mul_scalar {c}")


def test_mul_i(sctx, assert_close):
    x, cx = _enc(sctx, True)
    r = ev.mul_i(sctx, cx)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), 1j * x, _bound(sctx, "fresh"), "mul_i")
    assert_close(_dec(sctx, ev.mul_i(sctx, r)), -x, _bound(sctx, "fresh"), "mul_i twice")


@pytest.mark.parametrize("level", [None, 5, 1])
def test_rescale(sctx, level, assert_close):
    x, cx = _enc(sctx, level=level)
    y, cy = _enc(sctx, level=level)
    t = ev.relinearize(sctx, ev.mul_raw(sctx, cx, cy))
    r = ev.rescale(sctx, t)
    assert r.level == t.level - 1
    src, dst = set(sctx.params.limbs(t.level)), set(sctx.params.limbs(r.level))
    ratio = math.prod(sctx.ring.primes[i] for i in dst - src) / math.prod(sctx.ring.primes[i] for i in src - dst)
    assert r.scale == pytest.approx(t.scale * ratio, rel=1e-12)
    assert_close(_dec(sctx, r), x * y, _bound(sctx, "mul"), f"rescale from level {t.level}")


@pytest.mark.parametrize("terms", [1, 2, 3])
def test_mul_sum(sctx, terms, assert_close):
    # sum a_i b_i relinearised once (lazy relinearisation): one level, nominal, as one product's error
    level = sctx.max_level - 1
    xs = [_enc(sctx, True, level=level) for _ in range(2 * terms)]
    pairs = [(xs[2 * i][1], xs[2 * i + 1][1]) for i in range(terms)]
    r = ev.mul_sum(sctx, pairs)
    assert r.level == level - 1 and r.size == 2 and _nominal(sctx, r)
    want = sum(xs[2 * i][0] * xs[2 * i + 1][0] for i in range(terms))
    assert_close(_dec(sctx, r), want, terms * _bound(sctx, "mul"), f"mul_sum of {terms}")


@pytest.mark.parametrize("terms", [1, 2])
def test_mul_sum_addend(sctx, terms, assert_close):
    # the addend, added by the key switch's last pass, gives add(mul_sum(pairs), addend) bit for bit
    level = sctx.max_level - 1
    xs = [_enc(sctx, True, level=level) for _ in range(2 * terms)]
    pairs = [(xs[2 * i][1], xs[2 * i + 1][1]) for i in range(terms)]
    plain = ev.mul_sum(sctx, pairs)
    z, cz = _enc(sctx, True, level=plain.level)
    cz = cz.replace(scale=plain.scale)  # nominal within same_scale's tolerance: the product's label
    r = ev.mul_sum(sctx, pairs, cz)
    want = ev.add(sctx, plain, cz)
    assert (r.level, r.scale) == (want.level, want.scale)
    assert torch.equal(r.data, want.data), f"mul_sum of {terms} with an addend"
    assert_close(_dec(sctx, r), sum(xs[2 * i][0] * xs[2 * i + 1][0] for i in range(terms)) + z,
                 terms * _bound(sctx, "mul") + _bound(sctx, "fresh"), f"mul_sum of {terms} + addend")


def test_mul_sum_addend_errors(sctx):
    level = sctx.max_level - 1
    (_, a), (_, b) = _enc(sctx, level=level), _enc(sctx, level=level)
    with pytest.raises(fhe.LevelError, match="mul_sum: the addend must be .* level " + str(level - 1)):
        ev.mul_sum(sctx, [(a, b)], _enc(sctx, level=level)[1])
    off = _enc(sctx, level=level - 1)[1]
    with pytest.raises(fhe.ScaleError, match="mul_sum: the addend's scale"):
        ev.mul_sum(sctx, [(a, b)], off.replace(scale=off.scale * 3))


def test_mul_sum_needs_one_level(sctx):
    (_, a), (_, b) = _enc(sctx), _enc(sctx)
    (_, c), (_, d) = _enc(sctx, level=sctx.max_level - 1), _enc(sctx, level=sctx.max_level - 1)
    with pytest.raises(fhe.LevelError, match="mul_sum: every operand"):
        ev.mul_sum(sctx, [(a, b), (c, d)])


@pytest.mark.parametrize("levels", [0, 1, 3, "all"])
def test_drop_level(sctx, levels, assert_close):
    x, cx = _enc(sctx, True)
    levels = cx.level if levels == "all" else levels
    r = ev.drop_level(sctx, cx, levels)
    assert r.level == cx.level - levels and _nominal(sctx, r)
    assert tuple(r.data.shape) == (2, len(sctx.params.limbs(r.level)), sctx.n)
    assert_close(_dec(sctx, r), x, _bound(sctx, "mul"), f"drop_level {levels}")


def test_drop_level_errors(sctx):
    _, cx = _enc(sctx, level=2)
    with pytest.raises(fhe.LevelError, match="drop_level"):
        ev.drop_level(sctx, cx, 3)
    with pytest.raises(fhe.LevelError, match="drop_level"):
        ev.drop_level(sctx, cx, -1)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_match_different_levels(sctx, op, assert_close):
    (x, cx), (y, cy) = _enc(sctx, True), _enc(sctx, True, level=sctx.max_level - 3)
    want = {"add": x + y, "sub": x - y, "mul": x * y}[op]
    f = getattr(ev, op)
    for a, b in ((cx, cy), (cy, cx)):
        r = f(sctx, a, b)
        assert r.level == cy.level - (op == "mul")
        assert _nominal(sctx, r)
        w = want if a is cx else {"add": want, "sub": -want, "mul": want}[op]
        assert_close(_dec(sctx, r), w, _bound(sctx, "mul"), f"{op} of levels {a.level} and {b.level}")


def test_match_unrescaled_product_with_fresh(sctx, assert_close):
    """A product at scale ~2^80 added to a fresh ciphertext at ~2^40 of the same level."""
    (x, cx), (y, cy), (z, cz) = _enc(sctx), _enc(sctx), _enc(sctx)
    prod = ev.relinearize(sctx, ev.mul_raw(sctx, cx, cy))
    for r, want in ((ev.add(sctx, prod, cz), x * y + z), (ev.sub(sctx, cz, prod), z - x * y)):
        assert _nominal(sctx, r)
        assert_close(_dec(sctx, r), want, _bound(sctx, "mul"), "add with an unrescaled product")


# --- rotations -------------------------------------------------------------------------------
STEPS = [1, -1, 2, -2, 3, -3, 5, 7, -7, 11, -13, 100, -255, 511, -511, 0]


SLOT_STEPS = {"slots": lambda s: s, "slots-1": lambda s: s - 1, "1-slots": lambda s: 1 - s,
              "3*slots+5": lambda s: 3 * s + 5}


@pytest.mark.parametrize("step", STEPS + list(SLOT_STEPS))
def test_rotate(sctx, step, assert_close):
    x, cx = _enc(sctx, True)
    step = SLOT_STEPS[step](sctx.slots) if isinstance(step, str) else step
    r = ev.rotate(sctx, cx, step)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), torch.roll(x, -step), _bound(sctx, "rot"), f"rotate {step}")


@pytest.mark.parametrize("slots", [1, 8, 64])
@pytest.mark.parametrize("step", [1, -3, 5, 6, 70, -129])
def test_rotate_sparse_packing(ctx_n10, slots, step, assert_close):
    x, cx = _enc(ctx_n10, True, slots=slots)
    r = ev.rotate(ctx_n10, cx, step)
    assert r.slots == slots
    assert_close(_dec(ctx_n10, r), torch.roll(x, -step), BOUND["toy-n10"]["rot"], f"rotate {step} of {slots} slots")


def test_rotation_plan_direct_and_composed(ctx_n12):
    s = ctx_n12.slots
    # direct keys (keygen(rotations=[5, -3, 7]) and the powers of two)
    for k in (5, -3, 7, 1, -1, 4, -1024):
        plan = decompose_rotation(ctx_n12, k, s)
        assert len(plan) == 1 and (plan[0] - k) % s == 0, (k, plan)
    assert len(decompose_rotation(ctx_n12, s - 3, s)) == 1  # the key of -3 (same Galois element)
    assert decompose_rotation(ctx_n12, 0, s) == [] and decompose_rotation(ctx_n12, s, s) == []
    # composed from +-2^i
    for k in (3, 11, -13, 1365, -683):
        plan = decompose_rotation(ctx_n12, k, s)
        assert len(plan) >= 2
        assert all(abs(p) & (abs(p) - 1) == 0 for p in plan), plan
        assert sum(plan) % s == k % s
        assert len(plan) <= math.log2(s)


def test_low_level_key_serves_every_level_below(assert_close):
    """keygen(low_level_rotations={step: L}) makes a key for levels 0 .. L: toy-n12's level 2 ends
    below level 1 (its limbs are a window of the chain), so the key holds level 1's stop too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context("toy-n12", "cpu")
    p, top = ctx.params, 2
    assert p.limbs(top).stop < p.limbs(top - 1).stop
    ctx.keygen(power_of_two_rotations=False, low_level_rotations={3: top})
    for lvl in range(top + 1):
        x, cx = _enc(ctx, True, level=lvl)
        assert_close(_dec(ctx, ev.rotate(ctx, cx, 3)), torch.roll(x, -3), BOUND["toy-n12"]["rot"], f"level {lvl}")
    _, cx = _enc(ctx, True, level=top + 1)
    with pytest.raises(fhe.MissingKeyError):
        ev.rotate(ctx, cx, 3)


def test_rotate_hoisted(sctx, assert_close):
    x, cx = _enc(sctx, True)
    steps = [1, -1, 2, 5, -3, 7, 0, 64]
    out = ev.rotate_hoisted(sctx, cx, steps)
    assert sorted(out) == sorted(steps)
    for k in steps:
        assert out[k].level == cx.level
        assert_close(_dec(sctx, out[k]), torch.roll(x, -k), _bound(sctx, "rot"), f"hoisted rotate {k}")


def test_rotate_hoisted_equals_its_composition(sctx):
    """rotate_hoisted forms each rotation's key products from the shared ModUp's digits read through the
    rotation, P * sigma(c0) added over P*Q (keyswitch_inner_sum): bit for bit the unfused composition
    ModDown(keyswitch_inner(automorphism(d)), + sigma(c0) after it), one ciphertext and a batch."""
    from fhetorch import _ops
    from fhetorch._rlwe.keyswitch import keyswitch_inner, mod_up, switch_modulus

    _, cx = _enc(sctx, True)
    _, cy = _enc(sctx, True)
    tables, sp, alpha = sctx.modulus_tables, sctx.params.special_limbs, sctx.params.alpha
    for ct in (cx, cx.replace(data=torch.stack([cx.data, cy.data]))):
        r = sctx.params.limbs(ct.level)
        d = mod_up(tables, ct.component(1).contiguous(), r, sp, alpha)
        out = ev.rotate_hoisted(sctx, ct, [1, -3, 5])
        for s in (1, -3, 5):
            g = galois_element(s, sctx.n)
            u = keyswitch_inner(tables, _ops.automorphism(d, g), sctx.galois_keys[g], r, sp, alpha)
            want = switch_modulus(tables, u, tuple(r) + tuple(sp), tuple(r), addend=ct.component(0), galois=g)
            assert torch.equal(out[s].data, want), f"rotate_hoisted by {s}, batch {tuple(ct.data.shape[:-3])}"


def test_rotate_hoisted_needs_direct_keys(sctx):
    _, cx = _enc(sctx)
    with pytest.raises(fhe.MissingKeyError, match="rotate by 3"):
        ev.rotate_hoisted(sctx, cx, [1, 3])


def test_conjugate(sctx, assert_close):
    x, cx = _enc(sctx, True)
    r = ev.conj(sctx, cx)
    assert r.level == cx.level and r.scale == cx.scale
    assert_close(_dec(sctx, r), x.conj(), _bound(sctx, "rot"), "conjugate")
    # real part and imaginary part from x and conj(x)
    re = ev.add(sctx, cx, r)
    assert_close(_dec(sctx, re), 2 * x.real.to(torch.complex128), _bound(sctx, "rot"), "x + conj(x)")


# --- public-key encryption -----------------------------------------------------------------------
def test_public_key_encryption(sctx, assert_close):
    pub = sctx.public()
    assert not pub.has_secret_key and sctx.has_secret_key
    x = _rand(sctx.slots, True, sctx.device)
    y = _rand(sctx.slots, True, sctx.device)
    cx, cy = pub.encrypt_vector(x), pub.encrypt_vector(y)
    assert_close(_dec(sctx, cx), x, _bound(sctx, "pk"), "public-key encryption")
    # the server computes with evaluation keys only
    r = ev.rotate(pub, ev.mul(pub, cx, cy), 3)
    assert_close(_dec(sctx, r), torch.roll(x * y, -3), _bound(sctx, "pk"), "server multiply + rotate")
    with pytest.raises(fhe.ContextError, match="decrypt"):
        pub.decrypt_vector(cx)


def test_encryptions_are_randomised(sctx):
    x = _rand(sctx.slots, False, sctx.device)
    a, b = sctx.encrypt_vector(x), sctx.encrypt_vector(x)
    assert not torch.equal(a.data, b.data)
    pub = sctx.public()
    p1, p2 = pub.encrypt_vector(x), pub.encrypt_vector(x)
    assert not torch.equal(p1.data, p2.data)


def test_public_copies_do_not_reuse_randomness(ctx_n10, assert_close):
    x, y = _rand(ctx_n10.slots, False, ctx_n10.device), _rand(ctx_n10.slots, False, ctx_n10.device)
    c1, c2 = ctx_n10.public().encrypt_vector(x), ctx_n10.public().encrypt_vector(y)
    b = ctx_n10.basis(c1.level)
    d = fhe._ops.sub(c1.data[0].contiguous(), c2.data[0].contiguous(), b.mod)
    leaked = ctx_n10.encoder.unembed(ctx_n10.ring.to_float(d, b, c1.scale), ctx_n10.slots)
    assert float((leaked - (x - y)).abs().max()) > 1e-3, "c0 - c0' reveals x - y"
    assert not torch.equal(c1.data[1], c2.data[1])


def test_public_context_cannot_regenerate_secret_key(make_context):
    ctx = make_context("toy-n10", fresh=True, power_of_two_rotations=False, conjugation=False)
    pub = ctx.public()
    assert pub.secret_key is None
    coeffs = fhe._ops.sample_ternary(pub.sampler.key, 1, ctx.n)  # the draw gen_secret makes first
    regenerated = ctx.ring.from_integers(coeffs, ctx.ring.basis())
    assert not torch.equal(regenerated, ctx.secret_key.s)


# --- depth ---------------------------------------------------------------------------------------
def test_chain_uses_all_levels(sctx, assert_close):
    """Multiply by fresh ciphertexts (dropped to the level) down to level 0."""
    x, c = _enc(sctx, True)
    want = x.clone()
    while c.level > 0:
        y = _rand(sctx.slots, True, sctx.device) / math.sqrt(2)  # |y| <= 1
        c = ev.mul(sctx, c, sctx.encrypt_vector(y, level=c.level))
        want = want * y
        assert _nominal(sctx, c)
    assert c.level == 0
    assert_close(_dec(sctx, c), want, _bound(sctx, "chain"), f"{sctx.max_level} multiplications down to level 0")


def test_square_chain_mixed_levels(sctx, assert_close):
    """x^(2^k) by repeated squaring, adding a top-level ciphertext at every step (auto-matching)."""
    x = (_rand(sctx.slots, False, sctx.device) * 0.4 + 0.4)  # in [0, 0.8]
    z = _rand(sctx.slots, False, sctx.device) * 0.1  # x^2 + z stays in [-0.1, 0.74]
    c, cz = sctx.encrypt_vector(x), sctx.encrypt_vector(z)
    want = x.clone()
    while c.level > 0:
        c = ev.add(sctx, ev.square(sctx, c), cz)
        want = want * want + z
    assert_close(_dec(sctx, c), want, _bound(sctx, "chain"), "square chain with adds")


@pytest.mark.parametrize("op", ["multiply", "square", "mul_values", "mul_scalar", "rescale", "drop_level"])
def test_level_error_at_level_0(sctx, op):
    x, c0 = _enc(sctx, level=0)
    _, d0 = _enc(sctx, level=0)
    call = {
        "multiply": lambda: ev.mul(sctx, c0, d0),
        "square": lambda: ev.square(sctx, c0),
        "mul_values": lambda: ev.mul_values(sctx, c0, x),
        "mul_scalar": lambda: ev.mul_scalar(sctx, c0, 0.5),
        "rescale": lambda: ev.rescale(sctx, c0),
        "drop_level": lambda: ev.drop_level(sctx, c0, 1),
    }[op]
    name = {"square": "multiply", "mul_values": "multiply", "mul_scalar": "multiply"}.get(op, op)
    with pytest.raises(fhe.LevelError, match=name) as e:
        call()
    assert "level 0" in str(e.value)


def test_level_0_ops_without_levels(sctx, assert_close):
    (x, c0), (y, d0) = _enc(sctx, True, level=0), _enc(sctx, True, level=0)
    b = _bound(sctx, "rot")
    assert_close(_dec(sctx, ev.add(sctx, c0, d0)), x + y, b, "add at level 0")
    assert_close(_dec(sctx, ev.mul_scalar(sctx, c0, 3)), 3 * x, b, "integer multiply at level 0")
    assert_close(_dec(sctx, ev.mul_i(sctx, c0)), 1j * x, b, "mul_i at level 0")
    assert_close(_dec(sctx, ev.add_scalar(sctx, c0, 0.5 - 0.25j)), x + 0.5 - 0.25j, b, "add_scalar at level 0")
    assert_close(_dec(sctx, ev.rotate(sctx, c0, 3)), torch.roll(x, -3), b, "rotate at level 0")
    assert_close(_dec(sctx, ev.conj(sctx, c0)), x.conj(), b, "conjugate at level 0")


# --- the scheme context on its own ------------------------------------------------------------------
def test_scheme_context_standalone(device, assert_close):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = CKKSContext("toy-n10", device)
    ctx.keygen(rotations=[3], power_of_two_rotations=False)
    assert set(ctx.galois_keys) == {galois_element(3, ctx.n), 2 * ctx.n - 1}
    x, cx = _enc(ctx, True)
    r = ev.rotate(ctx, ev.mul(ctx, cx, cx), 3)
    assert_close(_dec(ctx, r), torch.roll(x * x, -3), BOUND["toy-n10"]["rot"], "CKKSContext multiply + rotate")
    with pytest.raises(fhe.MissingKeyError, match="step 1"):
        ev.rotate(ctx, cx, 1)
