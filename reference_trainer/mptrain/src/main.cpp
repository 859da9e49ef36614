// mptrain: trains the reference CNN or MLP on FashionMNIST in fp32, fp16, bf16 or mixed precision,
// with every kernel launched through libmpt_kernels.so so a tool can watch it.
// Exit codes: 0 success; 1 a kernel failed; 2 bad usage, missing data or no usable device.
#include "cli.h"
#include "dataset.h"
#include "distributed.h"
#include "errors.h"
#include "model.h"
#include "report.h"
#include "trainer.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

namespace mptrain {
namespace {

PrecisionPolicy make_policy(const TrainConfig& config) {
  PrecisionPolicy policy(config.precision);
  if (!config.bf16_ops_file.empty()) policy.set_low_precision_ops(read_op_list_file(config.bf16_ops_file));
  if (!config.fp32_ops_file.empty()) policy.set_fp32_ops(read_op_list_file(config.fp32_ops_file));
  for (const std::string& op : policy.lists().low_precision) {
    if (policy.lists().fp32.count(op) != 0) {
      throw UsageError(fmt::format("op '{}' is on both the low-precision and the fp32 list; remove it from one", op));
    }
  }
  policy.set_layer_overrides(config.layer_precision);
  return policy;
}

int run(const TrainConfig& config) {
  PrecisionPolicy policy = make_policy(config);
  mpt_set_num_threads(config.threads);
  ImageSet train = load_image_set(config.data_dir, "train", config.train_subset);
  ImageSet test = load_image_set(config.data_dir, "t10k", config.test_subset);
  if (config.image_size < train.rows) {
    throw UsageError(fmt::format("--image-size {} is smaller than the dataset's {} pixels", config.image_size, train.rows));
  }
  Runtime rt(config.device == "cuda" ? MPT_DEVICE_CUDA : MPT_DEVICE_CPU);
  Model model(config, policy, rt);
  ConfigItems items = describe_config(config, policy, model);
  log_config(items);
  if (config.verbose) fmt::print(stderr, "precision plan:\n{}", model.precision_plan());
  RunResult result = train_and_evaluate(config, policy, rt, model, train, test);
  if (config.rank != 0) return 0;  // a data-parallel run speaks through rank 0
  print_summary(result);
  if (!config.metrics_json.empty()) write_metrics(config.metrics_json, metrics_json(items, result, rt));
  return 0;
}

// The exit status of a failure, said on stderr (with the rank in a data-parallel run).
int report_failure(const TrainConfig& config, const std::exception& e) {
  const std::string who = config.world_size > 1 ? fmt::format("mptrain (rank {})", config.rank) : "mptrain";
  if (dynamic_cast<const UsageError*>(&e) || dynamic_cast<const DataError*>(&e)) {
    fmt::print(stderr, "{}: {}\n", who, e.what());
    return 2;
  }
  if (dynamic_cast<const DeviceError*>(&e)) {
    fmt::print(stderr, "{}: {}\n(run with --device cpu, or use a build and machine with CUDA)\n", who, e.what());
    return 2;
  }
  if (dynamic_cast<const KernelError*>(&e)) {
    fmt::print(stderr, "{}: {}\n", who, e.what());
    return 1;
  }
  fmt::print(stderr, "{}: unexpected error: {}\n", who, e.what());
  return 1;
}

}  // namespace
}  // namespace mptrain

int main(int argc, char** argv) {
  using namespace mptrain;
  ParsedCommandLine parsed = parse_command_line(argc, argv);
  if (!parsed.config) return parsed.exit_code;
  TrainConfig& config = *parsed.config;
  std::optional<DataParallel> parallel;
  try {
    parallel.emplace(config);
  } catch (const std::exception& e) {
    return report_failure(config, e);
  }
  try {
    return run(config);
  } catch (const std::exception& e) {
    const int status = report_failure(config, e);
    // The other ranks would wait for this one in their next collective: end them all.
    if (config.world_size > 1) parallel->abort(status);
    return status;
  }
}
