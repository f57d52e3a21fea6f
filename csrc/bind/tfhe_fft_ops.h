// The bindings of the float64 FFT ring product on the 2^64 torus (schema.cpp, "tfhe_fft*"),
// written once for both devices as tfhe_ops.h's are: check the arguments, allocate the output,
// call the device's implementation. Torus values are int64 (mod 2^64); FFT values complex128.
#pragma once
#include <string>

#include "../tfhe_fft.h"
#include "tfhe_ops.h"

namespace fhetorch::bind {

inline void tfhe_check_complex(const Tensor& t, const char* op, const char* name, int64_t min_dim) {
  tfhe_need(t.scalar_type() == at::kComplexDouble && t.is_contiguous() && t.dim() >= min_dim, op,
            std::string(name) + " must be a contiguous complex128 tensor of at least " + std::to_string(min_dim) +
                " dimensions, got " + tfhe_shape(t) + " " + std::string(c10::toString(t.scalar_type())));
}

inline const double* tfhe_doubles(const Tensor& t) { return static_cast<const double*>(t.data_ptr()); }

// N = 2 * half (a power of two in [2^4, 2^16]) and the twiddles (N/2,) complex128.
inline TfheFftRing tfhe_fft_ring(const char* op, int64_t n, const Tensor& twiddles) {
  TfheFftRing f{};
  f.log_n = log2_exact(n, op);
  tfhe_need(f.log_n >= 4 && f.log_n <= 16, op, "N must be in [2^4, 2^16], got " + std::to_string(n));
  tfhe_check_complex(twiddles, op, "twiddles", 1);
  tfhe_need(twiddles.dim() == 1 && twiddles.size(0) == n / 2, op,
            "twiddles must be (N/2,) with N = " + std::to_string(n) + ", got " + tfhe_shape(twiddles));
  f.twiddles = tfhe_doubles(twiddles);
  return f;
}

template <class Dev>
Tensor tfhe_fft_op(const Tensor& x, const Tensor& twiddles) {
  const char* op = "tfhe_fft";
  tfhe_check_int64(x, op, "x", 1);
  const TfheFftRing f = tfhe_fft_ring(op, x.size(-1), twiddles);
  check_devices(op, {&x, &twiddles});
  Dev dev(x);
  Tensor out = at::empty(shape_with(x, 1, {x.size(-1) / 2}), x.options().dtype(at::kComplexDouble));
  dev.run(op, [&](auto& ctx) {
    return tfhe_fft(f, x.data_ptr<int64_t>(), static_cast<double*>(out.data_ptr()), batch_of(x, 1), ctx);
  });
  return out;
}

template <class Dev>
Tensor tfhe_ifft_op(const Tensor& x, const Tensor& twiddles) {
  const char* op = "tfhe_ifft";
  tfhe_check_complex(x, op, "x", 1);
  const TfheFftRing f = tfhe_fft_ring(op, 2 * x.size(-1), twiddles);
  check_devices(op, {&x, &twiddles});
  Dev dev(x);
  Tensor out = at::empty(shape_with(x, 1, {2 * x.size(-1)}), x.options().dtype(at::kLong));
  dev.run(op, [&](auto& ctx) { return tfhe_ifft(f, tfhe_doubles(x), out.data_ptr<int64_t>(), batch_of(x, 1), ctx); });
  return out;
}

template <class Dev>
Tensor tfhe_fft_product_op(const Tensor& digits, const Tensor& key, const Tensor& twiddles) {
  const char* op = "tfhe_fft_product";
  tfhe_check_int64(digits, op, "digits", 2);
  tfhe_check_complex(key, op, "key", 3);
  const int64_t rows = digits.size(-2), n = digits.size(-1);
  const TfheFftRing f = tfhe_fft_ring(op, n, twiddles);
  tfhe_need(key.dim() == 3 && key.size(0) == rows && key.size(2) == n / 2 && key.size(1) >= 1 &&
                key.size(1) <= kTfheMaxK1 && rows >= 1 && rows <= 64,
            op, "key must be (rows, cols, N/2) with rows = digits.size(-2) = " + std::to_string(rows) +
                    " in [1, 64], cols in [1, " + std::to_string(kTfheMaxK1) + "] and N = " + std::to_string(n) +
                    ", got " + tfhe_shape(key));
  check_devices(op, {&digits, &key, &twiddles});
  const int cols = static_cast<int>(key.size(1));
  Dev dev(digits);
  Tensor out = at::empty(shape_with(digits, 2, {cols, n}), digits.options());
  dev.run(op, [&](auto& ctx) {
    return tfhe_fft_product(f, digits.data_ptr<int64_t>(), tfhe_doubles(key), out.data_ptr<int64_t>(),
                            batch_of(digits, 2), static_cast<int>(rows), cols, ctx);
  });
  return out;
}

// c0 (optional) and c1 (..., k1, N) int64, ggsw (k1, level, k1, N/2) complex128.
template <class Dev>
Tensor tfhe_run_torus_cmux(const char* op, const Tensor* c0, const Tensor& c1, const Tensor& ggsw,
                           const Tensor& twiddles, int64_t base_log, int64_t level) {
  tfhe_check_int64(c1, op, c0 ? "c1" : "glwe", 2);
  if (c0) {
    tfhe_check_int64(*c0, op, "c0", 2);
    tfhe_need(c0->sizes() == c1.sizes(), op, "c0 and c1 must have one shape, got " + tfhe_shape(*c0) + " and " +
                                                 tfhe_shape(c1));
  }
  tfhe_check_gadget(base_log, level, op);
  const int64_t k1 = c1.size(-2), n = c1.size(-1);
  TfheTorusGgsw g{};
  g.f = tfhe_fft_ring(op, n, twiddles);
  tfhe_need(k1 >= 2 && k1 <= kTfheMaxK1, op, "the GLWE dimension k must be in [1, 7], got " + std::to_string(k1 - 1));
  tfhe_need(k1 * level <= 64, op, "(k + 1) level must be at most 64, got " + std::to_string(k1 * level));
  tfhe_check_complex(ggsw, op, "ggsw", 4);
  tfhe_need(ggsw.dim() == 4 && ggsw.size(0) == k1 && ggsw.size(1) == level && ggsw.size(2) == k1 &&
                ggsw.size(3) == n / 2,
            op, "ggsw must be (" + std::to_string(k1) + ", " + std::to_string(level) + ", " + std::to_string(k1) +
                    ", " + std::to_string(n / 2) + "), got " + tfhe_shape(ggsw));
  check_devices(op, {c0, &c1, &ggsw, &twiddles});
  g.k1 = static_cast<int>(k1);
  g.base_log = static_cast<int>(base_log);
  g.level = static_cast<int>(level);
  Dev dev(c1);
  Tensor out = at::empty_like(c1);
  dev.run(op, [&](auto& ctx) {
    return tfhe_torus_cmux(g, c0 ? c0->data_ptr<int64_t>() : nullptr, c1.data_ptr<int64_t>(), tfhe_doubles(ggsw),
                           out.data_ptr<int64_t>(), batch_of(c1, 2), ctx);
  });
  return out;
}

template <class Dev>
Tensor tfhe_torus_external_product_op(const Tensor& glwe, const Tensor& ggsw, const Tensor& twiddles, int64_t base_log,
                                      int64_t level) {
  return tfhe_run_torus_cmux<Dev>("tfhe_torus_external_product", nullptr, glwe, ggsw, twiddles, base_log, level);
}

template <class Dev>
Tensor tfhe_torus_cmux_op(const Tensor& c0, const Tensor& c1, const Tensor& ggsw, const Tensor& twiddles,
                          int64_t base_log, int64_t level) {
  return tfhe_run_torus_cmux<Dev>("tfhe_torus_cmux", &c0, c1, ggsw, twiddles, base_log, level);
}

// The arguments of a blind rotation with a Fourier key (classical, or multi-bit where grouping > 1):
// ct (..., n + 1) mod q, bsk (n, k1, level, k1, N/2) complex128 (multi-bit: (n / G, 2^G, k1, level,
// k1, N/2)), N = 2 * bsk.size(-1); the LUT side is the caller's. Multi-bit also takes roots (2N,)
// complex128 and exponents (N/2,) int32.
inline FourierRotateArgs tfhe_fourier_args(const char* op, const Tensor& ct, const Tensor& bsk, const Tensor* twiddles,
                                           const Tensor* roots, const Tensor* exponents, at::IntArrayRef moduli,
                                           int64_t base_log, int64_t level) {
  tfhe_check_int64(ct, op, "ct", 1);
  const bool multi = roots != nullptr;
  const int64_t lead = multi ? 2 : 1;  // the key's dimensions before the GGSW
  tfhe_check_complex(bsk, op, "bsk", 4 + lead);
  tfhe_check_gadget(base_log, level, op);
  const int64_t n = ct.size(-1) - 1, n_big = 2 * bsk.size(-1), k1 = bsk.size(lead);
  FourierRotateArgs a{};
  if (twiddles) {
    a.g.f = tfhe_fft_ring(op, n_big, *twiddles);
  } else {
    a.g.f.log_n = log2_exact(n_big, op);
    tfhe_need(a.g.f.log_n >= 4 && a.g.f.log_n <= 16, op, "N must be in [2^4, 2^16], got " + std::to_string(n_big));
  }
  a.m = tfhe_mod(moduli, op);
  const std::string ggsw = "(k + 1, level, k + 1, N/2) with k in [1, 7], level = " + std::to_string(level) +
                           " and (k + 1) level <= 64";
  tfhe_need(bsk.dim() == 4 + lead && k1 >= 2 && k1 <= kTfheMaxK1 && bsk.size(lead + 1) == level &&
                bsk.size(lead + 2) == k1 && k1 * level <= 64,
            op, std::string("bsk must be ") + (multi ? "(n / G, 2^G, " : "(n, ") + ggsw.substr(1) + ", got " +
                    tfhe_shape(bsk));
  int grouping = 1;
  if (multi) {
    const int64_t subsets = bsk.size(1);
    while ((int64_t(1) << grouping) < subsets) ++grouping;
    tfhe_need(subsets == (int64_t(1) << grouping) && grouping >= 2 && grouping <= kTfheMaxGrouping, op,
              "bsk's second dimension must be 2^G with G in [2, " + std::to_string(kTfheMaxGrouping) + "], got " +
                  std::to_string(subsets));
    tfhe_need(bsk.size(0) * grouping == n, op, "ct's LWE dimension " + std::to_string(n) + " differs from the key's " +
                                                   std::to_string(bsk.size(0) * grouping));
    tfhe_check_complex(*roots, op, "roots", 1);
    tfhe_need(roots->dim() == 1 && roots->size(0) == 2 * n_big, op,
              "roots must be (2N,) with N = " + std::to_string(n_big) + ", got " + tfhe_shape(*roots));
    tfhe_need(exponents->scalar_type() == at::kInt && exponents->is_contiguous() && exponents->dim() == 1 &&
                  exponents->size(0) == n_big / 2,
              op, "exponents must be a contiguous (N/2,) int32 tensor with N = " + std::to_string(n_big) + ", got " +
                      tfhe_shape(*exponents));
    a.roots = tfhe_doubles(*roots);
    a.exps = exponents->data_ptr<int32_t>();
  } else {
    tfhe_need(bsk.size(0) == n, op, "ct's LWE dimension " + std::to_string(n) + " differs from the key's " +
                                        std::to_string(bsk.size(0)));
  }
  a.grouping = grouping;
  a.g.k1 = static_cast<int>(k1);
  a.g.base_log = static_cast<int>(base_log);
  a.g.level = static_cast<int>(level);
  a.n = as_int(n, op, "n");
  a.B = batch_of(ct, 1);
  a.ct = ct.data_ptr<int64_t>();
  a.bsk = tfhe_doubles(bsk);
  return a;
}

// The blind rotation with a Fourier key: ct (..., n + 1) and luts (T, N) mod q, lut_index as
// tfhe_blind_rotate's; bsk as tfhe_fourier_args' -> (..., k1, N) mod q.
template <class Dev>
Tensor tfhe_run_fourier_rotation(const char* op, const Tensor& ct, const Tensor& luts,
                                 const std::optional<Tensor>& lut_index, const Tensor& bsk, const Tensor& twiddles,
                                 const Tensor* roots, const Tensor* exponents, at::IntArrayRef moduli,
                                 int64_t base_log, int64_t level) {
  tfhe_check_int64(luts, op, "luts", 2);
  tfhe_need(luts.dim() == 2 && luts.size(0) >= 1, op, "luts must be (T, N) with T >= 1, got " + tfhe_shape(luts));
  tfhe_need(luts.size(1) == 2 * bsk.size(-1), op, "luts' N " + std::to_string(luts.size(1)) +
                                                      " differs from the key's " + std::to_string(2 * bsk.size(-1)));
  FourierRotateArgs a = tfhe_fourier_args(op, ct, bsk, &twiddles, roots, exponents, moduli, base_log, level);
  if (lut_index) {
    tfhe_check_int64(*lut_index, op, "lut_index", 0);
    tfhe_need(lut_index->numel() == a.B, op, "lut_index must have one entry per ciphertext (" + std::to_string(a.B) +
                                                 "), got " + std::to_string(lut_index->numel()));
  }
  check_devices(op, {&ct, &luts, lut_index ? &*lut_index : nullptr, &bsk, &twiddles, roots, exponents});
  a.T = luts.size(0);
  Dev dev(ct);
  Tensor out = at::empty(shape_with(ct, 1, {a.g.k1, luts.size(1)}), ct.options());
  a.luts = luts.data_ptr<int64_t>();
  a.lut_index = lut_index ? lut_index->data_ptr<int64_t>() : nullptr;
  a.acc = out.data_ptr<int64_t>();
  dev.run(op, [&](auto& ctx) { return tfhe_fourier_blind_rotate(a, ctx); });
  return out;
}

template <class Dev>
Tensor tfhe_fourier_blind_rotate_op(const Tensor& ct, const Tensor& luts, const std::optional<Tensor>& lut_index,
                                    const Tensor& bsk, const Tensor& twiddles, at::IntArrayRef moduli, int64_t base_log,
                                    int64_t level) {
  return tfhe_run_fourier_rotation<Dev>("tfhe_fourier_blind_rotate", ct, luts, lut_index, bsk, twiddles, nullptr,
                                        nullptr, moduli, base_log, level);
}

template <class Dev>
Tensor tfhe_fourier_multi_bit_blind_rotate_op(const Tensor& ct, const Tensor& luts,
                                              const std::optional<Tensor>& lut_index, const Tensor& bsk,
                                              const Tensor& twiddles, const Tensor& roots, const Tensor& exponents,
                                              at::IntArrayRef moduli, int64_t base_log, int64_t level) {
  return tfhe_run_fourier_rotation<Dev>("tfhe_fourier_multi_bit_blind_rotate", ct, luts, lut_index, bsk, twiddles,
                                        &roots, &exponents, moduli, base_log, level);
}

// The key bundle of group `group` of each ciphertext: (..., k1, level, k1, N/2) complex128.
template <class Dev>
Tensor tfhe_fourier_key_bundle_op(const Tensor& ct, const Tensor& bsk, const Tensor& roots, const Tensor& exponents,
                                  at::IntArrayRef moduli, int64_t base_log, int64_t level, int64_t group) {
  const char* op = "tfhe_fourier_key_bundle";
  FourierRotateArgs a = tfhe_fourier_args(op, ct, bsk, nullptr, &roots, &exponents, moduli, base_log, level);
  tfhe_need(group >= 0 && group < bsk.size(0), op,
            "group must be in [0, " + std::to_string(bsk.size(0)) + "), got " + std::to_string(group));
  check_devices(op, {&ct, &bsk, &roots, &exponents});
  std::vector<int64_t> shape(ct.sizes().begin(), ct.sizes().end() - 1);
  for (int d = 2; d < bsk.dim(); ++d) shape.push_back(bsk.size(d));
  Dev dev(ct);
  Tensor out = at::empty(shape, bsk.options());
  dev.run(op, [&](auto& ctx) {
    return tfhe_fourier_key_bundle(a, static_cast<int>(group), static_cast<double*>(out.data_ptr()), ctx);
  });
  return out;
}

template <class Dev>
void register_tfhe_fft_ops(torch::Library& m) {
  m.impl("tfhe_fourier_blind_rotate", &tfhe_fourier_blind_rotate_op<Dev>);
  m.impl("tfhe_fourier_multi_bit_blind_rotate", &tfhe_fourier_multi_bit_blind_rotate_op<Dev>);
  m.impl("tfhe_fourier_key_bundle", &tfhe_fourier_key_bundle_op<Dev>);
  m.impl("tfhe_torus_external_product", &tfhe_torus_external_product_op<Dev>);
  m.impl("tfhe_torus_cmux", &tfhe_torus_cmux_op<Dev>);
  m.impl("tfhe_fft", &tfhe_fft_op<Dev>);
  m.impl("tfhe_ifft", &tfhe_ifft_op<Dev>);
  m.impl("tfhe_fft_product", &tfhe_fft_product_op<Dev>);
}

}  // namespace fhetorch::bind
