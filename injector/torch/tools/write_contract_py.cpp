// Writes a Python file of the PyTorch front end from its template, replacing each @NAME@ with the
// value the C and C++ headers give that fact: the kernel ABI's enums and tensor layout
// (mpt/abi.h), the injector's C API (fpscope/inject_api.h), the NVTX conventions
// (fpscope/contract/nvtx.h), the environment `fpscope run` sets
// (fpscope/contract/environment.h) and how a trap's message begins (fpscope/contract/run_end.h).
// So each fact is written once, in C or C++, and the Python front end reads the same values.
//
//   fpscope_write_contract_py TEMPLATE OUTPUT
//
// A name in the template (@CAPITALS@) that is not known here stops the build (exit status 1).
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "fpscope/contract/environment.h"
#include "fpscope/contract/number_formats.h"
#include "fpscope/contract/nvtx.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/contract/tensor_names.h"
#include "fpscope/contract/torch_operators.h"
#include "fpscope/inject_api.h"
#include "mpt/abi.h"

namespace {

namespace contract = fpscope::contract;

// The layout the front end packs tensors in with Python's struct module: it must be mpt_tensor's.
static_assert(sizeof(void*) == 8 && sizeof(const char*) == 8);
static_assert(offsetof(mpt_tensor, data) == 0 && offsetof(mpt_tensor, id) == 8 &&
              offsetof(mpt_tensor, name) == 16 && offsetof(mpt_tensor, shape) == 24);
static_assert(offsetof(mpt_tensor, ndim) == 24 + 8 * MPT_MAX_DIMS &&
              offsetof(mpt_tensor, dtype) == offsetof(mpt_tensor, ndim) + 4 &&
              offsetof(mpt_tensor, device) == offsetof(mpt_tensor, dtype) + 4 &&
              offsetof(mpt_tensor, reserved) == offsetof(mpt_tensor, device) + 4 &&
              sizeof(mpt_tensor) == offsetof(mpt_tensor, reserved) + 4);

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The dtypes fpscope measures (contract::is_measured), as a Python tuple of mpt_dtype values.
std::string measured_dtypes() {
  std::string tuple = "(";
  for (int d = 0; d < contract::kDtypeCount; ++d)
    if (contract::is_measured(static_cast<contract::Dtype>(d))) tuple += std::to_string(d) + ", ";
  return tuple + ")";
}

// A list of names as a Python tuple of bytes.
template <size_t N>
std::string bytes_tuple(const std::string_view (&names)[N]) {
  std::string tuple = "(";
  for (std::string_view name : names) tuple += "b" + quoted(std::string(name)) + ", ";
  return tuple + ")";
}

std::map<std::string, std::string> facts() {
  const auto n = [](long long v) { return std::to_string(v); };
  return {
      {"API_VERSION", n(FPSCOPE_INJECT_API_VERSION)},
      {"MEASURE_INPUTS", n(FPSCOPE_MEASURE_INPUTS)},
      {"MEASURE_OUTPUTS", n(FPSCOPE_MEASURE_OUTPUTS)},
      {"TRAPPED", n(FPSCOPE_TRAPPED)},
      {"TRAP_MESSAGE_PREFIX", quoted(std::string(contract::kTrapMessagePrefix))},
      {"NAME_SEPARATOR", quoted(std::string(contract::kNameSeparator))},
      {"UNNAMED_OUTPUT_PREFIX", quoted(std::string(contract::kUnnamedOutputPrefix))},
      {"MAX_DIMS", n(MPT_MAX_DIMS)},
      // data, id, name, shape, ndim, dtype, device, reserved; little-endian, no padding.
      {"TENSOR_FORMAT", quoted("<QQQ" + std::to_string(MPT_MAX_DIMS) + "qiiii")},
      {"DTYPE_F32", n(MPT_DTYPE_F32)},
      {"DTYPE_F16", n(MPT_DTYPE_F16)},
      {"DTYPE_BF16", n(MPT_DTYPE_BF16)},
      {"DTYPE_I32", n(MPT_DTYPE_I32)},
      {"DTYPE_I64", n(MPT_DTYPE_I64)},
      {"DTYPE_U8", n(MPT_DTYPE_U8)},
      {"DTYPE_F64", n(MPT_DTYPE_F64)},
      {"DTYPE_E4M3", n(MPT_DTYPE_E4M3)},
      {"DTYPE_E5M2", n(MPT_DTYPE_E5M2)},
      {"DTYPE_E4M3FNUZ", n(MPT_DTYPE_E4M3FNUZ)},
      {"DTYPE_E5M2FNUZ", n(MPT_DTYPE_E5M2FNUZ)},
      {"DTYPE_E8M0", n(MPT_DTYPE_E8M0)},
      {"DTYPE_E2M1", n(MPT_DTYPE_E2M1)},
      {"MEASURED_DTYPES", measured_dtypes()},
      {"UNINITIALIZED_OPERATORS", bytes_tuple(contract::kUninitializedOperators)},
      {"UNANNOTATED_VIEW_OPERATORS", bytes_tuple(contract::kUnannotatedViewOperators)},
      {"UNMEASURED_NAMESPACES", bytes_tuple(contract::kUnmeasuredNamespaces)},
      {"UNWATCHED_NAMESPACES", bytes_tuple(contract::kUnwatchedNamespaces)},
      {"DEVICE_CPU", n(MPT_DEVICE_CPU)},
      {"DEVICE_CUDA", n(MPT_DEVICE_CUDA)},
      {"CAT_WEIGHT", n(MPT_CAT_WEIGHT)},
      {"CAT_MASTER_WEIGHT", n(MPT_CAT_MASTER_WEIGHT)},
      {"CAT_GRADIENT", n(MPT_CAT_GRADIENT)},
      {"CAT_ACTIVATION", n(MPT_CAT_ACTIVATION)},
      {"CAT_OPTIMIZER_STATE", n(MPT_CAT_OPTIMIZER_STATE)},
      {"CAT_WORKSPACE", n(MPT_CAT_WORKSPACE)},
      {"CAT_DATA", n(MPT_CAT_DATA)},
      {"RANGE_STEP", n(static_cast<long long>(contract::NvtxCategory::Step))},
      {"RANGE_PHASE", n(static_cast<long long>(contract::NvtxCategory::Phase))},
      {"RANGE_LAYER", n(static_cast<long long>(contract::NvtxCategory::Layer))},
      {"PHASE_FORWARD", quoted(contract::kPhaseForward)},
      {"PHASE_BACKWARD", quoted(contract::kPhaseBackward)},
      {"PHASE_OPTIMIZER", quoted(contract::kPhaseOptimizer)},
      {"PHASE_EVAL", quoted(contract::kPhaseEval)},
      {"ENV_RING", quoted(contract::env::kRing)},
      {"ENV_TORCH_DISPATCH_MODE", quoted(contract::env::kTorchDispatchMode)},
      {"ENV_TORCH_EAGER", quoted(contract::env::kTorchEager)},
      {"ENV_UPDATES", quoted(contract::env::kUpdates)},
  };
}

// NAME as the templates write it: capitals, digits and underscores.
bool is_name(const std::string& s) {
  if (s.empty() || !(s[0] >= 'A' && s[0] <= 'Z')) return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fpscope_write_contract_py TEMPLATE OUTPUT\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "fpscope_write_contract_py: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto known = facts();
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = text.find('@', at);
    if (open == std::string::npos) break;
    const std::size_t close = text.find('@', open + 1);
    if (close == std::string::npos) break;
    const std::string name = text.substr(open + 1, close - open - 1);
    if (!is_name(name)) {  // an '@' of the Python itself (a decorator, an operator)
      out += text.substr(at, open + 1 - at);
      at = open + 1;
      continue;
    }
    const auto fact = known.find(name);
    if (fact == known.end()) {
      std::cerr << "fpscope_write_contract_py: " << argv[1] << " names @" << name
                << "@, which no header states\n";
      return 1;
    }
    out += text.substr(at, open - at) + fact->second;
    at = close + 1;
  }
  out += text.substr(at);
  // Written to a temporary name and renamed, so that an interrupted build leaves no half file.
  const std::string temporary = std::string(argv[2]) + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << out;
    if (!file.flush()) {
      std::cerr << "fpscope_write_contract_py: cannot write " << temporary << "\n";
      std::remove(temporary.c_str());
      return 1;
    }
  }
  if (std::rename(temporary.c_str(), argv[2]) != 0) {
    std::cerr << "fpscope_write_contract_py: cannot rename " << temporary << " to " << argv[2]
              << "\n";
    std::remove(temporary.c_str());
    return 1;
  }
  return 0;
}
