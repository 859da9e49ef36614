// Collective kernels of a multi-process (data-parallel) run. allreduce_sum replaces each tensor with
// its sum over the ranks, in the tensor's own dtype: the values of every rank are gathered through
// the program's communicator (mpt_set_communicator) and added in rank order, each addition rounded
// to the dtype (fp16 and bf16 as numpy adds them: in fp32, then rounded to nearest even). So every
// rank computes the same bits, and an fp16 sum can overflow where no rank's own value did.
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels.h"
#include "mpt/numerics.h"

namespace mpt {
namespace {

std::mutex g_mutex;
mpt_communicator g_communicator{0, 1, nullptr, nullptr};

mpt_communicator current_communicator() {
  std::lock_guard lock(g_mutex);
  return g_communicator;
}

// Sums size rows of n values (row r at gathered + r * n) into out, in rank order.
template <typename T, typename Load, typename Store>
void sum_rows(const T* gathered, int32_t size, int64_t n, T* out, Load load, Store store) {
  for (int64_t j = 0; j < n; ++j) {
    float acc = load(gathered[j]);
    for (int32_t r = 1; r < size; ++r) acc = load(store(acc + load(gathered[static_cast<int64_t>(r) * n + j])));
    out[j] = store(acc);
  }
}

}  // namespace

void set_communicator(const mpt_communicator* communicator) {
  std::lock_guard lock(g_mutex);
  g_communicator = communicator ? *communicator : mpt_communicator{0, 1, nullptr, nullptr};
}

namespace kernels {

void allreduce_sum(const Launch& l) {
  if (l.n_inputs() < 1 || l.n_outputs() != l.n_inputs())
    l.fail("expected tensors x1..xn and outputs x1..xn (as many outputs as inputs), got " +
           std::to_string(l.n_inputs()) + " input(s) and " + std::to_string(l.n_outputs()) + " output(s)");
  for (int i = 0; i < l.n_inputs(); ++i) {
    TensorArg in = l.input(i, "x"), out = l.output(i, "x");
    l.expect_same_shape(out, in);
    if (out->dtype != in->dtype) l.fail(out.label + ": expected the dtype of " + in.label);
    if (!is_float_dtype(in->dtype) && in->dtype != MPT_DTYPE_I32)
      l.fail(in.label + ": expected a floating-point or i32 tensor, got " + dtype_name(in->dtype));
  }
  const mpt_communicator comm = current_communicator();
  const int32_t size = comm.allgather != nullptr && comm.size > 1 ? comm.size : 1;
  std::vector<unsigned char> gathered;
  for (int i = 0; i < l.n_inputs(); ++i) {
    TensorArg in = l.input(i, "x"), out = l.output(i, "x");
    const int64_t n = in.numel();
    const size_t bytes = static_cast<size_t>(n) * dtype_size(in->dtype);
    if (size == 1) {  // the sum over one rank is the tensor itself
      if (out->data != in->data && bytes != 0) std::memmove(out->data, in->data, bytes);
      continue;
    }
    gathered.resize(bytes * static_cast<size_t>(size));
    if (comm.allgather(comm.context, in->data, gathered.data(), bytes) != 0) {
      throw KernelFailure{MPT_ERR_COMMUNICATION,
                          std::string(l.kernel()) + ": the communicator's allgather failed for " + in.label +
                              " (rank " + std::to_string(comm.rank) + " of " + std::to_string(size) + ")"};
    }
    switch (in->dtype) {
      case MPT_DTYPE_F32:
        sum_rows(reinterpret_cast<const float*>(gathered.data()), size, n, static_cast<float*>(out->data),
                 [](float v) { return v; }, [](float v) { return v; });
        break;
      case MPT_DTYPE_F16:
        sum_rows(reinterpret_cast<const uint16_t*>(gathered.data()), size, n, static_cast<uint16_t*>(out->data),
                 f16_to_f32, f32_to_f16);
        break;
      case MPT_DTYPE_BF16:
        sum_rows(reinterpret_cast<const uint16_t*>(gathered.data()), size, n, static_cast<uint16_t*>(out->data),
                 bf16_to_f32, f32_to_bf16);
        break;
      case MPT_DTYPE_F64: {
        const auto* rows = reinterpret_cast<const double*>(gathered.data());
        auto* o = static_cast<double*>(out->data);
        for (int64_t j = 0; j < n; ++j) {
          double acc = rows[j];
          for (int32_t r = 1; r < size; ++r) acc += rows[static_cast<int64_t>(r) * n + j];
          o[j] = acc;
        }
        break;
      }
      default: {  // i32: counts, summed exactly (wrapping as two's complement)
        const auto* rows = reinterpret_cast<const int32_t*>(gathered.data());
        auto* o = static_cast<int32_t*>(out->data);
        for (int64_t j = 0; j < n; ++j) {
          uint32_t acc = static_cast<uint32_t>(rows[j]);
          for (int32_t r = 1; r < size; ++r) acc += static_cast<uint32_t>(rows[static_cast<int64_t>(r) * n + j]);
          o[j] = static_cast<int32_t>(acc);
        }
        break;
      }
    }
  }
}

}  // namespace kernels
}  // namespace mpt
