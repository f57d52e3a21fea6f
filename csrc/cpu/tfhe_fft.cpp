// The float64 FFT ring product on the 2^64 torus on the CPU: the step functions of
// csrc/tfhe_fft.h run by a team of one thread per polynomial (batch elements in parallel), the
// bit-exact oracle of csrc/cuda/tfhe_fft.cu. Compiled with -ffp-contract=off (setup.py): no
// multiply and add of the step functions is fused behind their backs (std::fma is explicit).
#include "kernels.h"

namespace fhetorch::cpu {

namespace {
// A team's scratch of `doubles` doubles, in int32 words of the caller's buffer (64-byte aligned).
double* fft_scratch(const Threads& th, int64_t B, int64_t doubles) {
  return reinterpret_cast<double*>(th.scratch(2 * B * doubles));
}
}  // namespace

void tfhe_fft(const TfheFftRing& f, const int64_t* x, double* out, int64_t B, const Threads& th) {
  if (B <= 0) return;
  const int64_t n = int64_t(1) << f.log_n, per = tfhe_fft_scratch_doubles(f, 1);
  double* scratch = fft_scratch(th, B, per);
  th.par(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) tfhe_team_fft_op(SoloTeam{}, f, x + b * n, scratch + b * per, out + b * n);
  });
}

void tfhe_ifft(const TfheFftRing& f, const double* x, int64_t* out, int64_t B, const Threads& th) {
  if (B <= 0) return;
  const int64_t n = int64_t(1) << f.log_n, per = tfhe_fft_scratch_doubles(f, 1);
  double* scratch = fft_scratch(th, B, per);
  th.par(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) tfhe_team_ifft_op(SoloTeam{}, f, x + b * n, scratch + b * per, out + b * n);
  });
}

void tfhe_fft_product(const TfheFftRing& f, const int64_t* digits, const double* key, int64_t* out, int64_t B,
                      int rows, int cols, const Threads& th) {
  if (B <= 0) return;
  const int64_t n = int64_t(1) << f.log_n, per = tfhe_fft_scratch_doubles(f, rows > cols ? rows : cols);
  double* scratch = fft_scratch(th, B, per);
  th.par(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      tfhe_team_fft_product(SoloTeam{}, f, digits + b * rows * n, key, rows, cols, scratch + b * per,
                            out + b * cols * n);
  });
}

void tfhe_torus_cmux(const TfheTorusGgsw& g, const int64_t* c0, const int64_t* c1, const double* ggsw, int64_t* out,
                     int64_t B, const Threads& th) {
  if (B <= 0) return;
  const int64_t k1n = static_cast<int64_t>(g.k1) << g.f.log_n, per = tfhe_fft_scratch_doubles(g.f, g.k1 * g.level);
  double* scratch = fft_scratch(th, B, per);
  th.par(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      tfhe_team_torus_cmux(SoloTeam{}, g, c0 ? c0 + b * k1n : nullptr, c1 + b * k1n, ggsw, scratch + b * per,
                           out + b * k1n);
  });
}

}  // namespace fhetorch::cpu

namespace fhetorch::cpu {

void tfhe_fourier_blind_rotate(const FourierRotateArgs& a, const Threads& th) {
  if (a.B <= 0) return;
  const int64_t k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n, per = tfhe_fourier_scratch_doubles(a.g);
  // per ciphertext: the torus accumulator (k1 N int64) and the digit scratch, 8-byte words
  double* scratch = reinterpret_cast<double*>(th.scratch(2 * a.B * (k1n + per)));
  th.par(a.B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double* mine = scratch + b * (k1n + per);
      if (a.grouping > 1) {
        int32_t rot[1 << kTfheMaxGrouping];
        tfhe_team_fourier_multi_bit_blind_rotate(SoloTeam{}, a, b, reinterpret_cast<int64_t*>(mine), mine + k1n, rot);
      } else {
        tfhe_team_fourier_blind_rotate(SoloTeam{}, a, b, reinterpret_cast<int64_t*>(mine), mine + k1n);
      }
    }
  });
}

void tfhe_fourier_key_bundle(const FourierRotateArgs& a, int j, double* out, const Threads& th) {
  if (a.B <= 0) return;
  const int64_t per = tfhe_fourier_ggsw_values(a.g);
  th.par(a.B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int32_t rot[1 << kTfheMaxGrouping];
      tfhe_team_fourier_subset_rotations(SoloTeam{}, a, b, j, rot);
      tfhe_fourier_bundle_slots(a, j, rot, 0, 1, out + 2 * b * per);
    }
  });
}

}  // namespace fhetorch::cpu
