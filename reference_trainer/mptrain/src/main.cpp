// mptrain: trains the reference CNN or MLP on FashionMNIST in fp32, fp16, bf16 or mixed precision,
// with every kernel launched through libmpt_kernels.so so a tool can watch it.
// Exit codes: 0 success; 1 a kernel failed; 2 bad usage, missing data or no usable device.
#include "cli.h"
#include "dataset.h"
#include "errors.h"
#include "model.h"
#include "report.h"
#include "trainer.h"

#include <fmt/format.h>

#include <cstdio>

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
  print_summary(result);
  if (!config.metrics_json.empty()) write_metrics(config.metrics_json, metrics_json(items, result, rt));
  return 0;
}

}  // namespace
}  // namespace mptrain

int main(int argc, char** argv) {
  using namespace mptrain;
  ParsedCommandLine parsed = parse_command_line(argc, argv);
  if (!parsed.config) return parsed.exit_code;
  try {
    return run(*parsed.config);
  } catch (const UsageError& e) {
    fmt::print(stderr, "mptrain: {}\n", e.what());
    return 2;
  } catch (const DataError& e) {
    fmt::print(stderr, "mptrain: {}\n", e.what());
    return 2;
  } catch (const DeviceError& e) {
    fmt::print(stderr, "mptrain: {}\n(run with --device cpu, or use a build and machine with CUDA)\n", e.what());
    return 2;
  } catch (const KernelError& e) {
    fmt::print(stderr, "mptrain: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mptrain: unexpected error: {}\n", e.what());
    return 1;
  }
}
