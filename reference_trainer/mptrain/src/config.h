// Everything a run is configured with, filled from the command line by cli.cpp and read by the
// rest of the program. Plain data: defaults live here, validation in cli.cpp.
#pragma once

#include "fault_spec.h"
#include "precision_policy.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace mptrain {

enum class LossScaleKind { kNone, kStatic, kDynamic };

struct LossScaleConfig {
  LossScaleKind kind = LossScaleKind::kNone;
  double init = 65536.0;   // static value, or dynamic initial value
  double growth = 2.0;
  double backoff = 0.5;
  int64_t interval = 2000;
};

enum class OptimizerKind { kSgd, kAdamW };

// The learning rate at each update (`--lr-schedule`): constant; exponential, multiplied by gamma
// after every update; cosine, from lr down to 0 over `steps` updates and 0 after them.
enum class LrScheduleKind { kConstant, kExponential, kCosine };
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double gamma = 1.0;  // exponential
  int64_t steps = 0;   // cosine
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  LrSchedule schedule;
  std::string schedule_text = "constant";
  double momentum = 0.9;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  DType state_dtype = MPT_DTYPE_F32;
  bool stochastic_rounding = false;
};

struct TrainConfig {
  std::string model = "cnn";
  int64_t hidden = 4096;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int image_size = 28;
  int64_t train_subset = 0;  // 0: all
  int64_t test_subset = 0;
  uint64_t seed = 1;
  int threads = 1;
  int batch_size = 32;
  int epochs = 1;
  std::string device = "cpu";

  PrecisionMode precision = PrecisionMode::kFp32;
  std::string bf16_ops_file;
  std::string fp32_ops_file;
  std::map<std::string, DType> layer_precision;
  bool partials_fp16 = false;
  Fp8Config fp8;

  LossScaleConfig loss_scale;
  std::string loss_scale_text = "none";
  OptimizerConfig optimizer;

  std::optional<FaultSpec> fault;
  std::optional<int> fault_rank;  // plant the fault on this rank only (data-parallel runs)
  std::string metrics_json;
  bool verbose = false;

  // Data parallel over MPI: each rank trains on its share of every global batch (--batch-size) and
  // the gradients are all-reduced (allreduce_sum). rank and world_size are filled at start-up.
  bool data_parallel = false;
  int rank = 0;
  int world_size = 1;
};

}  // namespace mptrain
