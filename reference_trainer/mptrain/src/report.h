// What a run reports: its configuration (to tools through mpt_log_text, and in the metrics), the
// closing summary on stdout, and the --metrics-json file.
#pragma once

#include "config.h"
#include "model.h"
#include "runtime.h"
#include "trainer.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace mptrain {

using ConfigItems = std::vector<std::pair<std::string, std::string>>;

ConfigItems describe_config(const TrainConfig& config, const PrecisionPolicy& policy, const Model& model);

// Sends every item through mpt_log_text().
void log_config(const ConfigItems& items);

// Test accuracy, mean step time, peak memory per category.
void print_summary(const RunResult& result);

nlohmann::json metrics_json(const ConfigItems& config, const RunResult& result, const Runtime& rt);

// Writes the JSON; throws UsageError when the file cannot be written.
void write_metrics(const std::string& path, const nlohmann::json& metrics);

}  // namespace mptrain
