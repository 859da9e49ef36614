// NVTX3 ranges of the trainer, in the domain "mptrain": category 1 step (payload: the step),
// category 2 phase (forward, backward, optimizer, eval), category 3 layer. Tools attribute each
// kernel to the innermost open range of each category (docs/kernels.md "NVTX ranges").
// Without the NVTX3 headers (FPSCOPE_HAVE_NVTX3 undefined) the ranges compile to nothing.
#pragma once

#include <cstdint>

#include "fpscope/contract/nvtx.h"

#if defined(FPSCOPE_HAVE_NVTX3)
#include <nvtx3/nvToolsExt.h>
#endif

namespace mptrain {

// The categories and domain the trace contract gives the trainer (fpscope/contract/nvtx.h).
enum class RangeCategory : uint32_t {
  kStep = static_cast<uint32_t>(fpscope::contract::NvtxCategory::Step),
  kPhase = static_cast<uint32_t>(fpscope::contract::NvtxCategory::Phase),
  kLayer = static_cast<uint32_t>(fpscope::contract::NvtxCategory::Layer),
};

class NvtxRange {
 public:
#if defined(FPSCOPE_HAVE_NVTX3)
  NvtxRange(RangeCategory category, const char* message, int64_t payload = -1) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.category = static_cast<uint32_t>(category);
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = message;
    if (payload >= 0) {
      attributes.payloadType = NVTX_PAYLOAD_TYPE_INT64;
      attributes.payload.llValue = payload;
    }
    nvtxDomainRangePushEx(domain(), &attributes);
  }
  ~NvtxRange() { nvtxDomainRangePop(domain()); }

 private:
  static nvtxDomainHandle_t domain() {
    static nvtxDomainHandle_t handle = nvtxDomainCreateA(fpscope::contract::kTrainerNvtxDomain);
    return handle;
  }
#else
  NvtxRange(RangeCategory, const char*, int64_t = -1) {}
#endif

 public:
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace mptrain
