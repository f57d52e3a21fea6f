// The fused key-switching ops on the GPU: mod_up and mod_up_keyswitch_inner
// (mod_up_core.cuh, keyswitch_inner_core.cuh), switch_modulus (switch_modulus_core.cuh) and
// keyswitch (keyswitch_core.cuh), run by the CUDA executor of program.cuh; tests/cuda_emu/emu.cu
// runs the same pipelines on the host. Scratch comes from the caller (the caching allocator).
#include <cstdlib>

#include "kernels.h"
#include "keyswitch_core.cuh"

namespace fhetorch::cuda {
namespace {

// FHETORCH_KS_FORK=0: keyswitch's key product in one launch and ModDown after it, on one stream
// (for A/B timing); unset or anything else, in two parts beside ModDown (keyswitch_core.cuh). Read
// at every call.
bool ks_fork() {
  const char* e = std::getenv("FHETORCH_KS_FORK");
  return !(e && e[0] == '0');
}

// The SM count of the current device (the kept rows' key product's grid is a multiple of it).
cudaError_t sm_count(int& sms) {
  int dev = 0;
  FT_TRY(cudaGetDevice(&dev));
  return cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
}

// One event per device and host thread, for the fork and the join (an event may be recorded
// again once a wait on it is enqueued: the wait takes the record before it).
cudaError_t fork_event(cudaEvent_t& ev) {
  constexpr int kMaxDevices = 64;
  static thread_local cudaEvent_t events[kMaxDevices] = {};
  int dev = 0;
  FT_TRY(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!events[dev]) FT_TRY(cudaEventCreateWithFlags(&events[dev], cudaEventDisableTiming));
  ev = events[dev];
  return cudaSuccess;
}

// run_keyswitch's second stream.
struct CudaSide {
  cudaStream_t main;
  CudaExec ex;
  cudaEvent_t ev;
  cudaError_t begin() {
    FT_TRY(cudaEventRecord(ev, main));
    return cudaStreamWaitEvent(ex.stream, ev, 0);
  }
  cudaError_t end() {
    FT_TRY(cudaEventRecord(ev, ex.stream));
    return cudaStreamWaitEvent(main, ev, 0);
  }
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    return ex.template run<P>(a);
  }
};

}  // namespace

cudaError_t mod_up(const ModUpArgs& g, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_mod_up(ex, g, nullptr, out, s.scratch(mod_up_scratch_t(g)), nullptr);
}

cudaError_t mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_mod_up(ex, g, &key, out, s.scratch(mod_up_scratch_t(g)), s.scratch(mod_up_scratch_d(g)));
}

cudaError_t switch_modulus(const SwitchArgs& g, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_switch_modulus(ex, g, out, s.scratch(switch_scratch_t(g)), s.scratch(switch_scratch_y(g)));
}

cudaError_t keyswitch(const ModUpArgs& g, const KeyArgs& key, const SwitchArgs& sw, int32_t* u, int32_t* out,
                      const Stream& s) {
  CudaExec ex{s.stream};
  int32_t* t = s.scratch(mod_up_scratch_t(g));
  int32_t* d = s.scratch(mod_up_scratch_d(g));
  int32_t* st = s.scratch(switch_scratch_t(sw));
  int32_t* sy = s.scratch(switch_scratch_y(sw));
  if (!ks_fork()) {
    SameStream<CudaExec> same{ex};
    return run_keyswitch(ex, same, g, key, sw, u, out, t, d, st, sy, false);
  }
  CudaSide side{s.stream, CudaExec{s.side()}, nullptr};
  FT_TRY(fork_event(side.ev));
  int sms = 0;
  FT_TRY(sm_count(sms));
  return run_keyswitch(ex, side, g, key, sw, u, out, t, d, st, sy, true, int64_t(kKeptProductBlocksPerSm) * sms);
}

}  // namespace fhetorch::cuda
