// Process-wide injector state shared by the kernel-library hooks and the NVTX callbacks: lazy
// start-up, the recursion guard, fork and exit handling.
//
// Tracing starts at the first hooked call (kernel library or NVTX) of a process whose environment
// names a ring (FPSCOPE_RING) with valid options, and only if this process can claim the ring: the
// first process of a run to make such a call owns it. Everything else forwards to the real
// functions untouched: no ring, invalid options, a ring owned by another process, a forked child,
// a call made from inside the injector itself, or a call during exit after teardown.
#pragma once

#include <string>

#include "session.h"

namespace fpscope::inject {

// Scope of one hooked call. `session` is null when the call must only be forwarded.
class HookCall {
 public:
  // Refuse: a call made from inside another hook is only forwarded (the recursion guard).
  // Nested: it is traced there too. The allocation hooks use it: a kernel allocates its scratch
  // through mpt_alloc from inside mpt_launch, and that memory must be accounted for.
  enum class Inside { Refuse, Nested };
  explicit HookCall(Inside inside = Inside::Refuse);
  ~HookCall();
  HookCall(const HookCall&) = delete;
  HookCall& operator=(const HookCall&) = delete;
  Session* session() const { return session_; }

 private:
  Session* session_ = nullptr;
  bool marks_thread_ = false;  // this scope set the thread's inside-a-hook flag
};

// True once the library's destructor has run; hooks then only forward.
bool torn_down();

// Called from a catch block at the program's boundary (a hook, the C API, an NVTX callback): an
// exception inside the injector stops tracing in this process instead of reaching the program. It
// is said once on stderr and, if the ring still takes it, in the trace (meta injector.failure);
// the program goes on untraced, the trace keeps what came before. `where` names the call.
void tracing_failed(const char* where) noexcept;
// The same for a failure the caller describes (`what`), said as "<where> failed <inside> (<what>)";
// a front end's own error has an empty `inside`.
void tracing_failed(const char* where, const char* what, const char* inside) noexcept;

// Runs `body` (a call's use of the session) at the program's boundary: if it throws, tracing
// stops (tracing_failed) and `fallback` is returned in its place.
template <typename R, typename Body>
R guarded(const char* where, R fallback, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    tracing_failed(where);
  }
  return fallback;
}

template <typename Body>
void guarded(const char* where, Body&& body) noexcept {
  try {
    body();
  } catch (...) {
    tracing_failed(where);
  }
}

// The session for an entry point that a library calls on its own (CUDA's InitializeInjection),
// possibly from inside a hooked call: started if this process can claim the ring, null when it
// only forwards. Unlike HookCall it does not mark the thread as inside a hook.
Session* session_for_entry_point();

// Sets the rank this process traces under (process_rank, session.h); false when tracing has
// already started (the process has announced its rank).
bool set_rank(const common::LauncherRank& rank, std::string source);

// Stops CUPTI collection (cupti_injection.cpp): flushes device activity into the ring. Idempotent;
// runs at exit, before teardown.
void stop_device_activity();

}  // namespace fpscope::inject
