// fpscope-gen-trace: writes a synthetic trace of the reference CNN (see synthetic_trace.h), for
// tests and benchmarks; e.g. `fpscope-gen-trace -o big.sqlite --tensors 10000000`.
#include "synthetic_trace.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) {
  fpscope::synthetic::Options o;
  std::string out;
  std::optional<int64_t> nan_at, overflow_at;
  bool no_finalize = false;
  CLI::App app{"fpscope-gen-trace: writes a synthetic fpscope trace (made-up but consistent numbers)"};
  app.add_option("-o,--output", out, "trace file to write (replaced)")->required();
  app.add_option("--steps", o.steps, "training steps")->capture_default_str();
  app.add_option("--tensors", o.tensor_target, "write about this many tensor records (overrides --steps)");
  app.add_option("--precision", o.precision, "fp32, fp16, bf16, amp-fp16 or amp-bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "amp-fp16", "amp-bf16"}))->capture_default_str();
  app.add_option("--loss-scale", o.loss_scale, "none, dynamic or static:N")->capture_default_str();
  app.add_option("--scale-init", o.scale_init, "initial loss scale")->capture_default_str();
  app.add_option("--growth-interval", o.growth_interval, "finite steps before the scale grows")->capture_default_str();
  app.add_option("--nan-at", nan_at, "fc1's forward output turns NaN at this step");
  app.add_option("--overflow-at", overflow_at, "fc1's weight gradient overflows at this step");
  app.add_option("--activation-scale", o.activation_scale, "multiplies forward magnitudes")->capture_default_str();
  app.add_option("--end-reason", o.end_reason, "meta end_reason: exited, signaled, running (an unfinished trace)")->capture_default_str();
  app.add_flag("--no-finalize", no_finalize, "leave out the summary tables of trace_finalize.sql");
  app.add_flag("--basic-stats", o.basic_stats, "leave format counts and histograms NULL");
  CLI11_PARSE(app, argc, argv);
  o.nan_at_step = nan_at;
  o.overflow_at_step = overflow_at;
  o.finalize = !no_finalize && o.end_reason != "running";
  try {
    const auto start = std::chrono::steady_clock::now();
    const int64_t tensors = fpscope::synthetic::write_trace(out, o);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << fmt::format("fpscope-gen-trace: wrote {} ({} tensor records) in {:.1f} s\n", out, tensors, seconds);
  } catch (const std::exception& e) {
    std::cerr << "fpscope-gen-trace: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
