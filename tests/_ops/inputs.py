"""Random inputs and comparisons shared by the kernel tests (fresh randomness per test: the
`seed` fixture of tests/conftest.py seeds `random` and torch and is printed on failure)."""
import random

import numpy as np
import torch

from fhetorch._ring import Ring, largest_ntt_primes, ntt_primes
from fhetorch._rlwe import keyswitch as ks


def rand_res(shape, primes) -> torch.Tensor:
    """Canonical residues of shape (..., L, N), limb l below primes[l]; one row of q - 1."""
    x = torch.empty(shape, dtype=torch.int32)
    for l, q in enumerate(primes):
        x[..., l, :] = torch.randint(0, q, (*shape[:-2], shape[-1]), dtype=torch.int32)
    if x.numel():
        l = random.randrange(len(primes))
        x.view(-1, len(primes), shape[-1])[0, l, :] = primes[l] - 1
    return x


def rand_galois(n: int) -> int:
    """A random galois element other than 1 for ring degree n: a rotation's 5^k, the conjugation's
    2n - 1, or any odd element mod 2n."""
    return random.choice([pow(5, random.randrange(1, n // 2), 2 * n), 2 * n - 1, 2 * random.randrange(1, n) + 1])


def make_ring(log_n: int, n_q: int, K: int, device="cpu") -> Ring:
    """n_q chain primes (a shuffled mix of ~31-bit and ~29-bit ones), then K special primes."""
    big = largest_ntt_primes(log_n, n_q + K + 2)
    qs = random.sample(big[: n_q // 2 + 2], n_q // 2) + ntt_primes(log_n, 29, n_q - n_q // 2, exclude=big)
    random.shuffle(qs)
    special = [p for p in big if p not in qs][:K]
    return Ring(log_n, qs + special, device)


def mod_up_args(plan):
    e = plan.ext
    return plan.pre, e.mod, e.psi, e.psi_inv, plan.mats, plan.bounds


def rand_key(ring: Ring, n_q: int, K: int, dnum: int):
    class Key:
        key_q = rand_res((dnum, 2, n_q, ring.n), ring.primes[:n_q])
        key_p = rand_res((dnum, 2, K, ring.n), ring.primes[n_q:])

    return Key


def expect_equal(got: torch.Tensor, want: torch.Tensor, what: str, seed: int):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)} (seed {seed})"
    if not torch.equal(got.cpu(), want.cpu()):
        bad = (got.cpu() != want.cpu()).nonzero()
        raise AssertionError(f"{what}: {bad.shape[0]} of {got.numel()} differ, first at {bad[0].tolist()} "
                             f"(seed {seed})")


def stacked(f, batch, *batched):
    """f applied to each item of the leading `batch` dimensions of the tensors in `batched`
    (None passes through), the results stacked back: what one batched call must equal."""
    if not batch:
        return f(*batched)
    count = int(np.prod(batch))  # explicit: reshape(-1, ...) is ambiguous for an empty item (La = 0)
    flat = [None if t is None else t.reshape(count, *t.shape[len(batch):]) for t in batched]
    items = [f(*[None if t is None else t[i] for t in flat]) for i in range(count)]
    out = torch.stack(items)
    return out.reshape(*batch, *out.shape[1:])


# Modulus switches (name, source limbs, destination limbs) over 10 primes: 0..5 a Q chain
# (~28-31 bits), 6, 7 special primes P, 8, 9 extra primes (those rational rescaling adds).
SWITCH_CASES = [
    ("rescale by one", tuple(range(6)), tuple(range(5))),
    ("rescale by two", tuple(range(6)), tuple(range(4))),
    ("rescale lower level", tuple(range(3)), tuple(range(2))),
    ("mod down", tuple(range(8)), tuple(range(6))),
    ("mod down + rescale", tuple(range(8)), tuple(range(5))),
    ("mod down at a level", (0, 1, 2, 6, 7), (0, 1, 2)),
    ("permuted dst", tuple(range(6)), (3, 0, 2, 1)),
    ("rational: drop 2 add 1", tuple(range(6)), (0, 1, 2, 3, 8)),
    ("rational: drop 1 add 2", tuple(range(6)), (0, 1, 2, 3, 4, 8, 9)),
    ("rational: drop 1 add 1", (0, 1, 2), (0, 1, 9)),
    ("rational: added limb first", tuple(range(6)), (8, 0, 1, 2, 3)),
    ("rational: level moves up", tuple(range(6)), (2, 3, 4, 5, 8, 9)),
    ("rational + mod down", tuple(range(8)), (0, 1, 2, 3, 4, 8)),
    ("disjoint, fewer", (0, 1, 2), (8, 9)),
    ("disjoint, more", (0, 1), (3, 4, 5)),
    ("disjoint, one to one", (6,), (9,)),
]


def switch_args(p):
    """switch_modulus's table arguments from a fhetorch._rlwe.keyswitch.SwitchModulusTables."""
    return (p.pre, p.b_drop.mod, p.b_drop.psi_inv, p.b_dst.mod, p.b_dst.psi, p.matrix, p.c_keep, p.c_sub)


def keyswitch_cases(ring, lvl, sp, alpha, batch):
    """keyswitch's modes, each with the composition it equals: (name, the fhetorch._rlwe.keyswitch
    arguments after (tables, a, key, limbs, special_limbs, alpha), mod_up_keyswitch_inner's keyword
    arguments, the destination limbs, switch_modulus's keyword arguments). a rotation (galois, sigma(c0) added
    in ModDown), a relinearisation ((d0, d1) added in ModDown), HMult's (tensor product in the key product)
    with and without its rescale, and mul_sum's ((d0, d1) added over Q_l P)."""
    L = len(lvl)
    e = ks.mod_up_tables(ring, lvl, sp, alpha).ext
    bl = ring.basis(tuple(lvl))
    g = rand_galois(ring.n)
    c0 = rand_res((*batch, L, ring.n), bl.primes)
    d01 = rand_res((*batch, 2, L, ring.n), bl.primes)
    y = rand_res((*batch, 2, L, ring.n), bl.primes)
    c_add = ring.basis(e.limbs[:L]).const([random.randrange(q) for q in e.primes[:L]])
    level, lower = tuple(lvl), tuple(lvl)[:-1] or tuple(lvl)
    return [
        ("rotation", dict(addend=c0, galois=g), dict(galois=g), level, dict(addend=c0, galois=g)),
        ("relinearisation", dict(addend=d01), {}, level, dict(addend=d01)),
        ("tensor product", dict(b=y, c_add=c_add), dict(b=y, c_add=c_add), level, {}),
        ("tensor product, rescaled", dict(dst_idx=lower, b=y, c_add=c_add), dict(b=y, c_add=c_add), lower, {}),
        ("(d0, d1) over Q_l P, rescaled", dict(dst_idx=lower, inner_addend=d01, c_add=c_add),
         dict(addend=d01, c_add=c_add), lower, {}),
    ]
