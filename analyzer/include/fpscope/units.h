// Human-readable numbers for fpscope's front ends: byte sizes in binary units, durations,
// percentages, counts and powers of two. The one place they are formatted: the command line, the
// HTML export and the GUI all call these, so a number reads the same everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fpscope::analysis {

std::string human_bytes(int64_t bytes);          // "512 B", "1.50 KiB", "23.4 MiB", "-2.00 GiB"
std::string human_bytes_delta(int64_t bytes);    // with an explicit sign: "+1.50 MiB", "-512 B", "0 B"
std::string human_percent_change(double from, double to);  // "+12.5%", "-3.0%"; "n/a" when from is 0
std::string human_count(int64_t n);              // thousands separated: "10,000,000"
std::string human_points(double delta);          // a change of a percentage: "-0.30 points"
std::string human_duration(int64_t ns);          // "850 ns", "12.3 us", "4.56 ms", "1.23 s"
std::string human_percent(double share);         // share 0.1234 -> "12.34%"; tiny nonzero -> "<0.01%"
std::string human_number(double value);          // 4 significant digits: "6.55e+04", "6.1e-05", "0.125"; "NaN", "+Inf", "-Inf"
std::string human_number_exact(double value);    // shortest text that reads back to the same double
std::string human_scale(double scale);          // a power of two as "2^16", else "{:g}"
// Where something happened: "at step 12", or "outside the training steps" for no step (set-up,
// the final evaluation).
std::string human_step_place(std::optional<int64_t> step);
// A launch's kernels.id as its process numbers it: "41", or "41 of process 1" for the launches of
// a multi-process trace's other processes (their ids carry processes.id << 40).
std::string human_launch(int64_t kernel_id);
std::string human_optional(const std::optional<double>& value, const char* missing = "-");

}  // namespace fpscope::analysis
