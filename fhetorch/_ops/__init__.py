"""Typed wrappers around torch.ops.fhetorch.* (csrc/bind/schema.cpp states each op).

No FHE semantics here: no scale, no level. Each op also has a fake (meta) kernel so
shapes propagate under torch.compile and graph capture.
"""
import torch

import fhetorch._C  # noqa: F401  (registers torch.ops.fhetorch)

_ops = torch.ops.fhetorch


def has_cuda() -> bool:
    """Whether the CUDA kernels were built into fhetorch._C."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("fhetorch::ntt", "CUDA")

__all__ = [
    "ntt", "intt", "bconv", "add", "sub", "mul", "neg", "axpby", "mul_const", "tensor_product",
    "automorphism", "keyswitch_inner", "hoisted_mac", "mod_up", "mod_up_keyswitch", "switch_modulus", "to_rns", "crt_digits", "sample_uniform", "sample_ternary",
    "sample_cbd",
]


def _rows(rows):
    return None if rows is None else [int(r) for r in rows]


def ntt(x, mod, psi, psi_rows=None):
    return _ops.ntt(x, mod, psi, _rows(psi_rows))


def intt(x, mod, psi_inv, post, psi_rows=None):
    return _ops.intt(x, mod, psi_inv, post, _rows(psi_rows))


def bconv(x, mod_in, mod_out, mat):
    return _ops.bconv(x, mod_in, mod_out, mat)


def add(a, b, mod):
    return _ops.add(a, b, mod)


def sub(a, b, mod):
    return _ops.sub(a, b, mod)


def mul(a, b, mod):
    return _ops.mul(a, b, mod)


def neg(a, mod):
    return _ops.neg(a, mod)


def axpby(a, ca, b, cb, mod):
    return _ops.axpby(a, ca, b, cb, mod)


def mul_const(a, c, mod):
    return _ops.mul_const(a, c, mod)


def tensor_product(a, b, mod):
    return _ops.tensor_product(a, b, mod)


def automorphism(x, galois: int):
    return _ops.automorphism(x, int(galois))


def keyswitch_inner(d, key_q, key_p, q_start: int, digit_start: int, mod):
    return _ops.keyswitch_inner(d, key_q, key_p, int(q_start), int(digit_start), mod)


def hoisted_mac(d, c, keys_q, keys_p, galois, q_start: int, digit_start: int, c_p, pts, pt_baby, pt_giant,
                giants: int, mod):
    return _ops.hoisted_mac(d, c, list(keys_q), list(keys_p), [int(g) for g in galois], int(q_start),
                            int(digit_start), c_p, list(pts), [int(b) for b in pt_baby], [int(g) for g in pt_giant],
                            int(giants), mod)


def mod_up(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, psi_rows=None):
    return _ops.mod_up(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, [int(b) for b in bounds], _rows(psi_rows))


def mod_up_keyswitch(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p, q_start: int,
                     digit_start: int, addend=None, c_add=None, b=None, psi_rows=None):
    return _ops.mod_up_keyswitch(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, [int(v) for v in bounds], key_q, key_p,
                                 int(q_start), int(digit_start), addend, c_add, b, _rows(psi_rows))


def switch_modulus(x, drop_rows, keep_rows, pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub,
                   addend=None, psi_inv_drop_rows=None, psi_dst_rows=None):
    return _ops.switch_modulus(x, [int(r) for r in drop_rows], [int(r) for r in keep_rows], pre, mod_drop,
                               psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, addend, _rows(psi_inv_drop_rows),
                               _rows(psi_dst_rows))


def to_rns(x, mod, r2):
    return _ops.to_rns(x, mod, r2)


def crt_digits(x, mod, garner):
    return _ops.crt_digits(x, mod, garner)


def sample_uniform(key, stream: int, mod, rows: int, n: int):
    return _ops.sample_uniform(key, int(stream), mod, int(rows), int(n))


def sample_ternary(key, stream: int, n: int):
    return _ops.sample_ternary(key, int(stream), int(n))


def sample_cbd(key, stream: int, n: int):
    return _ops.sample_cbd(key, int(stream), int(n))


# --- fake kernels: shapes only ------------------------------------------------------
def _register_fakes():
    reg = torch.library.register_fake

    for name in ("ntt", "intt", "add", "sub", "mul", "neg", "axpby", "mul_const", "automorphism", "crt_digits"):
        reg(f"fhetorch::{name}")(lambda x, *args: torch.empty_like(x))

    @reg("fhetorch::bconv")
    def _(x, mod_in, mod_out, mat):
        return x.new_empty((*x.shape[:-2], mod_out.shape[0], x.shape[-1]))

    @reg("fhetorch::tensor_product")
    def _(a, b, mod):
        return a.new_empty((*a.shape[:-3], 3, *a.shape[-2:]))

    @reg("fhetorch::keyswitch_inner")
    def _(d, key_q, key_p, q_start, digit_start, mod):
        return d.new_empty((2, *d.shape[1:]))

    @reg("fhetorch::hoisted_mac")
    def _(d, c, keys_q, keys_p, galois, q_start, digit_start, c_p, pts, pt_baby, pt_giant, giants, mod):
        return d.new_empty((giants, 2, *d.shape[1:]))

    @reg("fhetorch::mod_up")
    def _(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, psi_rows=None):
        return a.new_empty((len(bounds) - 1, mod_ext.shape[0], a.shape[-1]))

    @reg("fhetorch::mod_up_keyswitch")
    def _(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p, q_start, digit_start, addend=None,
          c_add=None, b=None, psi_rows=None):
        return a.new_empty((2, mod_ext.shape[0], a.shape[-1]))

    @reg("fhetorch::switch_modulus")
    def _(x, drop_rows, keep_rows, pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, addend=None,
          psi_inv_drop_rows=None, psi_dst_rows=None):
        return x.new_empty((*x.shape[:-2], len(keep_rows), x.shape[-1]))

    @reg("fhetorch::to_rns")
    def _(x, mod, r2):
        return x.new_empty((*x.shape[:-1], mod.shape[0], x.shape[-1]), dtype=torch.int32)

    @reg("fhetorch::sample_uniform")
    def _(key, stream, mod, rows, n):
        return key.new_empty((rows, mod.shape[0], n))

    for name in ("sample_ternary", "sample_cbd"):
        reg(f"fhetorch::{name}")(lambda key, stream, n: key.new_empty((n,), dtype=torch.int64))


_register_fakes()
