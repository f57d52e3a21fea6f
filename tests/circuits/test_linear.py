"""LinearTransform (fhetorch/circuits/linear.py) against plaintext matrix-vector products."""
import pytest
import torch

from fhetorch.circuits.linear import LinearTransform
from fhetorch._ckks.context import galois_element
from fhetorch.errors import LevelError, MissingKeyError, ShapeError, SlotError

BOUND = 1e-6  # |M| entries <= 1/4 (dense) or <= 1, |x| <= 1: measured ~1e-8 on toy-n10/n12


def _rand_vec(n, gen, complex_=False):
    x = torch.rand(n, dtype=torch.float64, generator=gen) * 2 - 1
    if complex_:
        x = x + 1j * (torch.rand(n, dtype=torch.float64, generator=gen) * 2 - 1)
    return x


def _matrix_and_vector(n, seed, spread=4, complex_=False):
    """An n x n matrix with entries uniform in [-1/spread, 1/spread] and a vector in [-1, 1]."""
    gen = torch.Generator().manual_seed(seed)
    m = (torch.rand(n, n, dtype=torch.float64, generator=gen) * 2 - 1) / spread
    return m, _rand_vec(n, gen, complex_)


def _apply(ctx, lt, x, level=None):
    ct = ctx.encrypt_vector(x, slots=x.numel(), level=level)
    out = lt(ct)
    return out, ctx.decrypt_vector(out)


@pytest.mark.parametrize("preset,n", [("toy-n10", 64), ("toy-n12", 256)])
def test_dense_matches_plaintext(make_context, assert_close, preset, n):
    gen = torch.Generator().manual_seed(n)
    m = (torch.rand(n, n, dtype=torch.float64, generator=gen) * 2 - 1) / 4
    x = _rand_vec(n, gen)
    ctx = make_context(preset)
    lt = LinearTransform(ctx, m)
    out, got = _apply(ctx, lt, x)
    assert out.level == ctx.max_level - 1 and lt.levels == 1
    assert abs(out.scale - ctx.nominal_scale(out.level)) <= 1e-9 * out.scale
    assert_close(got.real, m @ x, BOUND, f"dense {n}x{n} {preset}")


def test_complex_matrix_and_vector(ctx_n10, assert_close):
    gen = torch.Generator().manual_seed(3)
    n = 32
    m = ((torch.rand(n, n, dtype=torch.float64, generator=gen) - 0.5)
         + 1j * (torch.rand(n, n, dtype=torch.float64, generator=gen) - 0.5)) / 4
    x = _rand_vec(n, gen, complex_=True)
    _, got = _apply(ctx_n10, LinearTransform(ctx_n10, m), x)
    assert_close(got, m @ x, BOUND, "complex 32x32")


def test_sparse_banded_and_diagonal(make_context, assert_close):
    gen = torch.Generator().manual_seed(5)
    n = 128
    band = torch.zeros(n, n, dtype=torch.float64)
    for off in (-2, -1, 0, 1, 3):
        band += torch.diag(torch.rand(n - abs(off), dtype=torch.float64, generator=gen) * 2 - 1, off)
    diag = torch.diag(torch.rand(n, dtype=torch.float64, generator=gen) * 2 - 1)
    x = _rand_vec(n, gen)
    lt_band = LinearTransform(make_context("toy-n10"), band)
    assert lt_band.nonzero_diagonals == 5  # diagonals 0, 1, 3 and 126, 127 (offsets -2, -1 wrap)
    assert len(lt_band.rotations()) <= 4
    lt_diag = LinearTransform(make_context("toy-n10"), diag)
    assert lt_diag.rotations() == []
    ctx = make_context("toy-n10", rotations=lt_band.rotations())
    _, got = _apply(ctx, LinearTransform(ctx, band), x)
    assert_close(got.real, band @ x, BOUND, "banded 128")
    _, got = _apply(ctx, LinearTransform(ctx, diag), x)
    assert_close(got.real, diag @ x, BOUND, "diagonal 128")


def test_bsgs_and_plain_diagonal_agree(ctx_n10, assert_close):
    n = 64
    m, x = _matrix_and_vector(n, 7)
    a, b = LinearTransform(ctx_n10, m), LinearTransform(ctx_n10, m, bsgs=False)
    assert a.n1 < n and b.n1 == n
    assert len(a.rotations()) < len(b.rotations()) == n - 1
    ct = ctx_n10.encrypt_vector(x, slots=n)
    ya, yb = ctx_n10.decrypt_vector(a(ct)), ctx_n10.decrypt_vector(b(ct))
    assert_close(ya, yb, 2 * BOUND, "bsgs vs plain")
    assert_close(ya.real, m @ x, BOUND, "bsgs")


@pytest.mark.parametrize("n", [64, 512])
def test_fused_and_plain_paths_agree(make_context, assert_close, n):
    """The fused evaluation (one ModUp, hoisted_mac over P*Q, one ModDown per giant step) against
    the plain BSGS path and the plaintext product; n = 512 has more than 8 giant steps (two
    hoisted_mac calls)."""
    m, x = _matrix_and_vector(n, n + 1, spread=8, complex_=True)
    steps = LinearTransform(make_context("toy-n12"), m).rotations()
    ctx = make_context("toy-n12", rotations=steps)
    lt = LinearTransform(ctx, m)
    ct = ctx.encrypt_vector(x, slots=n)
    fused = lt(ct)
    assert any(k[0] == "ext" for k in lt._encoded), "the fused path was not taken"
    assert n < 512 or len(lt.giant) > 8
    lt.fuse = False
    plain = lt(ct)
    for out in (fused, plain):
        assert out.level == ct.level - 1 and abs(out.scale - ctx.nominal_scale(out.level)) <= 1e-9 * out.scale
    got = ctx.decrypt_vector(fused)
    assert_close(got, m.to(torch.complex128) @ x, 2 * BOUND, f"fused {n}")
    assert_close(got, ctx.decrypt_vector(plain), 2 * BOUND, f"fused vs plain {n}")


def test_fused_giants_moddown_batched(make_context, monkeypatch):
    """The fused path brings its rotated giants' sums down in one batched ModDown: bit for bit one
    ModDown per giant (checked by running the transform again with switch_modulus split per giant),
    for one ciphertext and a batch of two; n = 512 has two hoisted_mac calls."""
    import fhetorch.circuits.linear as linear

    n = 512
    m, x = _matrix_and_vector(n, 7, spread=8)
    steps = LinearTransform(make_context("toy-n12"), m).rotations()
    ctx = make_context("toy-n12", rotations=steps)
    lt = LinearTransform(ctx, m)
    gen = torch.Generator().manual_seed(8)
    one_ct, other = ctx.encrypt_vector(x, slots=n), ctx.encrypt_vector(_rand_vec(n, gen), slots=n)
    cts = [one_ct, one_ct.replace(data=torch.stack([one_ct.data, other.data]))]  # (2, 2, L, N): a batch
    batched = [lt(ct).data for ct in cts]
    calls = []
    one = linear.switch_modulus

    def split(tables, x, src, dst, *args, **kw):
        calls.append(tuple(x.shape))
        if x.dim() >= 4 and x.shape[-4] > 1 and len(src) > len(dst) and dst == tuple(src[: len(dst)]) \
                and len(src) - len(dst) == len(ctx.params.special_limbs):
            return torch.stack([one(tables, x.select(-4, k), src, dst, *args, **kw) for k in range(x.shape[-4])], -4)
        return one(tables, x, src, dst, *args, **kw)

    monkeypatch.setattr(linear, "switch_modulus", split)
    for ct, want in zip(cts, batched):
        assert torch.equal(lt(ct).data, want)
    assert any(len(s) >= 4 and s[-4] > 1 for s in calls), "no batched ModDown of giants was made"


@pytest.mark.parametrize("n1", [4, 8, 16])
def test_centered_baby_steps(make_context, assert_close, n1):
    """Baby steps in [-n1/2, n1/2) (from_diagonals(centered=True)): other keys, the same product,
    on the fused and the plain path; the split k = giant + baby holds for every offset."""
    n = 64
    gen = torch.Generator().manual_seed(n1)
    offs = sorted({int(k) for k in torch.randint(0, n, (20,), generator=gen)})
    diags = {k: (torch.rand(n, dtype=torch.float64, generator=gen) - 0.5) / 8 for k in offs}
    m = torch.zeros(n, n, dtype=torch.float64)
    for k, d in diags.items():
        m[torch.arange(n), (torch.arange(n) + k) % n] = d
    plain = LinearTransform.from_diagonals(make_context("toy-n12"), diags, n, n1=n1)
    cent = LinearTransform.from_diagonals(make_context("toy-n12"), diags, n, n1=n1, centered=True)
    assert all((g + b) % n in offs for g, items in cent._by_giant.items() for b, _ in items)
    assert all(b < n1 // 2 or b >= n - n1 // 2 for b in cent.baby) and all(g % n1 == 0 for g in cent.giant)
    assert set(cent.rotations()) != set(plain.rotations()) or n1 >= n
    ctx = make_context("toy-n12", rotations=cent.rotations())
    lt = LinearTransform.from_diagonals(ctx, diags, n, n1=n1, centered=True)
    x = _rand_vec(n, gen)
    ct = ctx.encrypt_vector(x, slots=n)
    fused = ctx.decrypt_vector(lt(ct))
    assert any(k[0] == "ext" for k in lt._encoded), "the fused path was not taken"
    lt.fuse = False
    assert_close(fused.real, m @ x, BOUND, f"centered n1={n1}, fused")
    assert_close(ctx.decrypt_vector(lt(ct)).real, m @ x, BOUND, f"centered n1={n1}, plain")


def test_fused_falls_back_to_composed_rotations(make_context, assert_close):
    """Without a direct key for a step the plain path composes it from power-of-two keys."""
    n = 64
    m, x = _matrix_and_vector(n, 3)
    ctx = make_context("toy-n10")  # +-2^i keys only
    lt = LinearTransform(ctx, m)
    assert any(galois_element(s, ctx.n) not in ctx.galois_keys for s in lt.rotations())
    _, got = _apply(ctx, lt, x)
    assert not any(k[0] == "ext" for k in lt._encoded)
    assert_close(got.real, m @ x, BOUND, "composed rotations")


def test_rotations_exact_keys_and_missing_key(make_context, assert_close):
    n = 64
    m, x = _matrix_and_vector(n, 11)
    base = make_context("toy-n10")
    steps = LinearTransform(base, m).rotations()
    assert steps == sorted(set(steps)) and 0 not in steps
    ctx = make_context("toy-n10", rotations=steps, power_of_two_rotations=False)
    lt = LinearTransform(ctx, m, level=ctx.max_level)  # diagonals pre-encoded
    assert lt.rotations() == steps
    _, got = _apply(ctx, lt, x)
    assert_close(got.real, m @ x, BOUND, "only the listed keys")
    # drop one baby step and one giant step in turn: a clear error naming the step
    baby = [s for s in steps if s < lt.n1]
    giant = [s for s in steps if s >= lt.n1]
    for missing in (baby[1], giant[1]):
        c2 = make_context("toy-n10", rotations=[s for s in steps if s != missing], power_of_two_rotations=False)
        with pytest.raises(MissingKeyError, match=rf"\b{missing}\b"):
            _apply(c2, LinearTransform(c2, m), x)


def test_levels_and_caching(ctx_n10, assert_close):
    gen = torch.Generator().manual_seed(13)
    n = 16
    m = torch.rand(n, n, dtype=torch.float64, generator=gen) - 0.5
    x = _rand_vec(n, gen)
    lt = LinearTransform(ctx_n10, m)
    out, got = _apply(ctx_n10, lt, x, level=3)
    assert out.level == 2
    out2 = lt(ctx_n10.encrypt_vector(x, slots=n, level=3))
    assert len(lt._encoded) == 1  # encoded once per (level, scale)
    assert_close(ctx_n10.decrypt_vector(out2).real, m @ x, BOUND, "level 3")
    # chaining two transforms: two levels, M2 M1 x
    out3 = lt(out)
    assert out3.level == 1
    assert_close(ctx_n10.decrypt_vector(out3).real, m @ (m @ x), BOUND, "chained")
    with pytest.raises(LevelError):
        lt(ctx_n10.encrypt_vector(x, slots=n, level=0))


def test_bad_shapes(ctx_n10):
    with pytest.raises(ShapeError, match="square"):
        LinearTransform(ctx_n10, torch.zeros(4, 8))
    with pytest.raises(SlotError, match="power of two"):
        LinearTransform(ctx_n10, torch.zeros(6, 6))
    lt = LinearTransform(ctx_n10, torch.eye(8))
    with pytest.raises(SlotError, match="8 slots"):
        lt(ctx_n10.encrypt_vector(torch.zeros(16), slots=16))
