// The training loop and evaluation (see trainer.h).
#include "trainer.h"

#include "loss_scaler.h"
#include "nvtx_ranges.h"
#include "optimizer.h"
#include "progress.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <iostream>

namespace mptrain {

namespace {

// A batch as the model receives it: images [n,1,S,S] fp32 and labels [n] i32 on the run's
// device (filled on the host and moved with the `copy` kernel on a GPU).
struct Batch {
  Tensor images;
  Tensor labels;
  int64_t size = 0;
};

Batch load_batch(Runtime& rt, const ImageSet& set, const std::vector<uint32_t>& order, int64_t begin,
                 int64_t n, int image_size) {
  const Shape image_shape{n, 1, image_size, image_size};
  const bool host = rt.device() == MPT_DEVICE_CPU;
  Tensor images = Tensor::allocate(host ? "input" : "input.host", image_shape, MPT_DTYPE_F32, MPT_DEVICE_CPU, MPT_CAT_DATA);
  Tensor labels = Tensor::allocate(host ? "labels" : "labels.host", {n}, MPT_DTYPE_I32, MPT_DEVICE_CPU, MPT_CAT_DATA);
  fill_batch(set, order, begin, n, image_size, images.data_as<float>(), labels.data_as<int32_t>());
  mpt_host_written(images.data(), images.bytes());
  mpt_host_written(labels.data(), labels.bytes());
  if (host) return {images, labels, n};
  Batch batch{rt.alloc("input", image_shape, MPT_DTYPE_F32, MPT_CAT_DATA), rt.alloc("labels", {n}, MPT_DTYPE_I32, MPT_CAT_DATA), n};
  rt.copy(images, batch.images);
  rt.copy(labels, batch.labels);
  return batch;
}

// Correct predictions of the batch; of the global batch when `all_ranks` (summed over the ranks).
int64_t count_correct(Runtime& rt, const Tensor& logp, const Tensor& labels, bool all_ranks) {
  Tensor correct = rt.alloc("accuracy.correct", {1}, MPT_DTYPE_I32, MPT_CAT_WORKSPACE);
  rt.launch("accuracy_count", {&logp, &labels}, {&correct});
  if (all_ranks) rt.launch("allreduce_sum", {&correct}, {&correct});
  return static_cast<int64_t>(rt.read_scalar(correct));
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& config, const PrecisionPolicy& policy, Runtime& rt, Model& model)
      : config_(config), policy_(policy), rt_(rt), model_(model), params_(model.params()),
        scaler_(config.loss_scale, rt), optimizer_(config.optimizer, config.seed, rt, params_) {}

  void run_epoch(int epoch, const ImageSet& train, EpochOrder& order, RunResult& result);
  double evaluate(const ImageSet& test);
  double loss_scale() { return scaler_.current(rt_); }

 private:
  struct StepOutcome {
    double loss = 0.0;
    int64_t correct = 0;
  };
  // `global_batch`: the images of the step over all ranks (batch.size without --data-parallel).
  StepOutcome step(const Batch& batch, int64_t global_batch, int64_t index, RunResult& result);
  bool parallel() const { return config_.data_parallel; }

  const TrainConfig& config_;
  const PrecisionPolicy& policy_;
  Runtime& rt_;
  Model& model_;
  std::vector<Param*> params_;
  LossScaler scaler_;
  Optimizer optimizer_;
  int64_t updates_ = 0;  // optimizer steps taken (skipped steps excluded)
  double step_seconds_ = 0.0;
};

TrainingLoop::StepOutcome TrainingLoop::step(const Batch& batch, int64_t global_batch, int64_t index,
                                             RunResult& result) {
  NvtxRange step_range(RangeCategory::kStep, "step", index);
  StepOutcome outcome;
  const double scale = scaler_.current(rt_);
  {
    NvtxRange phase(RangeCategory::kPhase, fpscope::contract::kPhaseForward);
    Tensor input = rt_.cast(batch.images, policy_.input_dtype());
    const bool faulty_rank = !config_.fault_rank || *config_.fault_rank == config_.rank;
    const FaultSpec* fault = config_.fault && config_.fault->step == index && faulty_rank ? &*config_.fault : nullptr;
    Tensor logp = model_.forward(rt_, input, fault);
    Tensor loss = model_.loss(rt_, logp, batch.labels, global_batch);
    if (parallel()) {
      // Each rank's loss is its share of the global batch's mean: their sum is the mean.
      NvtxRange range(RangeCategory::kLayer, "loss");
      rt_.launch("allreduce_sum", {&loss}, {&loss});
    }
    outcome.loss = rt_.read_scalar(loss);
    outcome.correct = count_correct(rt_, logp, batch.labels, parallel());
  }
  {
    NvtxRange phase(RangeCategory::kPhase, fpscope::contract::kPhaseBackward);
    model_.backward(rt_, batch.labels, scaler_.scale(), global_batch);
    if (parallel()) {
      // Every rank's gradients are its share of the global batch's: their sum, in the gradients'
      // own dtype, is the gradient of the global batch (and may overflow where no share did).
      TensorRefs grads;
      for (const Param* p : params_) grads.push_back(&p->grad);
      rt_.launch("allreduce_sum", grads, grads);
    }
  }
  model_.release();
  {
    NvtxRange phase(RangeCategory::kPhase, fpscope::contract::kPhaseOptimizer);
    const bool skip = scaler_.unscale_and_check(rt_, params_, parallel());
    if (skip) {
      ++result.skipped_steps;
      if (config_.verbose) fmt::print(stderr, "step {}: gradients hold NaN/Inf at scale {}; step skipped\n", index, scale);
    } else {
      optimizer_.step(rt_, ++updates_);
    }
    scaler_.update(rt_);
  }
  mpt_log_scalar("loss", outcome.loss, index);
  mpt_log_scalar("loss_scale", scale, index);
  if (config_.optimizer.schedule.kind != LrScheduleKind::kConstant && updates_ > 0)
    mpt_log_scalar("lr", learning_rate(config_.optimizer, updates_), index);  // the last update's rate
  mpt_log_scalar("train_accuracy", percent(outcome.correct, batch.size), index);
  result.losses.push_back(outcome.loss);
  result.loss_scales.push_back(scale);
  return outcome;
}

void TrainingLoop::run_epoch(int epoch, const ImageSet& train, EpochOrder& order, RunResult& result) {
  const std::vector<uint32_t>& indices = order.next_epoch();
  const int64_t batch_size = config_.batch_size;
  const int64_t steps = (train.count + batch_size - 1) / batch_size;
  EpochProgress progress(epoch, config_.epochs, steps, config_.rank == 0);
  double loss_sum = 0.0;
  int64_t correct = 0;
  int64_t images = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto start = std::chrono::steady_clock::now();
    const int64_t n = std::min(batch_size, train.count - s * batch_size);
    // A data-parallel rank trains on its share of the global batch: images [n·r/N, n·(r+1)/N).
    // A last batch smaller than the ranks is left out by all of them alike.
    if (n < config_.world_size) continue;
    const int64_t first = n * config_.rank / config_.world_size;
    const int64_t share = n * (config_.rank + 1) / config_.world_size - first;
    Batch batch = load_batch(rt_, train, indices, s * batch_size + first, share, config_.image_size);
    StepOutcome outcome = step(batch, n, result.steps, result);
    step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++result.steps;
    loss_sum += outcome.loss * static_cast<double>(n);
    correct += outcome.correct;  // of the global batch: count_correct sums over the ranks
    images += n;
    progress.update(s, loss_sum / static_cast<double>(images), percent(correct, images), images);
  }
  EpochSummary summary;
  summary.loss = loss_sum / static_cast<double>(images);
  summary.train_accuracy = percent(correct, images);
  summary.images_per_s = progress.finish(summary.loss, summary.train_accuracy, images);
  summary.steps = steps;
  result.epochs.push_back(summary);
  result.step_time_ms = result.steps > 0 ? 1000.0 * step_seconds_ / static_cast<double>(result.steps) : 0.0;
}

double TrainingLoop::evaluate(const ImageSet& test) {
  NvtxRange phase(RangeCategory::kPhase, fpscope::contract::kPhaseEval);
  model_.set_training(false);
  std::vector<uint32_t> order(static_cast<std::size_t>(test.count));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < test.count; begin += config_.batch_size) {
    const int64_t n = std::min<int64_t>(config_.batch_size, test.count - begin);
    Batch batch = load_batch(rt_, test, order, begin, n, config_.image_size);
    Tensor input = rt_.cast(batch.images, policy_.input_dtype());
    Tensor logp = model_.forward(rt_, input, nullptr);
    correct += count_correct(rt_, logp, batch.labels, false);
    model_.release();
  }
  model_.set_training(true);
  return percent(correct, test.count);
}

}  // namespace

RunResult train_and_evaluate(const TrainConfig& config, const PrecisionPolicy& policy, Runtime& rt,
                             Model& model, const ImageSet& train, const ImageSet& test) {
  RunResult result;
  TrainingLoop loop(config, policy, rt, model);
  EpochOrder order(train.count, config.seed);
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  for (int epoch = 0; epoch < config.epochs; ++epoch) loop.run_epoch(epoch, train, order, result);
  result.train_cpu_seconds = process_cpu_seconds() - cpu_start;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.images_per_s = seconds > 0.0 ? static_cast<double>(train.count) * config.epochs / seconds : 0.0;
  result.test_accuracy = loop.evaluate(test);
  mpt_log_scalar("test_accuracy", result.test_accuracy, result.steps);
  result.final_loss_scale = loop.loss_scale();
  return result;
}

}  // namespace mptrain
