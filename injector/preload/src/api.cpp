// The exported C API for front ends that run operations themselves (fpscope/inject_api.h). Each
// call finds the session as the hooks do (HookCall: started on first use when this process can
// claim the ring, null when it only forwards) and hands the call to it. An exception inside the
// injector stops tracing (runtime.h, guarded) and the call returns what an untraced one would.
#include <string>

#include "fpscope/contract/nvtx.h"
#include "fpscope/inject_api.h"
#include "runtime.h"

#define FPSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using fpscope::inject::guarded;
using fpscope::inject::HookCall;
using fpscope::inject::NvtxDomainInfo;
using fpscope::inject::RangeEvent;

// A front end's ranges follow the trainer's convention, in the trainer's domain.
const NvtxDomainInfo& front_end_domain() {
  static const NvtxDomainInfo domain{fpscope::contract::kTrainerNvtxDomain, true};
  return domain;
}

thread_local std::string t_trap_message;

}  // namespace

struct fpscope_op {};  // opaque to callers; the pointer is the session's ForeignOp

FPSCOPE_EXPORT int fpscope_api_version(void) { return FPSCOPE_INJECT_API_VERSION; }

FPSCOPE_EXPORT int fpscope_tracing(void) {
  HookCall call;
  return call.session() ? 1 : 0;
}

FPSCOPE_EXPORT int fpscope_set_rank(int32_t rank, int32_t local_rank, int32_t world_size, const char* source) {
  if (rank < 0) return 0;
  fpscope::common::LauncherRank r;
  r.rank = rank;
  r.local_rank = local_rank;
  r.world_size = world_size;
  return fpscope::inject::guarded("fpscope_set_rank", false,
                                  [&] { return fpscope::inject::set_rank(r, source ? source : "front end"); })
             ? 1
             : 0;
}

FPSCOPE_EXPORT int fpscope_step_watched(int64_t step) {
  HookCall call;
  return call.session() && guarded("fpscope_step_watched", false, [&] { return call.session()->watches_step(step); }) ? 1 : 0;
}

FPSCOPE_EXPORT int fpscope_range_push(int32_t category, const char* message, int64_t step) {
  HookCall call;
  if (!call.session()) return -1;
  RangeEvent e;
  e.message = message ? message : "";
  e.category = static_cast<uint32_t>(category);
  if (category == static_cast<int32_t>(fpscope::contract::NvtxCategory::Step)) {
    e.payload_kind = 1;
    e.payload_i = step;
  }
  return guarded("fpscope_range_push", -1, [&] { return call.session()->front_end_range_push(&front_end_domain(), e); });
}

FPSCOPE_EXPORT int fpscope_range_pop(void) {
  HookCall call;
  if (!call.session()) return -1;
  return guarded("fpscope_range_pop", -1, [&] { return call.session()->front_end_range_pop(&front_end_domain()); });
}

FPSCOPE_EXPORT int fpscope_op_plan(const char* kernel) {
  HookCall call;
  return call.session() ? guarded("fpscope_op_plan", 0, [&] { return call.session()->plan_op(kernel); }) : 0;
}

FPSCOPE_EXPORT fpscope_op* fpscope_op_begin(const char* kernel, const mpt_tensor* inputs, int32_t n_inputs,
                                            const uint8_t* written, int32_t measure) {
  HookCall call;
  if (!call.session()) return nullptr;
  return guarded("fpscope_op_begin", static_cast<fpscope_op*>(nullptr), [&] {
    return reinterpret_cast<fpscope_op*>(call.session()->begin_op(kernel, inputs, n_inputs, written, measure != 0));
  });
}

FPSCOPE_EXPORT int fpscope_op_end(fpscope_op* op, const mpt_tensor* outputs, int32_t n_outputs, int32_t status) {
  if (op == nullptr) return 0;
  HookCall call;
  if (!call.session()) {  // tracing stopped since the op began: it ends untraced, freed all the same
    fpscope::inject::Session::discard_op(reinterpret_cast<fpscope::inject::Session::ForeignOp*>(op));
    return 0;
  }
  return guarded("fpscope_op_end", 0, [&] {
    std::string message;
    const int result = call.session()->end_op(reinterpret_cast<fpscope::inject::Session::ForeignOp*>(op),
                                              outputs, n_outputs, status, &message);
    if (result == FPSCOPE_TRAPPED) t_trap_message = std::move(message);
    return result;
  });
}

FPSCOPE_EXPORT const char* fpscope_trap_message(void) { return t_trap_message.c_str(); }

FPSCOPE_EXPORT uint64_t fpscope_alloc_seen(const void* ptr, uint64_t bytes, int32_t device, int32_t category,
                                           const char* name) {
  HookCall call;
  if (!call.session() || ptr == nullptr) return 0;
  return guarded("fpscope_alloc_seen", uint64_t{0},
                 [&] { return call.session()->allocation_seen(ptr, bytes, device, category, name); });
}

FPSCOPE_EXPORT void fpscope_free_seen(const void* ptr) {
  HookCall call;
  if (call.session() && ptr) guarded("fpscope_free_seen", [&] { call.session()->freed(const_cast<void*>(ptr)); });
}

FPSCOPE_EXPORT void fpscope_relabel(uint64_t id, int32_t category, const char* name) {
  HookCall call;
  if (call.session() && id != 0) guarded("fpscope_relabel", [&] { call.session()->relabel(id, category, name); });
}

FPSCOPE_EXPORT int fpscope_report_writes(void) {
  HookCall call;
  return call.session() && guarded("fpscope_report_writes", false, [&] { return call.session()->front_end_reports_writes(); })
             ? 1
             : 0;
}

FPSCOPE_EXPORT void fpscope_memory_written(const void* ptr, uint64_t bytes) {
  HookCall call;
  if (!call.session()) return;
  guarded("fpscope_memory_written", [&] {
    if (ptr == nullptr) call.session()->written_anywhere();
    else call.session()->host_written(ptr, bytes);
  });
}

FPSCOPE_EXPORT void fpscope_stop_reuse(void) {
  HookCall call;
  if (call.session()) guarded("fpscope_stop_reuse", [&] { call.session()->stop_reuse(); });
}

FPSCOPE_EXPORT void fpscope_log_scalar(const char* name, double value, int64_t step) {
  HookCall call;
  if (call.session()) guarded("fpscope_log_scalar", [&] { call.session()->log_scalar(name, value, step); });
}

FPSCOPE_EXPORT void fpscope_log_text(const char* key, const char* value) {
  HookCall call;
  if (call.session()) guarded("fpscope_log_text", [&] { call.session()->log_text(key, value); });
}

FPSCOPE_EXPORT void fpscope_param_update(const char* name, int32_t dtype, int64_t step, uint64_t elements,
                                         uint64_t changed, int64_t nonzero, int64_t lost, double applied_abs_sum,
                                         double applied_sq_sum, double weight_sq_sum) {
  HookCall call;
  if (call.session())
    guarded("fpscope_param_update", [&] {
      call.session()->param_update(name, dtype, step, elements, changed, nonzero, lost, applied_abs_sum,
                                   applied_sq_sum, weight_sq_sum);
    });
}

FPSCOPE_EXPORT int fpscope_update_before(uint64_t key, const void* param, const void* grad, uint64_t elements,
                                         int32_t dtype) {
  HookCall call;
  if (!call.session()) return 0;
  return guarded("fpscope_update_before", false, [&] {
           return call.session()->update_copies().keep(key, static_cast<fpscope::ElementType>(dtype), param, grad,
                                                       elements);
         })
             ? 1
             : 0;
}

FPSCOPE_EXPORT int fpscope_update_after(uint64_t key, const char* name, const void* param, uint64_t elements,
                                        int32_t dtype, int64_t step, fpscope_update_sums* sums) {
  HookCall call;
  if (!call.session()) return 0;
  return guarded("fpscope_update_after", false, [&] {
           const auto s = call.session()->update_copies().compare(key, static_cast<fpscope::ElementType>(dtype),
                                                                  param, elements);
           if (!s) return false;
           call.session()->param_update(name, dtype, step, elements, s->changed, static_cast<int64_t>(s->nonzero),
                                        static_cast<int64_t>(s->lost), s->applied_abs_sum, s->applied_sq_sum,
                                        s->weight_sq_sum);
           if (sums)
             *sums = {s->changed, s->nonzero, s->lost, s->applied_abs_sum, s->applied_sq_sum, s->weight_sq_sum};
           return true;
         })
             ? 1
             : 0;
}

FPSCOPE_EXPORT void fpscope_update_prune(void) {
  HookCall call;
  if (call.session()) guarded("fpscope_update_prune", [&] { call.session()->update_copies().prune(); });
}

FPSCOPE_EXPORT void fpscope_front_end_failed(const char* front_end, const char* what) {
  HookCall call;
  if (call.session())
    fpscope::inject::tracing_failed(front_end ? front_end : "a front end", what ? what : "", "");
}
