"""The ring's tables and its limb-subset bases: views, gathers, transforms by table row, constants,
and the memory of a context with every level planned."""
import random
import warnings

import torch

import fhetorch as fhe
from fhetorch import _ops
from fhetorch._ckks import evaluator as ev
from fhetorch._ckks.context import CKKSContext
from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes
from fhetorch._ring.memory import MemoryReport

MiB = 2**20


def _ring(log_n=10, count=9):
    primes = ntt_primes(log_n, 30, count - 3) + largest_ntt_primes(log_n, 3)
    random.shuffle(primes)
    return Ring(log_n, primes)


def _same_storage(view, table) -> bool:
    return view.untyped_storage().data_ptr() == table.untyped_storage().data_ptr()


def _rand(ring, basis, shape=()):
    return torch.stack([torch.randint(0, q, (*shape, ring.n), dtype=torch.int64) for q in basis.primes],
                       dim=-2).to(torch.int32)


def test_contiguous_basis_is_a_view_of_the_ring_tables():
    ring = _ring()
    start = random.randrange(0, 5)
    b = ring.basis(range(start, start + 4))
    assert b.contiguous
    for name in ("mod", "psi", "psi_inv", "n_inv_mont", "n_inv", "r2"):
        view, table = getattr(b, name), getattr(ring, name)
        assert _same_storage(view, table), name
        assert torch.equal(view, table[start : start + 4]), name
    assert ring.basis(range(start, start + 4)) is b  # built once


def test_other_subsets_gather_their_constants_and_read_the_ring_tables_by_row():
    ring = _ring()
    limbs = (7, 1, 2, 3, 8, 0)  # runs (7), (1, 2, 3), (8), (0)
    b = ring.basis(limbs)
    assert not b.contiguous and b.runs == [(7, 1), (1, 3), (8, 1), (0, 1)]
    sel = torch.tensor(limbs)
    assert torch.equal(b.mod, ring.mod[sel]) and torch.equal(b.r2, ring.r2[sel])
    x = _rand(ring, b, (2,))
    want_ntt = _ops.ntt(x, ring.mod[sel].contiguous(), ring.psi[sel].contiguous())
    assert torch.equal(ring.ntt(x, b), want_ntt)
    post = b.const([random.randrange(q) for q in b.primes])
    want_intt = _ops.intt(x, ring.mod[sel].contiguous(), ring.psi_inv[sel].contiguous(), post)
    assert torch.equal(ring.intt(x, b, post=post), want_intt)
    coeffs = torch.randint(-2**40, 2**40, (3, ring.n), dtype=torch.int64)
    want = _ops.ntt(_ops.to_rns(coeffs, ring.mod[sel].contiguous(), ring.r2[sel].contiguous()),
                    ring.mod[sel].contiguous(), ring.psi[sel].contiguous())
    assert torch.equal(ring.from_integers(coeffs, b), want)
    assert "psi" not in b.__dict__ and "psi_inv" not in b.__dict__  # no NTT table gathered


def test_scalar_constants_are_never_evicted():
    """A captured CUDA graph reads the constant tensors it was captured with: a constant handed
    out stays the same tensor, with the same values, however many more are made."""
    b = _ring(count=4).basis(range(2))
    first = b.scalar(12345)
    kept = first.clone()
    for c in range(5000):  # more than the old cache's 4096-entry limit
        b.scalar(random.getrandbits(200) - 2**199 + c)
    assert b.scalar(12345) is first and torch.equal(first, kept)
    assert len(b.scalars) >= 5000


def test_memory_report_counts_each_storage_once():
    ring = _ring()
    r = MemoryReport()
    r.add("tables", ring.tables)
    views = ring.basis(range(2, 6))
    r.add("views", [views.mod, views.psi, views.psi_inv])
    r.add("gathered", [ring.basis((0, 5)).mod])
    full = sum(t.untyped_storage().nbytes() for t in ring.tables)
    assert r.bytes("tables") == full and r.bytes("views") == 0 and r.bytes("gathered") == 2 * 2 * 4
    assert r.tables == full + 16 and "tables (total)" in str(r)


def plan_every_level(ctx):
    """Every table a run can ask for: each level's rescale, ModUp, ModDown and ModDown with the
    rescale, HMult's P mod q, bootstrapping's encapsulation switches, mul_i's monomial."""
    p, tables = ctx.params, ctx.modulus_tables
    special = p.special_limbs
    for level in range(p.max_level + 1):
        r = tuple(p.limbs(level))
        tables.mod_up(p.limbs(level), special, p.alpha)
        tables.switch(r + tuple(special), r)
        ev._special_product_consts(ctx, level)
        if level:
            dst = tuple(p.limbs(level - 1))
            tables.switch(r, dst)
            tables.switch(r + tuple(special), dst)
    lvl0 = p.limbs(0)
    enc = range(special.start, special.start + min(len(lvl0) + 1, len(special)))
    tables.mod_up(lvl0, enc, lvl0.stop)
    tables.switch(tuple(lvl0) + tuple(enc), tuple(lvl0))
    ctx.monomial_i(0)


def test_n16_bts40_tables_fit_128_mib():
    """All per-context tables of n16-bts40 with every level planned (no keys): at most 128 MiB,
    the levels being views of the ring's tables (2.27 GiB when each level copied them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = CKKSContext(fhe.ckks.preset("n16-bts40"), "cpu")
    plan_every_level(ctx)
    report = ctx.memory_report()
    print(report)
    assert report.tables <= 128 * MiB, report
    assert report.bytes("ring tables (every limb)") == 59 * 2**16 * 4 * 2 + 59 * 2 * 4 + 3 * 59 * 4
    assert report.bytes("limb-subset tables (bases)") < MiB  # no NTT table copied
    assert report.keys == 0
    for level in (0, 13, ctx.max_level):
        b = ctx.basis(level)
        assert _same_storage(b.psi, ctx.ring.psi) and _same_storage(b.mod, ctx.ring.mod)


def test_memory_report_of_a_user_context():
    """Keys are reported apart from the tables; bootstrapping's state joins once it exists."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context("toy-n13-bts", "cpu")
    ctx.keygen()
    before = ctx.memory_report()
    assert "bootstrapping (DFT diagonals)" not in str(before)
    secret = ctx.secret_key.s.numel() * 4
    assert before.keys == ctx.key_bytes() + secret
    ctx.bootstrapper.cts_transforms(8)
    after = ctx.memory_report()
    assert after.bytes("bootstrapping (DFT diagonals)") > 0
    assert after.tables == before.tables + after.bytes("bootstrapping (DFT diagonals)")
