// The lineage walk behind why() (why.cpp): from the launch that made the first NaN/Inf back through
// the launches that wrote its inputs, what each write did to the range of the tensor it wrote.
//
// Everything is read from what the trace already holds: tensor rows carry the allocation they live
// in (tensor_uid), so the launch that last wrote an input is the latest earlier launch with an
// output in the same allocation, and the tensor's previous version is the latest row of that
// allocation before it (the writer's own input when it updated the tensor in place). Internal to
// the analyzer.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fpscope/analysis.h"
#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/tensor_role.h"
#include "sqlite_db.h"
#include "trace_impl.h"

namespace fpscope::analysis::lineage {

inline constexpr int kMaxDepth = 6;
inline constexpr std::size_t kMaxLinks = 24;
inline constexpr double kJumpLog2 = 4;  // a range that grew 16-fold or more at one write is unusual

struct Row {
  int64_t id = 0, kernel_id = 0;
  std::string role, name, dtype;
  std::optional<int64_t> uid;
  std::optional<double> absmax, min_nonzero;
  int64_t zero = 0, count = 0, nonfinite = 0;
  std::optional<double> min, max;  // finite values only
  int64_t slot = 0;
};

struct Launch {
  int64_t id = 0;
  std::string kernel;
  std::optional<std::string> layer, phase;
  std::optional<int64_t> step;
};

inline std::optional<Format> format_of_dtype(const std::string& dtype) {
  if (dtype == "f16") return Format::F16;
  if (dtype == "bf16") return Format::BF16;
  return std::nullopt;
}

// A floating dtype whose values fpscope measures (contract::is_measured), by its name in traces.
inline bool is_float(const std::string& dtype) {
  for (int d = 0; d < contract::kDtypeCount; ++d)
    if (dtype == contract::kDtypeNames[static_cast<std::size_t>(d)])
      return contract::is_measured(static_cast<contract::Dtype>(d));
  return false;
}

inline std::string where_text(const std::string& kernel, const std::optional<std::string>& layer) {
  return layer ? kernel + " (" + *layer + ")" : kernel;
}

inline std::string step_word(const std::optional<int64_t>& step) { return step ? "step " + std::to_string(*step) : "no step"; }

inline std::string binades(double log2) { return fmt::format("2^{:.1f}", log2); }

// A tensor row of the trace, as the walk reads it.
Row read_row(const sql::Statement& st);

class Walker {
 public:
  explicit Walker(const Trace& trace) : trace_(trace), db_(detail::db(trace)) { read_filters(); }

  Launch launch(int64_t id);

  std::vector<Row> rows(int64_t kernel_id, contract::Role role);

  // The first tensor row `tail` (joins, WHERE, ORDER BY) selects, with ?1 and ?2 bound.
  std::optional<Row> first_row(const char* tail, int64_t p1, int64_t p2);

  // The latest measured output in allocation `uid` before launch `before`.
  std::optional<Row> writer(int64_t uid, int64_t before);

  // The allocation's contents before launch `writer` wrote it: the writer's own input row (an
  // update in place), else the latest row of an earlier launch (its output before its input).
  std::optional<Row> previous(int64_t uid, int64_t writer);

  // A fresh allocation has no earlier contents: its previous version is then what the same kernel
  // (name, layer and phase) wrote in the same output slot at its latest earlier launch.
  std::optional<Row> previous_of_kernel(const Row& written);

  std::optional<int64_t> category(int64_t uid);

  // Launches left unmeasured between two launches, with their step span.
  struct Gap {
    int64_t launches = 0;
    std::optional<int64_t> first_step, last_step;
  };
  // A step filter leaves whole steps unmeasured; inside a measured step, unmeasured launches are
  // the producer's own choice (a PyTorch view writes nothing) unless an --ops filter left kernels out.
  Gap unmeasured_between(int64_t after, int64_t before);

  // The inputs of launch `kernel_id` and, through their writers, what they came from.
  void walk(int64_t kernel_id, int depth, WhyReport& report);

  const Trace& trace() const { return trace_; }
  const sql::Database& db() const { return db_; }

 private:
  // A step, kernel or layer filter leaves launches unmeasured whose outputs the trace cannot see.
  void read_filters();

  const Trace& trace_;
  const sql::Database& db_;
  bool filtered_ = false, ops_filtered_ = false;
  std::set<int64_t> measured_steps_;  // steps with a measured launch (with a step filter)
  std::set<int64_t> visited_;
};

}  // namespace fpscope::analysis::lineage
