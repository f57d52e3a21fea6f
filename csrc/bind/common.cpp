// Out-of-line error paths of the argument checks (common.h), shared by both bindings.
#include "common.h"

namespace fhetorch::bind {

void fail(const std::string& message) {
  // One std::string argument: no per-call-site message formatting templates.
  TORCH_CHECK(false, message);
}

int log2_exact(int64_t n, const char* op) {
  if (n < 2 || (n & (n - 1)) != 0) {
    std::string message("fhetorch.");
    message += op ? op : "?";
    message += ": N must be a power of two, got ";
    message += std::to_string(n);
    fail(message);
  }
  int k = 0;
  while ((int64_t(1) << k) < n) ++k;
  return k;
}

int fused_log2(int64_t n, const char* op) {
  const int k = log2_exact(n, op);
  if (k < kFusedMinLogN || k > kFusedMaxLogN) {
    fail(std::string("fhetorch.") + op + ": N must be in [2^" + std::to_string(kFusedMinLogN) + ", 2^" +
         std::to_string(kFusedMaxLogN) + "] (the fused key-switching kernels' range, on every device), got N = 2^" +
         std::to_string(k));
  }
  return k;
}

}  // namespace fhetorch::bind
