// The device results still to come: for each launch with device tensors queued on the GPU, the
// tensors waiting for their statistics (by the token the GPU library hands back), how many are
// outstanding, and the results that arrived before the launch's own records were written. A
// queued output may have followers: inputs of later launches reading the same unwritten bytes,
// queued without a scan of their own, that take the output's result when it comes. It decides
// nothing: the session judges each result (verdict.h) and writes its records. Not thread-safe:
// every call is made under the session's lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fpscope/contract/wire.h"
#include "fpscope/tensor_stats.h"
#include "mpt/abi.h"
#include "output_memo.h"

namespace fpscope::inject {

class DeviceResults {
 public:
  // A device tensor queued on the GPU, waiting for its statistics.
  struct Tensor {
    uint64_t seq = 0;
    wire::Role role = wire::Role::Input;
    uint8_t slot = 0;
    bool recorded = true;  // false: measured only to judge the outputs' origin
    mpt_tensor meta{};     // shape, dtype, id; no data (the memory may be gone); name: `name`
    std::string name;
    // An output whose bytes the memo follows (output_memo.h): its key and the write generation
    // it was queued at (0: not followed), and the inputs queued to take its result.
    OutputMemo::Key key{};
    uint64_t generation = 0;
    std::vector<uint64_t> followers;
  };
  // A launch with tensors still queued.
  struct Launch {
    bool written = false;       // its records are in the ring; results that come earlier wait
    bool inputs_finite = true;  // no input brought damage so far
    int outstanding = 0;
    std::string kernel, where;  // for allow rules and a trap message
    std::optional<std::string> layer;
    std::vector<std::pair<Tensor, TensorStats>> early;
  };

  // A launch whose device tensors are about to be queued.
  void begin(uint64_t seq, std::string kernel, std::string where, const char* layer);
  // Queues `t` for its launch; returns the token the GPU library will hand back with its result.
  uint64_t queue(Tensor t);
  // The tensor of `token` gets no result (the GPU library refused it, or the output it followed
  // got none).
  void unqueue(uint64_t token);
  // A launch given up (its kernel threw): results that come for it are dropped.
  void drop(uint64_t seq) { launches_.erase(seq); }
  // The launch's records are written, its host inputs judged: the results that came early, to
  // be handled now in their order.
  std::vector<std::pair<Tensor, TensorStats>> written(uint64_t seq, bool host_inputs_finite);
  // The tensor a result is for, taken out of the queue (nullopt: unknown token).
  std::optional<Tensor> take(uint64_t token);
  // The queued tensor of `token`, still waiting for its result; nullptr when it is not.
  Tensor* queued(uint64_t token);
  // The launch a result belongs to; nullptr when it was dropped or is complete.
  Launch* launch(uint64_t seq);
  // A result of `seq` was handled (its records written): one fewer outstanding.
  void handled(uint64_t seq);
  // Forgets a launch whose records are written and that has no result outstanding.
  void settle(uint64_t seq);
  // Whether a result for an input of `seq` is still queued (another thread may hold it taken).
  bool input_queued(uint64_t seq) const;
  // Whether no result is awaited at all.
  bool none_queued() const { return tensors_.empty(); }

 private:
  std::unordered_map<uint64_t, Tensor> tensors_;   // by token
  std::unordered_map<uint64_t, Launch> launches_;  // by seq
  uint64_t next_token_ = 1;
};

}  // namespace fpscope::inject
