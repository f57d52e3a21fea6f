// CPU implementations of the ops in schema.cpp: argument checks, output allocation and a
// split of the work over threads; the arithmetic lives in csrc/cpu/.
#include <ATen/Parallel.h>
#include "common.h"
#include "../cpu/kernels.h"

namespace fhetorch::bind {
namespace {

using at::Tensor;

template <typename F>
void split(int64_t total, int64_t grain, F&& f) {
  at::parallel_for(0, total, grain, [&](int64_t a, int64_t b) { f(a, b); });
}

Tensor ntt(const Tensor& x, const Tensor& mod, const Tensor& psi) {
  const NttGeom g = check_ntt(x, mod, psi);
  const int64_t L = g.L, n = g.n;
  const int log_n = g.log_n;
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::ntt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi.data_ptr<int32_t>());
  });
  return y;
}

Tensor intt(const Tensor& x, const Tensor& mod, const Tensor& psi_inv, const Tensor& post) {
  const NttGeom g = check_intt(x, mod, psi_inv, post);
  const int64_t L = g.L, n = g.n;
  const int log_n = g.log_n;
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::intt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi_inv.data_ptr<int32_t>(),
                   post.data_ptr<int32_t>());
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
  m.impl("to_rns", &to_rns);
  m.impl("crt_digits", &crt_digits);
  m.impl("sample_uniform", &sample_uniform);
  m.impl("sample_ternary", &sample_ternary);
  m.impl("sample_cbd", &sample_cbd);
}

}  // namespace fhetorch::bind
