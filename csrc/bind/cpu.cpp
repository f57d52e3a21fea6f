// CPU implementations of the ops in schema.cpp: argument checks, output allocation and a
// split of the work over threads; the arithmetic lives in csrc/cpu/.
#include <ATen/Parallel.h>

#include <algorithm>
#include "common.h"
#include "../cpu/kernels.h"

namespace fhetorch::bind {
namespace {

using at::Tensor;

template <typename F>
void split(int64_t total, int64_t grain, F&& f) {
  at::parallel_for(0, total, grain, [&](int64_t a, int64_t b) { f(a, b); });
}

const int* rows_ptr(const std::vector<int>& rows) { return rows.empty() ? nullptr : rows.data(); }

Tensor ntt(const Tensor& x, const Tensor& mod, const Tensor& psi, at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_ntt(x, mod, psi, psi_rows);
  const int64_t L = g.L, n = g.n;
  const int log_n = g.log_n;
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::ntt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi.data_ptr<int32_t>(), rows_ptr(g.psi_rows));
  });
  return y;
}

Tensor intt(const Tensor& x, const Tensor& mod, const Tensor& psi_inv, const Tensor& post,
            at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_intt(x, mod, psi_inv, post, psi_rows);
  const int64_t L = g.L, n = g.n;
  const int log_n = g.log_n;
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::intt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi_inv.data_ptr<int32_t>(),
                   post.data_ptr<int32_t>(), rows_ptr(g.psi_rows));
  });
  return y;
}

Tensor bconv(const Tensor& x, const Tensor& mod_in, const Tensor& mod_out, const Tensor& mat) {
  const BconvGeom g = check_bconv(x, mod_in, mod_out, mat);
  const int64_t La = g.La, n = g.n, Lb = g.Lb, batch = g.batch;
  Tensor y = at::empty(g.out_shape, x.options());
  split(batch * n, 256, [&](int64_t a, int64_t b) {
    cpu::bconv(x.data_ptr<int32_t>(), y.data_ptr<int32_t>(), a, b, La, Lb, n, mod_in.data_ptr<int32_t>(),
               mod_out.data_ptr<int32_t>(), mat.data_ptr<int32_t>());
  });
  return y;
}

Tensor binary(cpu::Binary op, const char* name, const Tensor& a, const Tensor& b, const Tensor& mod) {
  const EwGeom g = check_binary(name, a, b, mod);
  const int64_t L = g.L, n = g.n;
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::binary(op, a.data_ptr<int32_t>(), b.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1,
                b.numel(), n, L, mod.data_ptr<int32_t>());
  });
  return out;
}
Tensor add(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Add, "add", a, b, mod); }
Tensor sub(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Sub, "sub", a, b, mod); }
Tensor mul(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Mul, "mul", a, b, mod); }

Tensor neg(const Tensor& a, const Tensor& mod) {
  const EwGeom g = check_neg(a, mod);
  const int64_t L = g.L, n = g.n;
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::neg(a.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor axpby_impl(const Tensor& a, const Tensor& ca, const Tensor* b, const Tensor* cb, const Tensor& mod,
                  const char* name) {
  const EwGeom g = check_axpby(name, a, ca, b, cb, mod);
  const int64_t L = g.L, n = g.n;
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::axpby(a.data_ptr<int32_t>(), ca.data_ptr<int32_t>(), b ? b->data_ptr<int32_t>() : nullptr,
               b ? cb->data_ptr<int32_t>() : nullptr, out.data_ptr<int32_t>(), i0, i1,
               b ? b->numel() : 1, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}
Tensor axpby(const Tensor& a, const Tensor& ca, const Tensor& b, const Tensor& cb, const Tensor& mod) {
  return axpby_impl(a, ca, &b, &cb, mod, "axpby");
}
Tensor mul_const(const Tensor& a, const Tensor& c, const Tensor& mod) {
  return axpby_impl(a, c, nullptr, nullptr, mod, "mul_const");
}

Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& mod) {
  const TensorProductGeom g = check_tensor_product(a, b, mod);
  const int64_t L = g.L, n = g.n, plane = g.plane, batch = g.batch;
  const bool bb = g.b_broadcast;
  Tensor out = at::empty(g.out_shape, a.options());
  split(batch * plane, 4096, [&](int64_t i0, int64_t i1) {
    cpu::tensor_product(a.data_ptr<int32_t>(), b.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, plane,
                        batch, bb, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor automorphism(const Tensor& x, int64_t galois) {
  const int log_n = check_automorphism(x, galois);
  const int64_t n = x.size(-1);
  Tensor out = at::empty_like(x);
  split(x.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::automorphism(x.data_ptr<int32_t>(), out.data_ptr<int32_t>(), a, b, log_n, static_cast<uint32_t>(galois));
  });
  return out;
}

Tensor keyswitch_inner(const Tensor& d, const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                       int64_t digit_start, const Tensor& mod) {
  const KeySwitchGeom g = check_keyswitch_inner(d, key_q, key_p, q_start, digit_start, mod);
  const int64_t beta = g.beta, L = g.L, n = g.n, K = g.K, Lq = g.Lq, Lq_key = g.Lq_key;
  Tensor out = at::empty({2, L, n}, d.options());
  split(L * n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::keyswitch_inner(d.data_ptr<int32_t>(), key_q.data_ptr<int32_t>(), key_p.data_ptr<int32_t>(),
                         out.data_ptr<int32_t>(), i0, i1, beta, L, Lq, K, Lq_key, q_start, digit_start, n,
                         mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor hoisted_mac(const Tensor& d, const Tensor& c, at::TensorList keys_q, at::TensorList keys_p,
                   at::IntArrayRef galois, int64_t q_start, int64_t digit_start, const Tensor& c_p, at::TensorList pts,
                   at::IntArrayRef pt_baby, at::IntArrayRef pt_giant, int64_t giants, const Tensor& mod) {
  MacArgs a = check_hoisted_mac(d, c, keys_q, keys_p, galois, q_start, digit_start, c_p, pts, pt_baby, pt_giant,
                                giants, mod);
  Tensor out = at::empty({giants, 2, d.size(1), d.size(2)}, d.options());
  a.out = out.data_ptr<int32_t>();
  split(d.size(1) * d.size(2), 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) hoisted_mac_element(a, it);
  });
  return out;
}

// ---- fused key switching: compositions of the CPU kernels (the oracle) -------------------

Tensor mod_up_impl(const ModUpGeom& g, const Tensor& a, const Tensor& pre, const Tensor& mod_ext,
                   const Tensor& psi_ext, const Tensor& psi_inv_ext, const Tensor& mats) {
  const int64_t L = g.L, Lext = g.Lext, n = g.n, beta = g.beta;
  const int log_n = g.log_n;
  const int32_t* me = mod_ext.data_ptr<int32_t>();
  const int* rows = rows_ptr(g.psi_rows);
  // INTT of the whole level with the per-limb BConv constants: standard-form digit inputs.
  Tensor t = a.clone();
  int32_t* tp = t.data_ptr<int32_t>();
  split(L, 1, [&](int64_t r0, int64_t r1) {
    cpu::intt_rows(tp, r0, r1, static_cast<int>(L), log_n, me, psi_inv_ext.data_ptr<int32_t>(),
                   pre.data_ptr<int32_t>(), rows);
  });
  Tensor out = at::empty({beta, Lext, n}, a.options());
  int32_t* op = out.data_ptr<int32_t>();
  split(beta * n, 256, [&](int64_t i0, int64_t i1) {
    cpu::mod_up_bconv(tp, op, i0, i1, g.lo.data(), static_cast<int>(Lext), n, me, mats.data_ptr<int32_t>(),
                      static_cast<int>(g.alpha_max));
  });
  const int32_t* ap = a.data_ptr<int32_t>();
  split(beta * Lext, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t j = r / Lext, i = r % Lext;
      if (i >= g.lo[j] && i < g.lo[j + 1]) {
        std::copy(ap + i * n, ap + (i + 1) * n, op + r * n);
      } else {
        cpu::ntt_rows(op + j * Lext * n, i, i + 1, static_cast<int>(Lext), log_n, me, psi_ext.data_ptr<int32_t>(),
                      rows);
      }
    }
  });
  return out;
}

Tensor mod_up(const Tensor& a, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
              const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds, at::OptionalIntArrayRef psi_rows) {
  const ModUpGeom g = check_mod_up("mod_up", a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, psi_rows);
  return mod_up_impl(g, a, pre, mod_ext, psi_ext, psi_inv_ext, mats);
}

Tensor mod_up_keyswitch(const Tensor& a, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                        const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds, const Tensor& key_q,
                        const Tensor& key_p, int64_t q_start, int64_t digit_start,
                        const std::optional<Tensor>& addend_in, const std::optional<Tensor>& c_add,
                        const std::optional<Tensor>& b, at::OptionalIntArrayRef psi_rows) {
  const ModUpKsGeom g = check_mod_up_keyswitch(a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p,
                                               q_start, digit_start, addend_in, c_add, b, psi_rows);
  const ModUpGeom& m = g.m;
  // Tensor-product mode: the op on d[2] with addend d[:2], d = tensor_product(a, b).
  const Tensor tp = b ? tensor_product(a, *b, mod_ext.narrow(0, 0, m.L).contiguous()) : Tensor();
  const std::optional<Tensor> addend = b ? std::optional<Tensor>(tp.narrow(0, 0, 2)) : addend_in;
  const Tensor d = mod_up_impl(m, b ? tp.select(0, 2) : a, pre, mod_ext, psi_ext, psi_inv_ext, mats);
  const int64_t Lext = m.Lext, n = m.n;
  Tensor out = at::empty({2, Lext, n}, a.options());
  split(Lext * n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::keyswitch_inner(d.data_ptr<int32_t>(), key_q.data_ptr<int32_t>(), key_p.data_ptr<int32_t>(),
                         out.data_ptr<int32_t>(), i0, i1, static_cast<int>(m.beta), static_cast<int>(Lext),
                         static_cast<int>(m.L), static_cast<int>(m.K), static_cast<int>(g.Lq_key),
                         static_cast<int>(q_start), static_cast<int>(digit_start), n, mod_ext.data_ptr<int32_t>());
  });
  if (g.La > 0) {
    for (int64_t c = 0; c < 2; ++c) {
      int32_t* o = out.data_ptr<int32_t>() + c * Lext * n;
      const int32_t* ad = addend->data_ptr<int32_t>() + c * g.La * n;
      split(g.La * n, 4096, [&](int64_t i0, int64_t i1) {
        cpu::add_scaled(o, ad, i0, i1, n, mod_ext.data_ptr<int32_t>(), c_add->data_ptr<int32_t>());
      });
    }
  }
  return out;
}

Tensor switch_modulus(const Tensor& x, at::IntArrayRef drop_rows, at::IntArrayRef keep_rows, const Tensor& pre,
                      const Tensor& mod_drop, const Tensor& psi_inv_drop, const Tensor& mod_dst,
                      const Tensor& psi_dst, const Tensor& mat, const Tensor& c_keep, const Tensor& c_sub,
                      const std::optional<Tensor>& addend, at::OptionalIntArrayRef psi_inv_drop_rows,
                      at::OptionalIntArrayRef psi_dst_rows) {
  const SwitchGeom g = check_switch_modulus(x, drop_rows, keep_rows, pre, mod_drop, psi_inv_drop, mod_dst, psi_dst,
                                            mat, c_keep, c_sub, addend, psi_inv_drop_rows, psi_dst_rows);
  const int* drop_tw = rows_ptr(g.psi_inv_drop_rows);
  const int* dst_tw = rows_ptr(g.psi_dst_rows);
  const int64_t B = g.B, Ls = g.Ls, D = g.D, Ld = g.Ld, n = g.n;
  Tensor out = at::empty(g.out_shape, x.options());
  if (B == 0) return out;
  const int32_t* xp = x.data_ptr<int32_t>();
  Tensor t = at::empty({B, D, n}, x.options());
  int32_t* tp = t.data_ptr<int32_t>();
  split(B * D, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t* src = xp + ((r / D) * Ls + g.drop[r % D]) * n;
      std::copy(src, src + n, tp + r * n);
    }
    cpu::intt_rows(tp, r0, r1, static_cast<int>(D), g.log_n, mod_drop.data_ptr<int32_t>(),
                   psi_inv_drop.data_ptr<int32_t>(), pre.data_ptr<int32_t>(), drop_tw);
  });
  Tensor y = at::empty({B, Ld, n}, x.options());
  int32_t* yp = y.data_ptr<int32_t>();
  split(B * n, 256, [&](int64_t i0, int64_t i1) {
    cpu::bconv(tp, yp, i0, i1, static_cast<int>(D), static_cast<int>(Ld), n, mod_drop.data_ptr<int32_t>(),
               mod_dst.data_ptr<int32_t>(), mat.data_ptr<int32_t>());
  });
  split(B * Ld, 1, [&](int64_t r0, int64_t r1) {
    cpu::ntt_rows(yp, r0, r1, static_cast<int>(Ld), g.log_n, mod_dst.data_ptr<int32_t>(), psi_dst.data_ptr<int32_t>(),
                  dst_tw);
  });
  int32_t* op = out.data_ptr<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* add = b < g.Ba ? addend->data_ptr<int32_t>() + b * Ld * n : nullptr;
    split(Ld * n, 4096, [&](int64_t i0, int64_t i1) {
      cpu::switch_combine(xp + b * Ls * n, yp + b * Ld * n, add, op + b * Ld * n, i0, i1, g.keep.data(), n,
                          mod_dst.data_ptr<int32_t>(), c_keep.data_ptr<int32_t>(), c_sub.data_ptr<int32_t>());
    });
  }
  return out;
}

Tensor to_rns(const Tensor& x, const Tensor& mod, const Tensor& r2) {
  const ToRnsGeom g = check_to_rns(x, mod, r2);
  const int64_t L = g.L, n = g.n;
  Tensor out = at::empty(g.out_shape, x.options().dtype(at::kInt));
  split(x.numel(), 1024, [&](int64_t i0, int64_t i1) {
    cpu::to_rns(x.data_ptr<int64_t>(), out.data_ptr<int32_t>(), i0, i1, L, n, mod.data_ptr<int32_t>(),
                r2.data_ptr<int32_t>());
  });
  return out;
}

Tensor crt_digits(const Tensor& x, const Tensor& mod, const Tensor& garner) {
  const EwGeom g = check_crt_digits(x, mod, garner);
  const int64_t L = g.L, n = g.n;
  Tensor out = at::empty_like(x);
  split(x.numel() / L, 256, [&](int64_t i0, int64_t i1) {
    cpu::crt_digits(x.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, L, n, mod.data_ptr<int32_t>(),
                    garner.data_ptr<int32_t>());
  });
  return out;
}

Tensor sample_uniform(const Tensor& key, int64_t stream, const Tensor& mod, int64_t rows, int64_t n) {
  const uint32_t* k = check_key(key, "sample_uniform");
  const int64_t L = check_sample_uniform(key, mod);
  Tensor out = at::empty({rows, L, n}, key.options());
  split(out.numel(), 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_uniform(k, static_cast<uint64_t>(stream), out.data_ptr<int32_t>(), i0, i1, L, n,
                        mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor sample_ternary(const Tensor& key, int64_t stream, int64_t n) {
  const uint32_t* k = check_key(key, "sample_ternary");
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  split(n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_ternary(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), i0, i1);
  });
  return out;
}

Tensor sample_cbd(const Tensor& key, int64_t stream, int64_t n) {
  const uint32_t* k = check_key(key, "sample_cbd");
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  split(n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_cbd(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), i0, i1);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fhetorch, CPU, m) {
  m.impl("ntt", &ntt);
  m.impl("intt", &intt);
  m.impl("bconv", &bconv);
  m.impl("add", &add);
  m.impl("sub", &sub);
  m.impl("mul", &mul);
  m.impl("neg", &neg);
  m.impl("axpby", &axpby);
  m.impl("mul_const", &mul_const);
  m.impl("tensor_product", &tensor_product);
  m.impl("automorphism", &automorphism);
  m.impl("keyswitch_inner", &keyswitch_inner);
  m.impl("hoisted_mac", &hoisted_mac);
  m.impl("mod_up", &mod_up);
  m.impl("mod_up_keyswitch", &mod_up_keyswitch);
  m.impl("switch_modulus", &switch_modulus);
  m.impl("to_rns", &to_rns);
  m.impl("crt_digits", &crt_digits);
  m.impl("sample_uniform", &sample_uniform);
  m.impl("sample_ternary", &sample_ternary);
  m.impl("sample_cbd", &sample_cbd);
}

}  // namespace fhetorch::bind
