// Argument checks shared by the CPU and CUDA bindings.
#pragma once
#include <torch/library.h>
#include <ATen/ATen.h>

namespace fhetorch::bind {

inline void check_residues(const at::Tensor& x, const char* op, const char* name) {
  TORCH_CHECK(x.scalar_type() == at::kInt, "fhetorch.", op, ": ", name, " must be int32, got ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous(), "fhetorch.", op, ": ", name, " must be contiguous");
}

inline void check_mod(const at::Tensor& mod, int64_t L, const char* op) {
  check_residues(mod, op, "mod");
  TORCH_CHECK(mod.dim() == 2 && mod.size(0) == L && mod.size(1) == 2, "fhetorch.", op,
              ": mod must be (L, 2) with L = ", L, ", got ", mod.sizes());
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.device() == b.device(), "fhetorch.", op, ": tensors on ", a.device(), " and ", b.device());
}

inline int log2_exact(int64_t n, const char* op) {
  TORCH_CHECK(n >= 2 && (n & (n - 1)) == 0, "fhetorch.", op, ": N must be a power of two, got ", n);
  int k = 0;
  while ((int64_t(1) << k) < n) ++k;
  return k;
}

// b is broadcast over the leading dimensions of a.
inline void check_broadcast(const at::Tensor& a, const at::Tensor& b, const char* op) {
  check_residues(b, op, "b");
  check_same_device(a, b, op);
  TORCH_CHECK(b.dim() <= a.dim() && b.numel() > 0 && a.numel() % b.numel() == 0 &&
                  a.sizes().slice(a.dim() - b.dim()) == b.sizes(),
              "fhetorch.", op, ": b of shape ", b.sizes(), " does not broadcast to ", a.sizes());
}

}  // namespace fhetorch::bind
