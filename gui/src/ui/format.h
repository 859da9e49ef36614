// Text formatting shared by every view: byte sizes, durations, counts and floating-point values in
// the forms a reader scans quickly (aligned units, no needless digits).
#pragma once

#include <cstdint>
#include <string>

namespace fpscope::gui {

// "512 B", "1.50 KiB", "23.4 MiB": binary units, three significant digits.
std::string format_bytes(double bytes);
// Signed difference in bytes with an explicit sign: "+1.50 MiB", "-512 B", "0 B".
std::string format_bytes_delta(double bytes);
// "+12.5%" / "-3.0%"; "n/a" when the base is zero.
std::string format_percent_change(double from, double to);
// A duration in nanoseconds with a unit that keeps 3-4 significant digits: "850 ns", "12.3 us".
std::string format_duration(double ns);
// A count with thousands separators: "10,000,000".
std::string format_count(int64_t n);
// A floating-point value in %.4g style, with "NaN", "+Inf", "-Inf" spelled out.
std::string format_value(double v);

}  // namespace fpscope::gui
