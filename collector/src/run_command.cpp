// `fpscope run`: checks the command line, the program and the output before anything starts;
// creates the ring and the trace; starts the program with the injector preloaded; drains the ring
// into the trace while it runs; and, however it ends, drains what is left, records how it ended,
// finishes the trace, prints a short summary and exits with the program's status.
#include "fpscope/collector/run_command.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <random>
#include <thread>

#include "child_process.h"
#include "fpscope/contract/environment.h"
#include "fpscope/contract/run_end.h"
#include "fpscope/collector/ring.h"
#include "fpscope/collector/ring_names.h"
#include "fpscope/collector/trace_writer.h"
#include "ring_set.h"
#include "run_options.h"
#include "trace_meta.h"

extern char** environ;

namespace fpscope {
namespace {

// Exit statuses of fpscope run itself (otherwise it exits with the program's status).
constexpr int kExitSetupFailed = 1;   // the ring, the injector library or the trace failed
constexpr int kExitUsage = 2;         // the command line or the output path is wrong
constexpr int kExitNotExecutable = 126;
constexpr int kExitNotFound = 127;

void say_error(const std::string& what) { std::cerr << "fpscope run: " << what << "\n"; }

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

std::string current_dir() {
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) ? cwd : "";
}

// Where the trace and its dumps go.
struct TracePaths {
  std::string trace;          // absolute
  std::string dump_dir;       // absolute: <trace>.dumps
  std::string dump_folder;    // relative to the trace's folder: <trace name>.dumps
};

// Checks the output before the program starts: its folder exists and is writable, and an existing
// trace is replaced only with --force. Empty string when fine, else the error.
std::string prepare_output(const RunOptions& o, TracePaths* paths) {
  paths->trace = absolute(o.output);
  const auto slash = paths->trace.find_last_of('/');
  const std::string dir = slash == 0 ? "/" : paths->trace.substr(0, slash);
  const std::string name = paths->trace.substr(slash + 1);
  paths->dump_dir = paths->trace + ".dumps";
  paths->dump_folder = name + ".dumps";
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "the output folder " + dir + " does not exist: create it or choose another -o";
  if (access(dir.c_str(), W_OK | X_OK) != 0) return "cannot write in the output folder " + dir + ": " + std::strerror(errno);
  if (stat(paths->trace.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return o.output + " is a folder; -o wants a trace file name";
    if (!o.force) return o.output + " already exists; pass --force to overwrite it or choose another -o";
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      const std::string victim = paths->trace + suffix;
      if (unlink(victim.c_str()) != 0 && errno != ENOENT)
        return "cannot remove the old " + victim + ": " + std::strerror(errno);
    }
  }
  return "";
}

// libfpscope_inject.so: FPSCOPE_INJECT_LIB, else <fpscope's folder>/../lib/.
std::string injector_library(std::string* error) {
  std::string path;
  if (const char* forced = std::getenv(contract::env::kInjectLib); forced && *forced) {
    path = forced;
  } else {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      *error = "cannot find fpscope's own folder; set FPSCOPE_INJECT_LIB to libfpscope_inject.so";
      return "";
    }
    std::string self(exe, static_cast<std::size_t>(n));
    path = self.substr(0, self.find_last_of('/')) + "/../lib/libfpscope_inject.so";
  }
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved)) {
    *error = "the injector library " + path + " is missing (build the fpscope_inject target, or set "
             "FPSCOPE_INJECT_LIB to libfpscope_inject.so)";
    return "";
  }
  return resolved;
}

// The PyTorch front end's folder, beside the injector's: <lib>/../share/fpscope/python ("" if absent).
std::string python_front_end(const std::string& inject) {
  const std::string dir = inject.substr(0, inject.find_last_of('/')) + "/../share/fpscope/python";
  char resolved[PATH_MAX];
  if (!realpath((dir + "/sitecustomize.py").c_str(), resolved)) return "";
  std::string path = resolved;
  return path.substr(0, path.find_last_of('/'));
}

// The program's environment: the user's, without FPSCOPE_* leftovers of an outer run, plus the
// ring, the selection, the preload, NVTX injection and CUDA injection (CUPTI device activity). A
// CUDA_INJECTION64_PATH the user set (another tool's) is kept: CUDA loads one injection library.
std::vector<std::string> program_environment(const RunOptions& o, const std::string& ring,
                                             const std::string& inject, const TracePaths& paths) {
  std::vector<std::string> env;
  std::string user_preload;
  std::string user_cuda_injection;
  std::string user_python_path;
  for (char** e = environ; *e; ++e) {
    const std::string line = *e;
    if (line.rfind(contract::env::kPrefix, 0) == 0 || line.rfind("NVTX_INJECTION64_PATH=", 0) == 0) continue;
    if (line.rfind("LD_PRELOAD=", 0) == 0) {
      user_preload = line.substr(11);
      continue;
    }
    if (line.rfind("PYTHONPATH=", 0) == 0) {
      user_python_path = line.substr(11);
      continue;
    }
    if (line.rfind("CUDA_INJECTION64_PATH=", 0) == 0) {
      user_cuda_injection = line.substr(22);
      if (user_cuda_injection.empty()) continue;  // set but empty: as if unset
    }
    env.push_back(line);
  }
  env.push_back(std::string(kRingEnv) + "=" + ring);
  for (const auto& [name, value] : selection_environment(o)) env.push_back(name + "=" + value);
  if (!o.dump.empty()) env.push_back(std::string(contract::env::kDumpDir) + "=" + paths.dump_dir);
  env.push_back("LD_PRELOAD=" + inject + (user_preload.empty() ? "" : ":" + user_preload));
  env.push_back("NVTX_INJECTION64_PATH=" + inject);
  // The PyTorch front end: its sitecustomize runs first in a Python program and installs the front
  // end if the program imports torch (docs/pytorch.md). Other programs ignore the variable.
  const std::string python = python_front_end(inject);
  if (!python.empty())
    env.push_back("PYTHONPATH=" + python + (user_python_path.empty() ? "" : ":" + user_python_path));
  else if (!user_python_path.empty())
    env.push_back("PYTHONPATH=" + user_python_path);
  if (o.cupti && !user_cuda_injection.empty() && user_cuda_injection != inject) {
    if (!o.quiet)
      std::cerr << "fpscope run: warning: CUDA_INJECTION64_PATH is already set; keeping it, so CUDA device "
                 "activity (CUPTI) is not traced (unset it, or pass --no-cupti to silence this)\n";
  } else if (o.cupti && user_cuda_injection.empty()) {
    env.push_back("CUDA_INJECTION64_PATH=" + inject);
  }
  return env;
}

std::vector<std::string> user_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

std::string ring_name() {
  std::random_device rd;
  return ring_name_for(common::self_identity(), rd());
}

void nap() {
  timespec ts{0, 1000000};  // 1 ms: idle polling costs nothing measurable, and latency stays low
  nanosleep(&ts, nullptr);
}

contract::RunEnd run_end(const ChildEnd& end, const TraceWriter& w, int interrupt) {
  using contract::RunEnd;
  if (w.trap().seen && end.signaled && end.signal == SIGTRAP) return RunEnd::Trapped;
  if (interrupt != 0) return RunEnd::Interrupted;
  if (end.signaled) return RunEnd::Signaled;
  return end.exit_code == 0 ? RunEnd::ExitedOk : RunEnd::ExitedError;
}

// `text` as one word of a command the user may paste into a shell: as it is when it holds nothing
// a shell would act on, otherwise in single quotes (a quote inside written '\''). `always` quotes
// it anyway (a glob the shell would expand: --ops 'conv*').
std::string shell_word(const std::string& text, bool always = false) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("/._-+,:=@%", ch) != nullptr;
  });
  if (plain && !always) return text;
  std::string quoted = "'";
  for (char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::string how_it_ended(const ChildEnd& end, contract::RunEnd reason) {
  if (reason == contract::RunEnd::Trapped) return "was stopped by --trap (SIGTRAP)";
  if (end.signaled) return fmt::format("was killed by {} (signal {})", signal_name(end.signal), end.signal);
  return fmt::format("exited with status {}", end.exit_code);
}

void print_summary(const RunOptions& o, const TraceWriter& w, const RingSet& rings, const ChildEnd& end,
                   contract::RunEnd reason) {
  const TraceCounts& c = w.counts();
  if (const std::string incomplete = w.incomplete(); incomplete.empty())
    std::cerr << fmt::format("fpscope: trace written to {}\n", o.output);
  else
    std::cerr << fmt::format("fpscope: incomplete trace in {}: {}\n", o.output, incomplete);
  const uint64_t processes = rings.traced_processes() - c.idle_processes;
  if (w.incomplete().empty()) {
    std::cerr << fmt::format("fpscope: {} kernels, {} tensors, {} events{}; the program {}\n", c.kernels, c.tensors,
                             c.events(), processes > 1 ? fmt::format(" from {} processes", processes) : "",
                             how_it_ended(end, reason));
  } else {
    const auto [kernels, tensors] = w.stored_kernels_and_tensors();
    std::cerr << fmt::format("fpscope: the trace holds {} kernels and {} tensors of the {} and {} seen{}; the program {}\n",
                             kernels, tensors, c.kernels, c.tensors,
                             processes > 1 ? fmt::format(" from {} processes", processes) : "", how_it_ended(end, reason));
  }
  if (const NonfiniteOutcome nf = w.nonfinite_outcome(); nf.values > 0) {
    std::cerr << fmt::format("fpscope: {} NaN/Inf values in {} output tensor{}; {}\n", nf.values, nf.tensors,
                             nf.tensors == 1 ? "" : "s",
                             nf.first_origin.empty() ? "no launch measured made them from finite inputs"
                                                     : "first: " + nf.first_origin);
  }
  if (rings.refused_processes() > 0)
    std::cerr << fmt::format("fpscope: warning: {} processes ran untraced: a trace takes {} processes at most\n",
                             rings.refused_processes(), kMaxRings);
  if (w.trap().seen) {
    const std::string& m = w.trap().message;  // the injector's message may carry the prefix already
    std::cerr << (m.rfind("fpscope:", 0) == 0 ? std::string_view() : contract::kTrapMessagePrefix) << m << "\n";
  }
  if (c.kernels == 0) {
    std::cerr << "fpscope: no kernels were seen: fpscope sees the kernels of programs built on libmpt_kernels (mptrain)"
                 " and the operators of Python programs that import torch\n";
  } else if (c.tensors == 0 && (!o.ops.empty() || !o.steps.empty())) {
    // A selection that measured nothing is a typo or a wrong guess at the names until shown otherwise.
    std::cerr << fmt::format("fpscope: warning: no tensor was measured: {}{}{} selected none of the run's {} launches;"
                             " the names to match: fpscope query {} \"SELECT DISTINCT kernel, layer FROM v_kernels\"\n",
                             o.ops.empty() ? "" : "--ops " + shell_word(o.ops, true), !o.ops.empty() && !o.steps.empty() ? " with " : "",
                             o.steps.empty() ? "" : "--steps " + shell_word(o.steps), c.kernels, shell_word(o.output));
  }
  if (c.lost_to_storage > 0)
    std::cerr << fmt::format("fpscope: warning: {} records could not be stored: {}\n", c.lost_to_storage, w.error());
  if (rings.dropped_records() > 0)
    std::cerr << fmt::format("fpscope: warning: {} records were dropped because the collector stalled\n",
                             rings.dropped_records());
}

// While the program runs, the drain loop yields the processor to it: a collector that wakes on a
// core the program's threads are using delays every parallel kernel by as long as it runs (the
// slowest thread decides), which cost about 5% of a two-thread trainer's wall time here. At nice
// 19 it runs in the program's idle moments and the ring holds what waits: a full ring makes the
// program wait (producer_waits), and only a ring that makes no progress for 30 s drops records,
// counted in meta dropped_records. The end of the run is drained at normal priority, by the main
// thread: the moment the program has ended, it stops the loop (which takes at most
// kRecordsPerDrain records of each ring between two looks) and drains what is left itself,
// however busy the machine is with other work. (A thread cannot take back its own nice 19
// without privileges.)
constexpr int kDrainNice = 19;
constexpr std::size_t kRecordsPerDrain = 256;

void yield_to_the_program() {
  // On Linux a thread's nice value is its own: the other threads keep theirs.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kDrainNice);
}

// What the drain loops have told the user already, so that each warning is said once a run.
struct DrainReports {
  bool storage_failure = false;
  bool adopt_error = false;
};

// Takes over the siblings made ready, drains up to `limit` records of each ring and forwards
// interrupts; says (once) that a ring cannot be read or that storing failed. Returns the records
// drained.
std::size_t drain_once(ChildProcess& child, RingSet& rings, TraceWriter& writer, InterruptForwarder& interrupts,
                       bool quiet, DrainReports& said, std::size_t limit) {
  std::string adopt_error;
  rings.adopt_ready(&adopt_error);
  if (!adopt_error.empty() && !said.adopt_error && !quiet) {
    said.adopt_error = true;
    say_error("warning: a traced process's ring cannot be read, its records are lost: " + adopt_error);
  }
  const std::size_t n = rings.drain(writer, limit);
  interrupts.forward_to(child.pid());
  if (writer.failed() && !said.storage_failure) {
    said.storage_failure = true;
    say_error("writing the trace failed: " + writer.error() +
              "; the trace keeps what was committed before; the program goes on, its records are discarded");
  }
  return n;
}

// Drains the rings into the trace until the program ends (its end, reaped), every traced process
// has said it exits (nullopt, *all_said_exit set; not looked for if all_said_exit is nullptr), or
// `stop` is set (nullopt). Keeps draining after a storage failure, so that the program never
// blocks on a full ring.
// Between drains that found nothing, the loop sleeps on the run's doorbell (RingSet::wait_for_records),
// which the thread that waits for the program's end rings at that end, an interrupt to forward
// rings too, and producers ring when they find their ring full, when a sibling ring is ready, and
// after a publish as the loop asks:
// - while the program is busy (it published within the last kBusyStretch), the loop naps and
//   asks to be woken only by a ring filled to its fill mark: records gather for a few
//   milliseconds and are drained together, and a publish below the mark costs the program no
//   system call. A nap lasts kBusyNap after one that found records, twice as long as the one
//   before after one that found none, up to kCommitWait: a program that publishes in bursts (a
//   sampled run's watched steps) or a trickle does not wake the loop every kBusyNap between them;
// - once it has been quiet that long, the loop asks to be woken by the next publish, and sleeps
//   at first for 1 ms, twice as long each time nothing came, up to a second, so that a program
//   that launches nothing costs the collector about one wake-up a second.
// While stored records wait for their commit (live readers see them 250 ms late at most) it wakes
// within kCommitWait. A wake-up lost to the race between a publish and the start of a sleep (the
// producer's look at collector_waiting is not fenced) delays those records by that sleep.
constexpr auto kBusyNap = std::chrono::milliseconds(4);
constexpr auto kBusyStretch = std::chrono::milliseconds(100);
constexpr auto kFirstIdleWait = std::chrono::milliseconds(1);
constexpr auto kLongestIdleWait = std::chrono::milliseconds(1000);
constexpr auto kCommitWait = std::chrono::milliseconds(50);

std::optional<ChildEnd> drain_while_running(ChildProcess& child, RingSet& rings, TraceWriter& writer,
                                            InterruptForwarder& interrupts, bool quiet, DrainReports& said,
                                            const std::atomic<bool>& stop, bool* all_said_exit) {
  using Clock = std::chrono::steady_clock;
  std::chrono::nanoseconds idle = kFirstIdleWait;
  std::chrono::nanoseconds nap = kBusyNap;
  bool drained_since_nap = false;
  auto last_records = Clock::now() - kBusyStretch;
  while (!stop.load(std::memory_order_relaxed)) {
    if (drain_once(child, rings, writer, interrupts, quiet, said, kRecordsPerDrain) != 0) {
      idle = kFirstIdleWait;
      drained_since_nap = true;
      last_records = Clock::now();
      continue;
    }
    if (auto end = child.poll()) return end;
    if (all_said_exit && rings.every_process_said_exit(writer)) {
      *all_said_exit = true;
      return std::nullopt;
    }
    writer.commit_if_due();  // readers of the live trace see what arrived, 250 ms late at most
    if (stop.load(std::memory_order_relaxed)) break;
    if (Clock::now() - last_records < kBusyStretch) {
      nap = drained_since_nap ? kBusyNap : std::min<std::chrono::nanoseconds>(nap * 2, kCommitWait);
      drained_since_nap = false;
      rings.wait_for_records(nap, kWakePastFillMark);
      continue;
    }
    rings.wait_for_records(writer.uncommitted() ? std::min<std::chrono::nanoseconds>(idle, kCommitWait) : idle);
    idle = std::min<std::chrono::nanoseconds>(idle * 2, kLongestIdleWait);
  }
  return std::nullopt;
}

// Blocks until the program has ended (without reaping it) or `done` is readable. `pidfd` is the
// program's, or -1 where pidfd_open() is not to be had: then it looks every millisecond.
void wait_for_the_end_or(const ChildProcess& child, int pidfd, int done) {
  if (pidfd >= 0) {
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {done, POLLIN, 0}};
    while (poll(fds, 2, -1) < 0 && errno == EINTR) {
    }
    return;
  }
  pollfd fd{done, POLLIN, 0};
  while (!child.has_ended() && poll(&fd, 1, 0) <= 0) nap();
}

// drain_while_running() on a thread of its own at low priority, while this one waits for the
// program's end at normal priority. Returns the program's end if that thread reaped it, nullopt if
// the program has ended unreaped or every traced process has said it exits (*all_said_exit, when
// asked).
std::optional<ChildEnd> drain_beside(ChildProcess& child, RingSet& rings, TraceWriter& writer,
                                     InterruptForwarder& interrupts, bool quiet, DrainReports& said, int pidfd,
                                     bool* all_said_exit) {
  std::optional<ChildEnd> end;
  std::exception_ptr failure;
  std::atomic<bool> stop{false};
  const int done = eventfd(0, EFD_CLOEXEC);
  interrupts.wake_with([](void* set) { static_cast<RingSet*>(set)->wake(); }, &rings);
  std::thread drainer([&] {
    yield_to_the_program();
    try {
      end = drain_while_running(child, rings, writer, interrupts, quiet, said, stop, all_said_exit);
    } catch (...) {
      failure = std::current_exception();
    }
    if (done >= 0) eventfd_write(done, 1);
  });
  wait_for_the_end_or(child, pidfd, done);
  stop = true;
  rings.wake();  // the drain thread may sleep on the doorbell
  drainer.join();
  interrupts.wake_with(nullptr, nullptr);
  if (done >= 0) close(done);
  if (failure) std::rethrow_exception(failure);
  return end;
}

// After prepare_finish(): waits for the program's end at normal priority, draining whatever still
// comes (a record racing a process's exit, a process started after the others said they exit).
// Returns the end, reaped, or nullopt as soon as a record arrives (the low-priority loop takes
// over again, and finish() will complete the trace anew).
std::optional<ChildEnd> wait_for_the_end_after_finishing(ChildProcess& child, RingSet& rings, TraceWriter& writer,
                                                         InterruptForwarder& interrupts, bool quiet,
                                                         DrainReports& said, int pidfd) {
  while (true) {
    if (drain_once(child, rings, writer, interrupts, quiet, said, kRecordsPerDrain) != 0) return std::nullopt;
    if (auto end = child.poll()) return end;
    pollfd fd{pidfd, POLLIN, 0};
    if (pidfd < 0 || poll(&fd, 1, 1) < 0) nap();
  }
}

// Everything left in the rings, the siblings made since included, into the trace.
void drain_the_rest(RingSet& rings, TraceWriter& writer) {
  std::string adopt_error;
  rings.adopt_ready(&adopt_error);
  while (rings.drain(writer) != 0) {
  }
}

// Drains the rings until the program ends: at low priority while it runs, the rest at normal
// priority once it has ended. When every traced process has said it exits before the program has
// ended, the trace is completed while the kernel tears the program down (typically 15 to 20 ms for
// the trainer, longer for a large Python program), and finish() has only the end's meta left to
// write; should records still come, draining goes on as before. A program whose processes all
// exit before it starts more (a script running trainers one after the other) would make each
// attempt in vain: after two, the trace is completed once, after the end.
ChildEnd collect(ChildProcess& child, RingSet& rings, TraceWriter& writer, InterruptForwarder& interrupts,
                 bool quiet) {
  constexpr int kFinishAttempts = 2;
  DrainReports said;
  // Opened before a drain loop can reap the program, so it is the program's.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child.pid(), 0));
  std::optional<ChildEnd> end;
  for (int attempt = 0; !end; ++attempt) {
    bool all_said_exit = false;
    end = drain_beside(child, rings, writer, interrupts, quiet, said, pidfd,
                       attempt < kFinishAttempts ? &all_said_exit : nullptr);
    if (end || !all_said_exit) break;
    drain_the_rest(rings, writer);
    writer.prepare_finish();
    end = wait_for_the_end_after_finishing(child, rings, writer, interrupts, quiet, said, pidfd);
  }
  if (pidfd >= 0) close(pidfd);
  if (!end) end = child.wait();
  // The program is gone; processes it left behind may still write (they are not waited for).
  drain_the_rest(rings, writer);
  return *end;
}

void write_ring_meta(TraceWriter& w, const RingSet& rings) {
  w.set_meta("dropped_records", std::to_string(rings.dropped_records()));
  w.set_meta("producer_waits", std::to_string(rings.producer_waits()));
  w.set_meta("corrupt_ring_records", std::to_string(rings.corrupt_records()));
  w.set_traced_processes(rings.traced_processes());
  w.set_meta("untraced_processes", std::to_string(rings.refused_processes()));
}

}  // namespace

int run_main(int argc, char** argv) {
  ParsedRun parsed = parse_run_options(argc, argv);
  if (!parsed.options) return parsed.exit_status;
  const RunOptions& o = *parsed.options;
  std::string error;
  bool not_found = false;
  const auto program = find_program(o.program.front(), &not_found, &error);
  if (!program) {
    say_error(error);
    return not_found ? kExitNotFound : kExitNotExecutable;
  }
  const std::string inject = injector_library(&error);
  if (inject.empty()) {
    say_error(error);
    return kExitSetupFailed;
  }
  TracePaths paths;
  if (error = prepare_output(o, &paths); !error.empty()) {
    say_error(error);
    return kExitUsage;
  }
  if (!o.dump.empty() && mkdir(paths.dump_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    say_error("cannot create the dump folder " + paths.dump_dir + ": " + std::strerror(errno));
    return kExitUsage;
  }
  remove_orphaned_rings();  // rings left by collectors that were killed (SIGKILL cannot clean up)
  auto first_ring = RingConsumer::create(ring_name(), ring_slots_for(o.ring_mib), &error);
  if (!first_ring) {
    say_error(error + " (is /dev/shm mounted and large enough for --ring-size?)");
    return kExitSetupFailed;
  }
  auto writer = TraceWriter::create(paths.trace, paths.dump_folder, &error);
  if (!writer) {
    say_error(error);
    return kExitUsage;
  }
  if (o.max_size_mib > 0) writer->limit_size(static_cast<int64_t>(o.max_size_mib) << 20);
  // The trace says who is writing it before the program starts: a collector killed at any moment
  // after leaves a trace that names it.
  const int64_t start_ns = realtime_ns();
  RingSet rings(std::move(first_ring));
  write_start_meta(*writer, {o.program, current_dir(), start_ns, selection_json(o), rings.slot_count(), rings.name(),
                             variables_of_interest(user_environment())});
  writer->commit();

  InterruptForwarder interrupts;
  // An inherited SIG_IGN for SIGCHLD would reap the child behind waitpid's back.
  signal(SIGCHLD, SIG_DFL);
  auto child = ChildProcess::spawn(*program, o.program, program_environment(o, rings.name(), inject, paths), &error);
  if (!child) {
    say_error(error);
    writer.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((paths.trace + suffix).c_str());
    return kExitNotExecutable;
  }
  writer->set_meta("traced_pid", std::to_string(child->pid()));
  const ChildEnd end = collect(*child, rings, *writer, interrupts, o.quiet);

  const contract::RunEnd reason = run_end(end, *writer, interrupts.first_received());
  write_end_meta(*writer, end, reason, realtime_ns());
  write_ring_meta(*writer, rings);
  if (interrupts.first_received()) writer->set_meta("interrupted_by", signal_name(interrupts.first_received()));
  const bool stored = writer->finish();
  if (!stored) {
    say_error(fmt::format("the trace is incomplete: {}; it holds what was stored before{}", writer->incomplete(),
                          writer->counts().lost_to_storage
                              ? fmt::format(" ({} records were not stored)", writer->counts().lost_to_storage)
                              : ""));
  }
  if (!o.quiet) print_summary(o, *writer, rings, end, reason);
  const int status = end.shell_status();
  return status == 0 && !stored ? kExitSetupFailed : status;
}

}  // namespace fpscope
