// A traced program in which the injector fails: after one op traced as usual and one begun, it hands
// fpscope_op_begin a million input tensors while an address-space limit leaves no room to copy
// their descriptors, so the injector's copy throws std::bad_alloc. Tracing must stop there and the
// program carry on: exit status 0, the op begun before ends untraced, and what it logs afterwards
// is not in the trace.
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "fpscope/inject_api.h"
#include "mpt/abi.h"

int main() {
  using Begin = fpscope_op* (*)(const char*, const mpt_tensor*, int32_t, const uint8_t*, int32_t);
  using End = int (*)(fpscope_op*, const mpt_tensor*, int32_t, int32_t);
  const auto begin = reinterpret_cast<Begin>(dlsym(RTLD_DEFAULT, "fpscope_op_begin"));
  const auto end = reinterpret_cast<End>(dlsym(RTLD_DEFAULT, "fpscope_op_end"));
  if (begin == nullptr || end == nullptr) {
    std::fprintf(stderr, "failure_target: run it with libfpscope_inject.so preloaded (fpscope run)\n");
    return 2;
  }
  mpt_log_text("who", "before");
  float x = 1.0f;
  mpt_tensor t{};
  t.data = &x;
  t.name = "x";
  t.ndim = 1;
  t.shape[0] = 1;
  t.dtype = MPT_DTYPE_F32;
  t.device = MPT_DEVICE_CPU;
  if (end(begin("small", &t, 1, nullptr, 1), &t, 1, 0) != 0) return 3;

  fpscope_op* pending = begin("pending", &t, 1, nullptr, 1);  // ended after tracing stopped
  if (pending == nullptr) return 9;
  const std::vector<mpt_tensor> many(std::size_t{1} << 20, t);  // 88 MiB of descriptors
  rlimit old{};
  if (getrlimit(RLIMIT_AS, &old) != 0) return 4;
  long pages = 0;
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr || std::fscanf(statm, "%ld", &pages) != 1) return 5;
  std::fclose(statm);
  rlimit tight = old;  // 32 MiB more address space than now: too little for a copy of `many`
  tight.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{32} << 20);
  if (setrlimit(RLIMIT_AS, &tight) != 0) return 6;  // the test skips: a hard limit is in the way
  fpscope_op* op = begin("huge", many.data(), static_cast<int32_t>(many.size()), nullptr, 1);
  setrlimit(RLIMIT_AS, &old);
  if (op != nullptr) return 7;  // the copy cannot have been made
  if (end(op, &t, 1, 0) != 0) return 8;
  if (end(pending, &t, 1, 0) != 0) return 10;  // ends untraced (and is freed)
  mpt_log_text("who", "after");  // tracing has stopped: not recorded
  return 0;
}
