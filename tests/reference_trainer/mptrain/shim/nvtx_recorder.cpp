// Test-only tool that records mptrain's NVTX ranges and kernel launches in order, so a test can
// check which step, phase and layer each kernel ran in. Loaded twice over, as fpscope's injector
// is: as the NVTX injection library (NVTX_INJECTION64_PATH: InitializeInjectionNvtx2 hooks the
// domain push/pop callbacks) and through LD_PRELOAD (it interposes mpt_launch). Events go, one a
// line, to the file named by MPTRAIN_NVTX_LOG:
//   push CATEGORY PAYLOAD MESSAGE | pop | launch KERNEL FIRST_OUTPUT_NAME
#include <mpt/abi.h>
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

FILE* log_file() {
  static FILE* file = [] {
    const char* path = std::getenv("MPTRAIN_NVTX_LOG");
    return path != nullptr ? std::fopen(path, "w") : nullptr;
  }();
  return file;
}

int push_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  if (FILE* f = log_file()) {
    long long payload = attributes->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? attributes->payload.llValue : -1;
    const char* message = attributes->messageType == NVTX_MESSAGE_TYPE_ASCII ? attributes->message.ascii : "?";
    std::fprintf(f, "push %u %lld %s\n", attributes->category, payload, message);
  }
  return 0;
}

int pop(nvtxDomainHandle_t) {
  if (FILE* f = log_file()) std::fprintf(f, "pop\n");
  return 0;
}

nvtxDomainHandle_t create_domain(const char* name) {
  if (FILE* f = log_file()) std::fprintf(f, "domain %s\n", name);
  static int handle_storage;
  return reinterpret_cast<nvtxDomainHandle_t>(&handle_storage);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) == 0 || table == nullptr) return 0;
  if (size <= NVTX_CBID_CORE2_DomainCreateA) return 0;
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&push_ex);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&create_domain);
  return 1;
}

extern "C" __attribute__((visibility("default"))) int mpt_launch(const mpt_launch_desc* launch) {
  using LaunchFn = int (*)(const mpt_launch_desc*);
  static LaunchFn next = reinterpret_cast<LaunchFn>(dlsym(RTLD_NEXT, "mpt_launch"));
  if (FILE* f = log_file()) {
    const char* output = launch->n_outputs > 0 ? launch->outputs[0].name : "-";
    std::fprintf(f, "launch %s %s\n", launch->kernel, output);
  }
  return next(launch);
}
