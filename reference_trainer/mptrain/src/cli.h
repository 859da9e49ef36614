// The command line of mptrain: CLI11 options into a TrainConfig, with every value checked so a bad
// one stops the program before any data is read (exit code 2).
#pragma once

#include "config.h"

#include <optional>

namespace mptrain {

struct ParsedCommandLine {
  std::optional<TrainConfig> config;  // empty when the program should exit with `exit_code`
  int exit_code = 0;                  // 0 after --help, 2 after a usage error
};

ParsedCommandLine parse_command_line(int argc, char** argv);

// Parses "none", "static:N" or "dynamic" into `scale` (throws UsageError).
void parse_loss_scale(const std::string& text, LossScaleConfig& scale);

}  // namespace mptrain
