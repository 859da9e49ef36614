// Parser for --fault (see fault_spec.h).
#include "fault_spec.h"

#include "errors.h"

#include <fmt/format.h>

#include <charconv>

namespace mptrain {

namespace {

int64_t parse_count(const std::string& text, const std::string& spec, const char* what) {
  int64_t value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw UsageError(fmt::format("--fault '{}': {} '{}' is not a non-negative integer", spec, what, text));
  }
  return value;
}

}  // namespace

FaultSpec parse_fault_spec(const std::string& text) {
  const std::string usage = "expected KIND@LAYER:STEP[:INDEX] with KIND nan, inf or -inf (e.g. nan@fc1:5)";
  auto at = text.find('@');
  if (at == std::string::npos) throw UsageError(fmt::format("--fault '{}': {}", text, usage));
  FaultSpec spec;
  const std::string kind = text.substr(0, at);
  if (kind == "nan") {
    spec.kind = 0;
  } else if (kind == "inf" || kind == "+inf") {
    spec.kind = 1;
  } else if (kind == "-inf") {
    spec.kind = 2;
  } else {
    throw UsageError(fmt::format("--fault '{}': unknown kind '{}'; {}", text, kind, usage));
  }
  std::string rest = text.substr(at + 1);
  auto colon = rest.find(':');
  if (colon == std::string::npos || colon == 0) throw UsageError(fmt::format("--fault '{}': {}", text, usage));
  spec.layer = rest.substr(0, colon);
  rest = rest.substr(colon + 1);
  auto second = rest.find(':');
  spec.step = parse_count(rest.substr(0, second), text, "step");
  if (second != std::string::npos) spec.index = parse_count(rest.substr(second + 1), text, "index");
  return spec;
}

}  // namespace mptrain
