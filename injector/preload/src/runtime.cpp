// Lazy start-up of the session, the recursion guard, and fork/exit handling (see runtime.h).
#include "runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "ring_sink.h"

namespace fpscope::inject {
namespace {

// Failed: tracing stopped after an exception inside the injector (tracing_failed); the session
// still says the process exits.
enum class State : int { Unstarted, Tracing, Forwarding, Failed };

std::atomic<State> g_state{State::Unstarted};
std::atomic<bool> g_torn_down{false};
Session* g_session = nullptr;  // never deleted: late calls from other threads must find it alive
// initial-exec: the preloaded library's TLS is static, and its access is then a plain load.
__attribute__((tls_model("initial-exec"))) thread_local bool t_inside_hook = false;

// A forked child shares the ring mapping but must never write into it.
// A forked child is never traced, and inherits the parent's exit handlers: the one that collects
// device results must find no session there (CUDA does not work in a forked child).
void on_fork_child() {
  g_state.store(State::Forwarding, std::memory_order_release);
  Session::set_process_session(nullptr);
}

const char* env_lookup(const char* name) { return std::getenv(name); }

Session* start_session() {
  const char* ring = std::getenv(kRingEnv);
  if (ring == nullptr || ring[0] == '\0') return nullptr;
  Options options;
  std::string error;
  if (!parse_options(env_lookup, &options, &error)) {
    std::fprintf(stderr, "fpscope: %s; tracing disabled, the program runs untraced\n", error.c_str());
    return nullptr;
  }
  auto producer = RingProducer::attach(ring, &error);
  if (!producer) {
    std::fprintf(stderr, "fpscope: cannot attach to the trace ring %s: %s; tracing disabled\n", ring,
                 error.c_str());
    return nullptr;
  }
  // Another process of this run owns the first ring (another rank, or a parent that made kernel
  // calls and then spawned us): this process gets a sibling ring of its own (ring.h).
  const bool first = producer->claim();
  if (!first) {
    producer = RingProducer::create_sibling(*producer, ring, &error);
    if (!producer) {
      std::fprintf(stderr, "fpscope: process %d runs untraced: %s\n", static_cast<int>(getpid()), error.c_str());
      return nullptr;
    }
  }
  auto* session = new Session(std::move(options), std::make_unique<RingSink>(std::move(producer)));
  const common::LauncherRank rank = process_rank();
  if (rank.source != nullptr) session->set_dump_prefix("rank" + std::to_string(rank.rank) + "-");
  else if (!first) session->set_dump_prefix("pid" + std::to_string(getpid()) + "-");
  session->announce();
  return session;
}

// What the exception being handled says.
std::string what_was_thrown() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

Session* current_session() {
  State s = g_state.load(std::memory_order_acquire);
  if (s == State::Tracing) return g_session;
  if (s != State::Unstarted) return nullptr;
  static std::mutex start_mutex;
  std::lock_guard lock(start_mutex);
  s = g_state.load(std::memory_order_acquire);
  if (s != State::Unstarted) return s == State::Tracing ? g_session : nullptr;
  t_inside_hook = true;  // calls made while starting (none expected) are forwarded
  try {
    g_session = start_session();
    Session::set_process_session(g_session);
  } catch (...) {  // out of memory, most likely: this process runs untraced, the program unharmed
    g_session = nullptr;
    try {
      std::fprintf(stderr, "fpscope: tracing could not start in process %d (%s); the program runs untraced\n",
                   static_cast<int>(getpid()), what_was_thrown().c_str());
    } catch (...) {
    }
  }
  t_inside_hook = false;
  g_state.store(g_session ? State::Tracing : State::Forwarding, std::memory_order_release);
  return g_session;
}

// Registered at load, so a child forked even before the parent's first kernel call never claims
// the ring. A child that execs starts afresh and may claim it if nobody has.
__attribute__((constructor)) void on_load() { pthread_atfork(nullptr, nullptr, on_fork_child); }

// Runs when the library is unloaded at exit, after the program's own exit-time code. Device
// activity is normally flushed earlier, by the exit handler InitializeInjection registers (the
// CUDA runtime may be gone by now); this call is the fallback and a no-op after it.
__attribute__((destructor)) void on_unload() {
  stop_device_activity();
  // The process exits normally: its last record says so (a killed process never gets here).
  const State s = g_state.load(std::memory_order_acquire);
  if ((s == State::Tracing || s == State::Failed) && g_session != nullptr) {
    try {
      g_session->exiting();
    } catch (...) {  // nothing more can be said: the collector sees the process vanish
    }
  }
  g_torn_down.store(true, std::memory_order_release);
}

}  // namespace

bool torn_down() { return g_torn_down.load(std::memory_order_acquire); }

bool set_rank(const common::LauncherRank& rank, std::string source) {
  if (g_state.load(std::memory_order_acquire) != State::Unstarted) return false;
  set_process_rank(rank, std::move(source));
  return true;
}

void tracing_failed(const char* where) noexcept {
  std::string what;
  try {
    what = what_was_thrown();
  } catch (...) {  // no memory even for the message
  }
  tracing_failed(where, what.c_str(), "inside the injector");
}

void tracing_failed(const char* where, const char* what, const char* inside) noexcept {
  State tracing = State::Tracing;
  if (!g_state.compare_exchange_strong(tracing, State::Failed, std::memory_order_acq_rel)) return;  // said once
  Session::set_process_session(nullptr);  // nothing more is written at exit either
  try {
    std::fprintf(stderr,
                 "fpscope: tracing stopped in process %d: %s failed%s%s (%s); the program goes on untraced, "
                 "the trace keeps what came before\n",
                 static_cast<int>(getpid()), where, *inside ? " " : "", inside, what);
    g_session->injector_status("failure", std::string(where) + ": " + what);
  } catch (...) {  // out of memory even for the message: stderr has it, or nothing can
  }
}

Session* session_for_entry_point() {
  if (torn_down()) return nullptr;
  return current_session();
}

HookCall::HookCall(Inside inside) {
  if (torn_down() || (t_inside_hook && inside == Inside::Refuse)) return;
  session_ = current_session();
  if (session_ && !t_inside_hook) t_inside_hook = marks_thread_ = true;
}

HookCall::~HookCall() {
  if (marks_thread_) t_inside_hook = false;
}

}  // namespace fpscope::inject
