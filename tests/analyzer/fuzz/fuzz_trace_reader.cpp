// libFuzzer target: feeds arbitrary bytes to the trace reader as a file and runs every report over
// whatever opens. Only TraceError may come out; crashes, leaks and undefined behaviour are bugs.
// Build with clang (CC=clang CXX=clang++), then: fuzz_trace_reader -max_len=262144 CORPUS_DIR
// (seed the corpus with small traces from fpscope-gen-trace).
#include "fpscope/analysis.h"
#include "temp_path.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fpscope::analysis;
  static const fpscope::test::TempDir dir("fpscope-fuzz");  // one file, rewritten for each input
  static const std::string path = (dir / "input.sqlite").string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto trace = Trace::open(path);
    summary(*trace);
    nonfinite(*trace);
    ranges(*trace);
    steps(*trace);
    loss_scale(*trace);
    memory(*trace);
    memory_timeline(*trace, 100);
    if (auto b = time_bounds(*trace)) timeline(*trace, b->first, b->second, 1000);
    advise(*trace);
  } catch (const TraceError&) {
  }
  std::remove(path.c_str());
  return 0;
}
