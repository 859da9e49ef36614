// Human-readable numbers for fpscope's front ends: byte sizes in binary units, durations,
// percentages and powers of two, formatted the same way in the command line and the GUI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fpscope::analysis {

std::string human_bytes(int64_t bytes);          // "512 B", "1.50 KiB", "23.4 MiB", "-2.00 GiB"
std::string human_duration(int64_t ns);          // "850 ns", "12.3 us", "4.56 ms", "1.23 s"
std::string human_percent(double share);         // share 0.1234 -> "12.34%"; tiny nonzero -> "<0.01%"
std::string human_number(double value);          // shortest form: "65504", "6.1e-05", "0.125"
std::string human_number_exact(double value);    // shortest text that reads back to the same double
std::string human_scale(double scale);          // a power of two as "2^16", else "{:g}"
std::string human_optional(const std::optional<double>& value, const char* missing = "-");

}  // namespace fpscope::analysis
