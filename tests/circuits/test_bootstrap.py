"""Bootstrapping: the DFT factorisation (exact, plaintext), then the whole algorithm at toy
size (toy-n13-bts, N = 2^13, on the test device) against the plaintext input, and at
N = 2^16 on the GPU (marked cuda).

Precision bounds: toy-n13-bts measured 20.5-22.8 bits (max error) on CPU; the tests assert
2^-17 (2^-16 for sparse packings, whose inputs from level 0 lose up to 2^-17.3 to the sine's
cubic term: docs/circuits.md). n16-bts40 on the H100: see docs/benchmarks.md.

The shared context holds the default bootstrapping keys, keygen(bootstrap=True): the full
packing's, through which every size bootstraps (1, 2 and 4 slots in their own circuits,
which those keys cover).
"""
import dataclasses
import math
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import Encoder, galois_element
from fhetorch.circuits import bootstrap as B
from fhetorch.circuits import dft
from fhetorch._ckks import evaluator as ev
from fhetorch._rlwe import switching_key_bytes
from fhetorch.circuits.bootstrap_config import BOOTSTRAP_PRESETS, bootstrap_params
from fhetorch.circuits.linear import bsgs_steps
from fhetorch.circuits.polynomial import cost

TOY = "toy-n13-bts"
SPARSE = 4  # a sparse packing whose own circuit the default keys cover


# --- the DFT (plaintext) ---------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 4, 16, 128, 512])
@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_dft_groups_factor_u(n, groups):
    g = torch.Generator().manual_seed(n * 10 + groups)
    w = torch.complex(torch.randn(n, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64))
    br = dft.bit_reverse(n)
    z = dft.matrix(n) @ w
    x = w[br]
    stc = dft.slot_to_coeff_groups(n, groups)
    assert len(stc) == min(groups, max(1, n.bit_length() - 1))
    for d in stc:
        x = dft.apply(d, x)
    assert float((x - z).abs().max()) < 1e-12 * n
    y = z
    for d in dft.coeff_to_slot_groups(n, groups):
        y = dft.apply(d, y)
    assert float((y - w[br]).abs().max()) < 1e-12 * n
    # a group of g stages has at most 2^(g+1) - 1 diagonals
    for d, size in zip(stc, dft.split_stages(max(1, n.bit_length() - 1), groups)):
        assert len(d) <= 2 ** (size + 1) - 1


@pytest.mark.parametrize("slots", [4, 32])
def test_dft_matches_the_encoder(slots):
    """slots = U (m_k + i m_(k+n)) for the coefficients the encoder produces."""
    enc = Encoder(7)
    z = torch.complex(torch.rand(slots, dtype=torch.float64), torch.rand(slots, dtype=torch.float64)) - (0.5 + 0.5j)
    m = enc.embed(z, slots, 2.0**40).to(torch.float64) / 2.0**40
    sub = m[:: enc.n // (2 * slots)]
    w = sub[:slots] + 1j * sub[slots:]
    assert float((dft.matrix(slots) @ w - z).abs().max()) < 1e-9


# --- toy bootstrapping ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bctx(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context(TOY, device)
    return ctx.keygen(bootstrap=True)


def _rand(n, complex_=False, seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else int(torch.randint(0, 2**31, ()).item()))
    v = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
    if complex_:
        v = torch.complex(v, torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1)
    return v


def test_bootstrap_sparse_real(bctx, assert_close):
    x = _rand(SPARSE)
    ex = bctx.encrypt(x, level=0)
    eb = ex.bootstrap()
    cfg = bctx.bootstrap_config
    assert eb.level == cfg.user_levels and eb.shape == ex.shape and ex.level == 0
    assert ev.same_scale(eb.scale, bctx.nominal_scale(eb.level))
    assert_close(bctx.decrypt(eb), x, 2**-16, f"toy-n13-bts bootstrap, {SPARSE} slots")
    # n <= N/4: CoeffToSlot ends and SlotToCoeff starts on 2n slots (one EvalMod)
    assert bctx.bootstrapper.packing(SPARSE) == SPARSE
    cts, stc = bctx.bootstrapper.transforms(SPARSE)
    assert cts[-1].n == stc[0].n == 2 * SPARSE and all(lt.n == SPARSE for lt in cts[:-1] + stc[1:])


@pytest.mark.slow
def test_bootstrap_full_complex(bctx, assert_close):
    z = _rand(bctx.slots, complex_=True)
    ez = bctx.encrypt(z, level=0)
    out = fhe.ckks.bootstrap(ez)
    assert out.level == bctx.bootstrap_config.user_levels
    assert_close(bctx.decrypt(out), z, 2**-17, "toy-n13-bts bootstrap, full slots, complex")


def test_bootstrap_pair(bctx, assert_close):
    a, b = _rand(SPARSE), _rand(SPARSE)
    ea, eb = bctx.encrypt(a, level=0), bctx.encrypt(b, level=0)
    ua, ub = ea.bootstrap_with(eb)
    assert ua.level == ub.level == bctx.bootstrap_config.user_levels
    assert_close(bctx.decrypt(ua), a, 2**-16, "bootstrap pair, first")
    assert_close(bctx.decrypt(ub), b, 2**-16, "bootstrap pair, second")


def test_bootstrap_pair_takes_real_parts(bctx, assert_close):
    """A real value's noise has an imaginary part that polynomials magnify (a sign's slope near 0);
    a + i b would carry Im a into b. The pair refreshes Re a and Re b: here Im a = 0.3 (a stand-in
    for magnified noise) leaves b as precise as without it."""
    a, b, noise = _rand(SPARSE), _rand(SPARSE), 0.3j * _rand(SPARSE)
    za = bctx.encrypt_vector((a + noise).to(bctx.device), level=1, slots=SPARSE)
    zb = bctx.encrypt_vector(b.to(torch.complex128).to(bctx.device), level=1, slots=SPARSE)
    ua, ub = bctx.bootstrapper.bootstrap_pair(za, zb)
    assert_close(bctx.decrypt_vector(ua).real.cpu(), a, 2**-16, "pair: Re a")
    assert_close(bctx.decrypt_vector(ub).real.cpu(), b, 2**-16, "pair: b beside an imaginary a")


def test_bootstrap_real_drops_the_imaginary_part(bctx, assert_close):
    """real=True: the real part of the values, at the nominal scale (the noise's imaginary part,
    as large as its real one, would otherwise reach a steep polynomial)."""
    v = _rand(SPARSE, complex_=True)
    ct = bctx.encrypt_vector(v.to(bctx.device), level=0, slots=SPARSE)
    out = bctx.bootstrapper.bootstrap(ct, real=True)
    got = bctx.decrypt_vector(out).cpu()
    assert out.level == bctx.bootstrap_config.user_levels
    assert abs(out.scale / bctx.nominal_scale(out.level) - 1) < 1e-9
    assert_close(got.real, v.real, 2**-16, "bootstrap real: Re")
    assert_close(got.imag, torch.zeros(SPARSE, dtype=torch.float64), 2**-16, "bootstrap real: Im")


def test_chain_longer_than_the_levels(bctx, assert_close):
    """x <- (x^2 + x) / 2, 3 levels per step: 3 times more levels than the chain holds,
    possible only because bootstrapping refreshes the ciphertext."""
    x = _rand(SPARSE, seed=7) * 0.9
    ex = bctx.encrypt(x, level=bctx.bootstrap_config.user_levels)
    want = x.clone()
    used, boots = 0, 0
    while used < 3 * bctx.max_level:
        if ex.level < 2:
            ex = ex.bootstrap()
            boots += 1
        ex = (ex * ex + ex) * 0.5
        want = (want * want + want) * 0.5
        used += 2
    assert boots >= 5
    assert_close(bctx.decrypt(ex), want, 2**-12, f"{used} levels through {boots} bootstraps")


def test_bootstrap_from_a_higher_level(bctx, assert_close):
    x = _rand(SPARSE)
    ex = bctx.encrypt(x, level=3) * 1.0
    assert_close(bctx.decrypt(ex.bootstrap()), x, 2**-16, "bootstrap from level 2")


def test_rotation_plan_and_key_caps(bctx):
    bt = bctx.bootstrapper
    cfg = bt.cfg
    steps = bt.rotations(bctx.slots)
    assert steps and all(0 < s < bctx.slots for s in steps)
    low = [s for s, lvl in steps.items() if lvl <= cfg.stc_input_level]
    assert low, "SlotToCoeff's rotations should be level-capped"
    # a capped key refuses a level above its limbs, naming the way out
    s = next(s for s in low if galois_element(s, bctx.n) in bctx.galois_keys
             and bctx.galois_keys[galois_element(s, bctx.n)].key_q.shape[2] < len(bctx.params.primes))
    ct = bctx.encrypt_vector(torch.zeros(bctx.slots, dtype=torch.complex128))
    with pytest.raises(fhe.MissingKeyError, match="covers levels"):
        ev.apply_galois(bctx, ct, galois_element(s, bctx.n), f"rotate by {s}")
    assert bctx.key_bytes() > 0 and bctx.encapsulation_keys is not None


# --- every size, and rotations, after keygen(bootstrap=True) ----------------------------------
# sizes 1, 2, 4, 8 (and 3) run their own circuits (~8 s each on 2 CPU cores), the others the full
# packing's (~16 s): 3 and 16 always (4 is SPARSE above; 1, 2, 4, 8 below), the rest in slow runs
FAST_SIZES = (3, 16)
SIZES = [1 << i for i in range(13)] + [3, 100, 1000]


@pytest.mark.parametrize("n", [n if n in FAST_SIZES else pytest.param(n, marks=pytest.mark.slow) for n in SIZES])
def test_bootstrap_every_size(bctx, n, assert_close):
    """The default keys bootstrap any size: a packing without its own keys runs the circuit of
    the smallest larger one with keys, its values repeated, and is read back at its size."""
    x = _rand(n)
    ex = bctx.encrypt(x, level=0)
    eb = ex.bootstrap()
    assert eb.level == bctx.bootstrap_config.user_levels and eb.shape == ex.shape and eb.slots == ex.slots
    assert ev.same_scale(eb.scale, bctx.nominal_scale(eb.level))
    assert bctx.bootstrapper.packing(ex.slots) == (ex.slots if ex.slots <= 8 else bctx.slots)
    assert_close(bctx.decrypt(eb), x, 2**-16, f"bootstrap of {n} values ({ex.slots} slots)")
    # the refreshed tensor computes on: its own packing's rotations and products
    if n > 1:
        assert_close(bctx.decrypt(torch.roll(eb * eb, 1)), torch.roll(x * x, 1), 2**-14, f"roll(x^2) after, {n} values")


def test_bootstrap_slots_add_a_sparse_circuit(bctx, assert_close):
    """bootstrap_slots=[16] adds 16 slots' own (sparse, faster) circuit to the default keys."""
    assert bctx.bootstrapper.packing(16) == bctx.slots
    ctx = bctx._copy(bctx.device)  # the same keys in a dict of its own
    before = ctx.key_bytes()
    ctx.keygen(bootstrap=True, bootstrap_slots=[16])
    assert ctx.key_bytes() > before and ctx.bootstrapper.packing(16) == 16
    x = _rand(16)
    eb = ctx.encrypt(x, level=0).bootstrap()
    assert_close(ctx.decrypt(eb), x, 2**-16, "bootstrap of 16 values in their own circuit")


def test_bootstrap_without_keys_names_the_call(bctx):
    ctx = bctx._copy(bctx.device)
    ctx.galois_keys = {g: k for g, k in ctx.galois_keys.items() if g == 2 * ctx.n - 1}  # conjugation only
    with pytest.raises(fhe.MissingKeyError, match=r"keygen\(bootstrap=True, bootstrap_slots=\[8\]\)"):
        ctx.encrypt(_rand(8), level=0).bootstrap()


def test_key_estimate_matches_keygen(bctx):
    """estimate_key_bytes (no keys made; how docs/circuits.md sizes n16-bts40) equals the keys
    keygen(bootstrap=True) made."""
    assert B.estimate_key_bytes(bctx.params, bctx.bootstrap_config) == bctx.key_bytes()
    every = [1 << i for i in range(bctx.slots.bit_length())]
    assert B.estimate_key_bytes(bctx.params, bctx.bootstrap_config, every) > 1.5 * bctx.key_bytes()


@pytest.mark.parametrize("preset", [TOY, "n16-bts40"])
def test_dft_plan_fewer_giants_within_the_keys(preset):
    """dft_baby_steps trades giant steps (whole key switches) for babies without more key bytes
    than each stage's fewest rotations (smallest n1) would need: the +-2^i keys are there anyway."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        literal, cfg = BOOTSTRAP_PRESETS[preset]
        p = bootstrap_params(literal, cfg, allow_insecure=True)
    full = p.n // 2
    stages = B._stage_offsets(p, cfg, full)
    plan = sum(B.dft_baby_steps(p, cfg, full), ())
    free = {s for i in range(full.bit_length() - 1) for s in (1 << i, full - (1 << i))}

    def cost(choices):
        keys, giants = {}, 0
        for (ks, n, level), (n1, centered) in zip(stages, choices):
            _, baby, giant = bsgs_steps(ks, n, n1, centered=centered)
            giants += len([g for g in giant if g])
            for s in set(baby + giant) - {0} - free:
                lvl = p.max_level if level > cfg.stc_input_level else level
                keys[s] = max(keys.get(s, 0), lvl)
        return sum(switching_key_bytes(p.n, p.limbs(l).stop, len(p.special_primes), p.alpha) for l in keys.values()), giants

    def fewest(ks, n):
        rot = lambda n1: sum(len([s for s in part if s]) for part in bsgs_steps(ks, n, n1)[1:])  # noqa: E731
        return min((1 << e for e in range(n.bit_length())), key=lambda n1: (rot(n1), n1)), False

    ref_bytes, ref_giants = cost([fewest(ks, n) for ks, n, _ in stages])
    got_bytes, got_giants = cost(plan)
    assert got_bytes <= ref_bytes and got_giants < ref_giants, (got_bytes, ref_bytes, got_giants, ref_giants)


def test_rotations_after_bootstrap_keys(bctx, assert_close):
    """keygen(bootstrap=True) adds keys holding only SlotToCoeff's low levels (steps 9 .. 15, 64,
    ... at toy-n13-bts): a rotation above those levels composes +-2^i keys instead, one at or
    below them uses the key directly."""
    low = {s: lvl for s, lvl in B.key_levels(bctx.params, bctx.bootstrap_config, [bctx.slots]).items() if lvl < bctx.max_level}
    s = min(low)
    assert s == 9, "the issue's case: a step with a key for the low levels only, a sum of two powers of two"
    steps = [s, -3, 100, max(low), min(low, key=lambda s: low[s])]
    for level in (bctx.max_level, low[s] + 1, low[s], 0):
        x = _rand(bctx.slots)
        ex = bctx.encrypt(x, level=level)
        for k in steps:
            assert_close(bctx.decrypt(ex.rotate(k)), torch.roll(x, -k), 2**-20, f"rotate({k}) at level {level}")
    assert ev.decompose_rotation(bctx, s, bctx.slots, low[s]) == [s]
    assert len(ev.decompose_rotation(bctx, s, bctx.slots, low[s] + 1)) == 2  # 8 + 1
    # hoisted rotations need the direct key: the error names the call that makes a full one
    with pytest.raises(fhe.MissingKeyError, match=rf"covers levels <= {low[s]} only.*keygen\(rotations=\[{s}\]\)"):
        ev.rotate_hoisted(bctx, bctx.encrypt(_rand(8)).ciphertext, [1, s])
    # with neither a key nor the powers of two, the error names the call that adds the key
    ctx = bctx._copy(bctx.device)
    ctx.galois_keys = {galois: k for galois, k in ctx.galois_keys.items() if k.key_q.shape[2] < len(ctx.params.primes)}
    with pytest.raises(fhe.MissingKeyError, match=rf"keygen\(rotations=\[{s}\]\)"):
        ctx.encrypt(_rand(ctx.slots)).rotate(s)


# --- precision of small packings (docs/circuits.md) -------------------------------------------
def test_small_packings_precision_from_level_1(bctx, precision_bits):
    """1, 2 and 4 values near |x| = 1 from level 1 keep the precision of larger packings (>= 21
    bits measured for random values): the drop to level 0 shrinks the message to the ratio
    Q_0 / Delta = 2^13-2^14 such a packing wants, which level 0's 2^10 cannot reach (there the
    sine's cubic term costs up to 2^-17.3)."""
    for n in (1, 2, 4):
        x = _rand(n)
        x = x.sign() * (0.9 + 0.1 * x.abs())
        got = bctx.decrypt(bctx.encrypt(x, level=1).bootstrap())
        bits = precision_bits(got, x)
        print(f"[precision] bootstrap of {n} values near |x| = 1 from level 1: {bits:.1f} bits")
        assert bits >= 21, f"{n} values: {bits:.1f} bits"


def test_small_packings_precision_from_level_0(bctx):
    """From level 0 the input factor cannot go below 1: the error is the sine's cubic term,
    (2 pi eps)^2 / 6 of each coefficient with eps = |c| Delta / Q_0, at most
    (2 pi)^2 / 6 (Delta / Q_0)^2 |x|^3 (|c| <= max |x|; a 1-slot packing's coefficient is its
    value), as docs/circuits.md states."""
    bt = bctx.bootstrapper
    ratio = bt.q0 / bctx.nominal_scale(0)
    x = torch.tensor([0.97], dtype=torch.float64) * (1 if torch.rand(()) < 0.5 else -1)
    got = bctx.decrypt(bctx.encrypt(x, level=0).bootstrap())
    cubic = (2 * math.pi / ratio) ** 2 / 6 * x**3
    err = got - x
    print(f"[precision] 1 value {float(x):+.2f} from level 0: error {float(err):.3e}, cubic term {-float(cubic):.3e}")
    assert float((err + cubic).abs()) <= 0.2 * float(cubic.abs())  # the error IS the cubic term


# --- errors ----------------------------------------------------------------------------------
def test_not_bootstrappable_preset(ctx_n12):
    ex = ctx_n12.encrypt(torch.zeros(4))
    with pytest.raises(fhe.ParameterError, match="n16-bts40"):
        ex.bootstrap()
    with pytest.raises(fhe.ParameterError, match="bootstrappable"):
        ctx_n12.__class__("toy-n12").keygen(bootstrap=True)


def test_missing_bootstrap_keys(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context(TOY, device)
    ctx.keygen()
    with pytest.raises(fhe.MissingKeyError, match="keygen\\(bootstrap=True\\)"):
        ctx.encrypt(torch.zeros(4), level=0).bootstrap()


def test_presets_leave_levels():
    info = fhe.ckks.presets()
    for name in ("n16-bts40", "n16-bts35"):
        assert info[name].bootstrappable and info[name].security_bits == 128
        assert info[name].levels_after_bootstrap >= 12
        assert info[name].log_pq <= fhe.ckks.HE_STANDARD_128[16]
    assert info[TOY].bootstrappable and info[TOY].levels_after_bootstrap >= 5  # a degree-31 polynomial


# --- EvalMod ---------------------------------------------------------------------------------------
def _plain_eval_mod(cfg, x):
    """EvalMod's arithmetic in float64 on x = K s y: the shift, T_2, the even series, the double angles."""
    q, s = B.cosine_series(cfg)
    K = cfg.k_range
    t = x / (K * s) - 1 / (4 * K * s)
    v = q(2 * t * t - 1)
    for _ in range(cfg.double_angles):
        v = 2 * v * v - 1
    return v


@pytest.mark.parametrize("name", ["toy-n13-bts", "n16-bts40", "n16-bts35"])
def test_eval_mod_series_is_sine_within_float_rounding(name):
    """The even cosine (degree cos_degree / 2 in T_2) and its double angles give sin(2 pi x) within
    2^-40 near every integer |I| < K (EvalMod's output must be within ~2^-36 for 21 bits), on fresh
    random points; the series costs the levels the configuration plans, with 9 multiplications."""
    cfg = fhe.ckks.bootstrap_config(name)
    K = cfg.k_range
    x = torch.randint(-K + 1, K, (20000,), dtype=torch.float64) + (torch.rand(20000, dtype=torch.float64) - 0.5) * 2**-6
    err = (_plain_eval_mod(cfg, x) - torch.sin(2 * math.pi * x)).abs().max().item()
    assert err < 2**-40, f"{name}: EvalMod's series is off by 2^{math.log2(err):.1f}"
    c = cost(B.cosine_series(cfg)[0])
    assert 1 + c.depth + cfg.double_angles == cfg.evalmod_levels and 1 + c.mults == 9


def test_eval_mod_config_wants_an_even_degree():
    with pytest.raises(fhe.ParameterError, match="even"):
        dataclasses.replace(fhe.ckks.bootstrap_config(TOY), cos_degree=63)


def test_eval_mod_encrypted_matches_its_plain_arithmetic(bctx):
    """EvalMod on an encrypted CoeffToSlot output (ModRaised random data, full slots) against sin(2 pi x)
    of its decrypted input: within 2^-30 (measured 2^-33 max; the input's noise times 2 pi K), and
    without bias where x ~ 0 (a quarter of the values): SlotToCoeff's DFT gathers a bias into a few
    slots. A relabelled T_2(t) ~ -1 made one of 2^-37.4 (1 bit of the output's max error); measured
    now |bias| <= 2^-39.5 against a standard error of ~2^-41.3."""
    bt = bctx.bootstrapper
    ct = bctx.encrypt(_rand(bctx.slots, complex_=True), level=0).ciphertext
    re, im = bt.coeff_to_slot(bt.mod_raise(bt._scale_up(bt._prepare(ct))))
    w = bctx.decrypt_vector(bt.eval_mod_parts(re, im))
    K, s = bt.cfg.k_range, bt.widen
    x = torch.cat([bctx.decrypt_vector(v).real * K * s for v in (re, im)])
    assert (x - x.round()).abs().max() < 2**-8 and x.round().abs().max() < K  # a ModRaise's I + eps
    d = torch.cat([w.real, w.imag]) - torch.sin(2 * math.pi * x)
    err, bias = d.abs().max().item(), d[x.round() == 0].mean().item()
    print(f"[precision] EvalMod on toy-n13-bts: 2^{math.log2(err):.1f} from sin(2 pi x), bias at x ~ 0 {bias:.1e}")
    assert err < 2**-30, f"EvalMod is off by 2^{math.log2(err):.1f}"
    assert abs(bias) < 2**-38.5, f"EvalMod's error has a bias of {bias:.1e} where x ~ 0"


@pytest.mark.parametrize("name", ["toy-n13-bts", "n16-bts40", "n16-bts35"])
def test_bootstrappable_chain_scales(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        p = fhe.ckks.preset(name)
    cfg = fhe.ckks.bootstrap_config(name)
    assert p.max_level == cfg.top
    want = cfg.level_bits(p.scale_bits)
    for lvl, s in enumerate(p.level_scales):
        assert abs(math.log2(s) - want[lvl]) < 0.2, f"level {lvl}: 2^{math.log2(s):.2f} vs 2^{want[lvl]}"
    for lvl in range(1, p.max_level + 1):  # a product at level l rescaled lands on level l-1's scale
        step = sum(math.log2(p.primes[i]) for i in p.limbs(lvl)) - sum(math.log2(p.primes[i]) for i in p.limbs(lvl - 1))
        assert abs(math.log2(p.level_scales[lvl - 1]) - (2 * math.log2(p.level_scales[lvl]) - step)) < 1e-6


# --- N = 2^16 on the GPU ------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.slow
def test_bootstrap_n16_full_slots_cuda(assert_close):
    ctx = fhe.ckks.Context("n16-bts40", "cuda").keygen(bootstrap=True)
    z = _rand(ctx.slots, complex_=True).cuda()
    out = ctx.encrypt(z, level=0).bootstrap()
    assert out.level == ctx.bootstrap_config.user_levels >= 12
    assert_close(ctx.decrypt(out).cpu(), z.cpu(), 2**-16, "n16-bts40 full-slot bootstrap")


@pytest.mark.cuda
@pytest.mark.slow
def test_bootstrap_n16_sparse_cuda(assert_close):
    """2^14 real slots (the ResNet-20 packing): one EvalMod on 2^15 slots."""
    n = 1 << 14
    ctx = fhe.ckks.Context("n16-bts40", "cuda").keygen(bootstrap=True, bootstrap_slots=[n])
    x = _rand(n).cuda()
    out = ctx.encrypt(x, level=0).bootstrap()
    assert out.level == ctx.bootstrap_config.user_levels
    assert_close(ctx.decrypt(out).cpu(), x.cpu(), 2**-17, "n16-bts40 sparse 2^14-slot bootstrap")


def test_save_load_keeps_bootstrap_keys(bctx, tmp_path, assert_close):
    path = tmp_path / "ctx.pt"
    fhe.save(bctx.public(), path)
    server = fhe.load(path, device=bctx.device)
    assert server.encapsulation_keys is not None and not server.has_secret_key
    assert set(server.galois_keys) == set(bctx.galois_keys)
    x = _rand(SPARSE)
    ex = bctx.encrypt(x, level=0)
    ex = ex.__class__(server, ex.ciphertext, ex.shape)
    out = ex.bootstrap()
    assert_close(bctx.decrypt(out.__class__(bctx, out.ciphertext, out.shape)), x, 2**-16, "bootstrap with loaded keys")
