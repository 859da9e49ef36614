// The NVTX injection entry point: NVTX3 is header-only and calls through function pointers, so a
// tool receives ranges by being loaded as the injection library (NVTX_INJECTION64_PATH, or found
// already loaded through LD_PRELOAD) and filling NVTX's callback tables. We fill the CORE table
// (default-domain ranges and marks) and the CORE2 table (domains, registered strings, domain
// ranges and marks). Start/end ranges, category and thread naming are not recorded.
#include <nvtx3/nvToolsExt.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime.h"

namespace {

using fpscope::inject::guarded;
using fpscope::inject::HookCall;
using fpscope::inject::NvtxDomainInfo;
using fpscope::inject::RangeEvent;

// Domain and registered-string handles live for the whole process (NVTX never frees them safely).
std::mutex g_handles_mutex;
std::unordered_map<std::string, NvtxDomainInfo*>& domains() {
  static auto* map = new std::unordered_map<std::string, NvtxDomainInfo*>;
  return *map;
}
std::unordered_map<std::string, std::string*>& registered_strings() {
  static auto* map = new std::unordered_map<std::string, std::string*>;
  return *map;
}

std::string utf8_of(const wchar_t* text) {
  std::string out;
  for (; text && *text; ++text) {
    auto c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Decodes message, category and payload. `storage` holds a converted wide message.
RangeEvent decode(const nvtxEventAttributes_t* a, std::string* storage) {
  RangeEvent e;
  if (a == nullptr) return e;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: e.message = a->message.ascii ? a->message.ascii : ""; break;
    case NVTX_MESSAGE_TYPE_UNICODE: *storage = utf8_of(a->message.unicode); e.message = *storage; break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      if (a->message.registered) e.message = *reinterpret_cast<const std::string*>(a->message.registered);
      break;
    default: break;
  }
  e.category = a->category;
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_INT64: e.payload_kind = 1; e.payload_i = a->payload.llValue; break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: e.payload_kind = 1; e.payload_i = static_cast<int64_t>(a->payload.ullValue); break;
    case NVTX_PAYLOAD_TYPE_INT32: e.payload_kind = 1; e.payload_i = a->payload.iValue; break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: e.payload_kind = 1; e.payload_i = a->payload.uiValue; break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: e.payload_kind = 2; e.payload_f = a->payload.dValue; break;
    case NVTX_PAYLOAD_TYPE_FLOAT: e.payload_kind = 2; e.payload_f = a->payload.fValue; break;
    default: break;
  }
  return e;
}

const NvtxDomainInfo* info_of(nvtxDomainHandle_t domain) {
  return reinterpret_cast<const NvtxDomainInfo*>(domain);
}

int domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  HookCall call;
  if (!call.session()) return 0;
  return guarded("nvtxDomainRangePushEx", 0, [&] {
    std::string storage;
    return call.session()->range_push(info_of(domain), decode(attributes, &storage));
  });
}

int domain_pop(nvtxDomainHandle_t domain) {
  HookCall call;
  return call.session() ? guarded("nvtxRangePop", 0, [&] { return call.session()->range_pop(info_of(domain)); }) : 0;
}

void domain_mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  HookCall call;
  if (!call.session()) return;
  guarded("nvtxDomainMarkEx", [&] {
    std::string storage;
    call.session()->mark(info_of(domain), decode(attributes, &storage));
  });
}

int push_ex(const nvtxEventAttributes_t* attributes) { return domain_push(nullptr, attributes); }
int push_a(const char* message) {
  HookCall call;
  if (!call.session()) return 0;
  return guarded("nvtxRangePushA", 0, [&] {
    RangeEvent e;
    e.message = message ? message : "";
    return call.session()->range_push(nullptr, e);
  });
}
int push_w(const wchar_t* message) {
  HookCall call;
  if (!call.session()) return 0;
  return guarded("nvtxRangePushW", 0, [&] {
    const std::string text = utf8_of(message);
    RangeEvent e;
    e.message = text;
    return call.session()->range_push(nullptr, e);
  });
}
int pop() { return domain_pop(nullptr); }
void mark_ex(const nvtxEventAttributes_t* attributes) { domain_mark(nullptr, attributes); }
void mark_a(const char* message) {
  HookCall call;
  if (!call.session()) return;
  guarded("nvtxMarkA", [&] {
    RangeEvent e;
    e.message = message ? message : "";
    call.session()->mark(nullptr, e);
  });
}

// Domains and registered strings are handed out even when this process is not traced: the
// program keeps the handles and passes them back.
nvtxDomainHandle_t domain_create(const char* name) {
  return guarded("nvtxDomainCreateA", nvtxDomainHandle_t{}, [&] {
    const std::string key = name ? name : "";
    std::lock_guard lock(g_handles_mutex);
    NvtxDomainInfo*& info = domains()[key];
    if (info == nullptr) info = new NvtxDomainInfo{key, key == fpscope::inject::kTrainerDomain};
    return reinterpret_cast<nvtxDomainHandle_t>(info);
  });
}
nvtxDomainHandle_t domain_create_w(const wchar_t* name) {
  return guarded("nvtxDomainCreateW", nvtxDomainHandle_t{}, [&] { return domain_create(utf8_of(name).c_str()); });
}
void domain_destroy(nvtxDomainHandle_t) {}  // kept alive: open ranges may still refer to it

nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* text) {
  return guarded("nvtxDomainRegisterStringA", nvtxStringHandle_t{}, [&] {
    const std::string key = text ? text : "";
    std::lock_guard lock(g_handles_mutex);
    std::string*& stored = registered_strings()[key];
    if (stored == nullptr) stored = new std::string(key);
    return reinterpret_cast<nvtxStringHandle_t>(stored);
  });
}
nvtxStringHandle_t register_string_w(nvtxDomainHandle_t domain, const wchar_t* text) {
  return guarded("nvtxDomainRegisterStringW", nvtxStringHandle_t{},
                 [&] { return register_string(domain, utf8_of(text).c_str()); });
}
void initialize(const void*) {}

template <typename Fn>
void install(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

bool fill_core(const NvtxExportTableCallbacks* callbacks) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) || t == nullptr) return false;
  install(t, n, NVTX_CBID_CORE_MarkEx, mark_ex);
  install(t, n, NVTX_CBID_CORE_MarkA, mark_a);
  install(t, n, NVTX_CBID_CORE_RangePushEx, push_ex);
  install(t, n, NVTX_CBID_CORE_RangePushA, push_a);
  install(t, n, NVTX_CBID_CORE_RangePushW, push_w);
  install(t, n, NVTX_CBID_CORE_RangePop, pop);
  return true;
}

bool fill_core2(const NvtxExportTableCallbacks* callbacks) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) || t == nullptr) return false;
  install(t, n, NVTX_CBID_CORE2_DomainMarkEx, domain_mark);
  install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, domain_push);
  install(t, n, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, register_string);
  install(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, register_string_w);
  install(t, n, NVTX_CBID_CORE2_DomainCreateA, domain_create);
  install(t, n, NVTX_CBID_CORE2_DomainCreateW, domain_create_w);
  install(t, n, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);
  install(t, n, NVTX_CBID_CORE2_Initialize, initialize);
  return true;
}

int initialize_injection(NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr || fpscope::inject::torn_down()) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  if (!fill_core(callbacks) || !fill_core2(callbacks)) return 0;
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) && version->SetInjectionNvtxVersion)
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  return 1;
}

}  // namespace

// Named by NVTX_INJECTION64_PATH: NVTX dlopens the library and calls this.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  return initialize_injection(get_export_table);
}

// Without NVTX_INJECTION64_PATH, NVTX looks this up among the loaded libraries (LD_PRELOAD).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2Preinject(
    NvtxGetExportTableFunc_t get_export_table) {
  return initialize_injection(get_export_table);
}
