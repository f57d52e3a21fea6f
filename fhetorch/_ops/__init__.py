"""Typed wrappers around torch.ops.fhetorch.* (csrc/bind/schema.cpp states each op).

No FHE semantics here: no scale, no level. Every op takes any number of leading batch
dimensions in one launch, and has a fake (meta) kernel beside its wrapper, so shapes
propagate under torch.compile and graph capture; tests/_ops/test_opcheck.py runs
torch.library.opcheck on each.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import torch

import fhetorch._C  # noqa: F401  (registers torch.ops.fhetorch)

_ops = torch.ops.fhetorch
_fake = torch.library.register_fake
Tensor = torch.Tensor


def _one_thread_after_fork():
    # The CPU kernels split over torch's OpenMP threads (at::parallel_for); GNU OpenMP's
    # thread pool does not survive fork(), and a parallel region in the child waits forever
    # for it. A forked child runs them on its one thread (torch's DataLoader workers do too).
    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_one_thread_after_fork)

__all__ = [
    "ntt", "intt", "bconv", "add", "sub", "mul", "neg", "axpby", "mul_const", "lincomb", "tensor_product",
    "automorphism", "keyswitch_inner", "hoisted_mac", "keyswitch_inner_sum", "mod_up", "mod_up_keyswitch_inner", "switch_modulus", "keyswitch",
    "to_rns", "crt_digits",
    "sample_uniform", "sample_ternary", "sample_cbd", "has_cuda",
    "tfhe_sample_int", "tfhe_modulus_switch", "tfhe_decompose", "tfhe_keyswitch", "tfhe_keyswitch_digits",
    "tfhe_keyswitch_combine", "tfhe_external_product", "tfhe_glwe_keyswitch", "tfhe_glwe_pack_step",
    "tfhe_blind_rotate",
    "tfhe_multi_bit_blind_rotate", "tfhe_fft",
    "tfhe_ifft", "tfhe_fft_product", "tfhe_torus_external_product", "tfhe_torus_cmux", "tfhe_fourier_blind_rotate",
    "tfhe_fourier_multi_bit_blind_rotate", "tfhe_fourier_key_bundle",
]


def has_cuda() -> bool:
    """Whether the CUDA kernels were built into fhetorch._C."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("fhetorch::ntt", "CUDA")


def _ints(v: Sequence[int]) -> list[int]:
    return [int(x) for x in v]


def _rows(v: Sequence[int] | None) -> list[int] | None:
    """A table row map (None: limb l reads row l of an (L, N) table)."""
    return None if v is None else _ints(v)


def _same(x: Tensor, *args) -> Tensor:
    return torch.empty_like(x)


# --- transforms ---------------------------------------------------------------------------
# Table row maps (psi_rows, psi_inv_drop_rows, psi_dst_rows; csrc/bind/schema.cpp): limb l
# reads row rows[l] of any (R, N) table, so the ring's full tables serve every limb subset.
def ntt(x: Tensor, mod: Tensor, psi: Tensor, psi_rows: Sequence[int] | None = None) -> Tensor:
    """Forward negacyclic NTT of every row of x (..., L, N): natural in, bit-reversed out."""
    return _ops.ntt(x, mod, psi, _rows(psi_rows))


def intt(x: Tensor, mod: Tensor, psi_inv: Tensor, post: Tensor, psi_rows: Sequence[int] | None = None) -> Tensor:
    """Inverse NTT of every row of x (..., L, N), times post[l] (Montgomery)."""
    return _ops.intt(x, mod, psi_inv, post, _rows(psi_rows))


_fake("fhetorch::ntt")(_same)
_fake("fhetorch::intt")(_same)


def bconv(x: Tensor, mod_in: Tensor, mod_out: Tensor, mat: Tensor) -> Tensor:
    """Fast base conversion (..., La, N) -> (..., Lb, N), Lb = len(mod_out)."""
    return _ops.bconv(x, mod_in, mod_out, mat)


@_fake("fhetorch::bconv")
def _(x, mod_in, mod_out, mat):
    return x.new_empty((*x.shape[:-2], mod_out.shape[0], x.shape[-1]))


# --- element-wise ---------------------------------------------------------------------------
def add(a: Tensor, b: Tensor, mod: Tensor) -> Tensor:
    """a + b, b broadcast over a's leading dimensions."""
    return _ops.add(a, b, mod)


def sub(a: Tensor, b: Tensor, mod: Tensor) -> Tensor:
    """a - b, b broadcast over a's leading dimensions."""
    return _ops.sub(a, b, mod)


def mul(a: Tensor, b: Tensor, mod: Tensor) -> Tensor:
    """Montgomery product a * b, b broadcast over a's leading dimensions."""
    return _ops.mul(a, b, mod)


def neg(a: Tensor, mod: Tensor) -> Tensor:
    """-a."""
    return _ops.neg(a, mod)


def axpby(a: Tensor, ca: Tensor, b: Tensor, cb: Tensor, mod: Tensor) -> Tensor:
    """a * ca[l] + b * cb[l] with per-limb Montgomery constants, b broadcast as in add."""
    return _ops.axpby(a, ca, b, cb, mod)


def mul_const(a: Tensor, c: Tensor, mod: Tensor) -> Tensor:
    """a * c[l] with per-limb Montgomery constants."""
    return _ops.mul_const(a, c, mod)


for _name in ("add", "sub", "mul", "neg", "axpby", "mul_const"):
    _fake(f"fhetorch::{_name}")(_same)


def lincomb(xs: Sequence[Tensor], consts: Tensor, mod: Tensor, scalar: Tensor | None = None) -> Tensor:
    """sum_t xs[t] * consts[t, l] in one pass: xs of one shape (..., L, N), consts (T, L) per-limb
    Montgomery constants; scalar (L,) is added to polynomial 0 of each group of xs[0].size(-3)."""
    return _ops.lincomb(list(xs), consts, mod, scalar)


@_fake("fhetorch::lincomb")
def _(xs, consts, mod, scalar=None):
    return torch.empty_like(xs[0])


def tensor_product(a: Tensor | Sequence[Tensor], b: Tensor | Sequence[Tensor], mod: Tensor) -> Tensor:
    """Ciphertexts (..., 2, L, N) x (..., 2, L, N) or (2, L, N) -> (..., 3, L, N); given lists of
    pairs, the sum of their tensor products in one pass (a polynomial's spine)."""
    pairs = (list(a), list(b)) if isinstance(a, (list, tuple)) else ([a], [b])
    return _ops.tensor_product(*pairs, mod)


@_fake("fhetorch::tensor_product")
def _(a, b, mod):
    return a[0].new_empty((*a[0].shape[:-3], 3, *a[0].shape[-2:]))


def automorphism(x: Tensor, galois: int) -> Tensor:
    """X -> X^galois on NTT-domain rows (..., N); galois odd in (0, 2N)."""
    return _ops.automorphism(x, int(galois))


_fake("fhetorch::automorphism")(_same)


# --- key switching ----------------------------------------------------------------------------
def keyswitch_inner(d: Tensor, key_q: Tensor, key_p: Tensor, q_start: int, digit_start: int, mod: Tensor) -> Tensor:
    """Inner product of lifted digits d (..., beta, L+K, N) with a key: (..., 2, L+K, N)."""
    return _ops.keyswitch_inner(d, key_q, key_p, int(q_start), int(digit_start), mod)


@_fake("fhetorch::keyswitch_inner")
def _(d, key_q, key_p, q_start, digit_start, mod):
    return d.new_empty((*d.shape[:-3], 2, *d.shape[-2:]))


def hoisted_mac(d: Tensor, c: Tensor, keys_q: Sequence[Tensor], keys_p: Sequence[Tensor], galois: Sequence[int],
                q_start: int, digit_start: int, c_p: Tensor, pts: Sequence[Tensor], pt_baby: Sequence[int],
                pt_giant: Sequence[int], giants: int, mod: Tensor) -> Tensor:
    """Hoisted baby-step rotations of c (..., 2, L, N) times diagonals, per giant step, over P*Q."""
    return _ops.hoisted_mac(d, c, list(keys_q), list(keys_p), _ints(galois), int(q_start), int(digit_start), c_p,
                            list(pts), _ints(pt_baby), _ints(pt_giant), int(giants), mod)


@_fake("fhetorch::hoisted_mac")
def _(d, c, keys_q, keys_p, galois, q_start, digit_start, c_p, pts, pt_baby, pt_giant, giants, mod):
    return d.new_empty((*d.shape[:-3], giants, 2, *d.shape[-2:]))


def keyswitch_inner_sum(d: Tensor, keys_q: Sequence[Tensor], keys_p: Sequence[Tensor], galois: Sequence[int],
                        q_start: int, digit_start: int, addend: Tensor, c_add: Tensor, acc: Tensor | None,
                        mod: Tensor) -> Tensor:
    """Sum over k of the key switches of sigma_k(y_k) left over P*Q, from the ModUp'd digits d (..., G, beta,
    L+K, N) of the y_k1 and addend (..., G, La, N) = the y_k0, plus acc: (..., 2, L+K, N)."""
    return _ops.keyswitch_inner_sum(d, list(keys_q), list(keys_p), _ints(galois), int(q_start), int(digit_start),
                                    addend, c_add, acc, mod)


@_fake("fhetorch::keyswitch_inner_sum")
def _(d, keys_q, keys_p, galois, q_start, digit_start, addend, c_add, acc, mod):
    return d.new_empty((*d.shape[:-4], 2, *d.shape[-2:]))


def mod_up(a: Tensor, pre: Tensor, mod_ext: Tensor, psi_ext: Tensor, psi_inv_ext: Tensor, mats: Tensor,
           bounds: Sequence[int], psi_rows: Sequence[int] | None = None) -> Tensor:
    """ModUp of a (..., L, N), one lift per digit: (..., beta, L+K, N)."""
    return _ops.mod_up(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, _ints(bounds), _rows(psi_rows))


@_fake("fhetorch::mod_up")
def _(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, psi_rows=None):
    return a.new_empty((*a.shape[:-2], len(bounds) - 1, mod_ext.shape[0], a.shape[-1]))


def mod_up_keyswitch_inner(a: Tensor, pre: Tensor, mod_ext: Tensor, psi_ext: Tensor, psi_inv_ext: Tensor,
                           mats: Tensor, bounds: Sequence[int], key_q: Tensor, key_p: Tensor, q_start: int,
                           digit_start: int, addend: Tensor | None = None, c_add: Tensor | None = None,
                           b: Tensor | None = None, psi_rows: Sequence[int] | None = None,
                           acc: Tensor | None = None, galois: int = 1) -> Tensor:
    """keyswitch_inner(mod_up(a)) (+ addend * c_add) (+ acc) in one op: (..., 2, L+K, N); with b, of a1 * b1;
    with galois, of automorphism(a, galois) (and the addend rotated alike)."""
    return _ops.mod_up_keyswitch_inner(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, _ints(bounds), key_q, key_p,
                                       int(q_start), int(digit_start), addend, c_add, b, _rows(psi_rows), acc,
                                       int(galois))


@_fake("fhetorch::mod_up_keyswitch_inner")
def _(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p, q_start, digit_start, addend=None,
      c_add=None, b=None, psi_rows=None, acc=None, galois=1):
    return a.new_empty((*a.shape[:-3 if b is not None else -2], 2, mod_ext.shape[0], a.shape[-1]))


def switch_modulus(x: Tensor, drop_rows: Sequence[int], keep_rows: Sequence[int], pre: Tensor, mod_drop: Tensor,
                   psi_inv_drop: Tensor, mod_dst: Tensor, psi_dst: Tensor, mat: Tensor, c_keep: Tensor,
                   c_sub: Tensor, addend: Tensor | None = None, psi_inv_drop_rows: Sequence[int] | None = None,
                   psi_dst_rows: Sequence[int] | None = None, galois: int = 1) -> Tensor:
    """Rescale / ModDown of x (..., Ls, N) to (..., len(keep_rows), N), plus an addend (rotated by galois)."""
    return _ops.switch_modulus(x, _ints(drop_rows), _ints(keep_rows), pre, mod_drop, psi_inv_drop, mod_dst, psi_dst,
                               mat, c_keep, c_sub, addend, _rows(psi_inv_drop_rows), _rows(psi_dst_rows), int(galois))


@_fake("fhetorch::switch_modulus")
def _(x, drop_rows, keep_rows, pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, addend=None,
      psi_inv_drop_rows=None, psi_dst_rows=None, galois=1):
    return x.new_empty((*x.shape[:-2], len(keep_rows), x.shape[-1]))


def keyswitch(a: Tensor, pre: Tensor, mod_ext: Tensor, psi_ext: Tensor, psi_inv_ext: Tensor, mats: Tensor,
              bounds: Sequence[int], key_q: Tensor, key_p: Tensor, q_start: int, digit_start: int,
              addend: Tensor | None, c_add: Tensor | None, b: Tensor | None, psi_rows: Sequence[int] | None,
              galois: int, drop_rows: Sequence[int], keep_rows: Sequence[int], down_pre: Tensor, mod_drop: Tensor,
              psi_inv_drop: Tensor, mod_dst: Tensor, psi_dst: Tensor, mat: Tensor, c_keep: Tensor, c_sub: Tensor,
              down_addend: Tensor | None = None, psi_inv_drop_rows: Sequence[int] | None = None,
              psi_dst_rows: Sequence[int] | None = None) -> Tensor:
    """switch_modulus(mod_up_keyswitch_inner(a, ...), ...) in one op: a whole key switch."""
    return _ops.keyswitch(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, _ints(bounds), key_q, key_p, int(q_start),
                          int(digit_start), addend, c_add, b, _rows(psi_rows), int(galois), _ints(drop_rows),
                          _ints(keep_rows), down_pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub,
                          down_addend, _rows(psi_inv_drop_rows), _rows(psi_dst_rows))


@_fake("fhetorch::keyswitch")
def _(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p, q_start, digit_start, addend, c_add, b,
      psi_rows, galois, drop_rows, keep_rows, down_pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub,
      down_addend=None, psi_inv_drop_rows=None, psi_dst_rows=None):
    return a.new_empty((*a.shape[:-3 if b is not None else -2], 2, len(keep_rows), a.shape[-1]))


# --- conversions --------------------------------------------------------------------------------
def to_rns(x: Tensor, mod: Tensor, r2: Tensor) -> Tensor:
    """Signed int64 (..., N) -> Montgomery residues (..., L, N)."""
    return _ops.to_rns(x, mod, r2)


@_fake("fhetorch::to_rns")
def _(x, mod, r2):
    return x.new_empty((*x.shape[:-1], mod.shape[0], x.shape[-1]), dtype=torch.int32)


def crt_digits(x: Tensor, mod: Tensor, garner: Tensor) -> Tensor:
    """Standard-form residues (..., L, N) -> centred mixed-radix digits, same shape."""
    return _ops.crt_digits(x, mod, garner)


_fake("fhetorch::crt_digits")(_same)


# --- samplers (ChaCha20, csrc/chacha.h) ------------------------------------------------------------
def sample_uniform(key: Tensor, stream: int, mod: Tensor, rows: int, n: int) -> Tensor:
    """Uniform residues (rows, L, n), limb l below mod[l, 0]."""
    return _ops.sample_uniform(key, int(stream), mod, int(rows), int(n))


@_fake("fhetorch::sample_uniform")
def _(key, stream, mod, rows, n):
    return key.new_empty((rows, mod.shape[0], n))


def sample_ternary(key: Tensor, stream: int, n: int) -> Tensor:
    """Uniform {-1, 0, 1} as int64 (n,)."""
    return _ops.sample_ternary(key, int(stream), int(n))


def sample_cbd(key: Tensor, stream: int, n: int) -> Tensor:
    """Centred binomial (eta = 21) as int64 (n,)."""
    return _ops.sample_cbd(key, int(stream), int(n))


for _name in ("sample_ternary", "sample_cbd"):
    _fake(f"fhetorch::{_name}")(lambda key, stream, n: key.new_empty((n,), dtype=torch.int64))


# --- TFHE (fhetorch/_ops/tfhe.py) ----------------------------------------------------------------
from .tfhe import (  # noqa: E402  (after the CKKS ops: one registration order)
    tfhe_blind_rotate, tfhe_decompose, tfhe_external_product, tfhe_fft, tfhe_fft_product, tfhe_glwe_keyswitch, tfhe_glwe_pack_step,
    tfhe_ifft, tfhe_keyswitch,
    tfhe_keyswitch_combine, tfhe_keyswitch_digits, tfhe_modulus_switch, tfhe_multi_bit_blind_rotate, tfhe_sample_int,
    tfhe_torus_cmux, tfhe_torus_external_product, tfhe_fourier_blind_rotate, tfhe_fourier_key_bundle,
    tfhe_fourier_multi_bit_blind_rotate,
)
