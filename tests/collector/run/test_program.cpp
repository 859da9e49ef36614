// A tiny program for the `fpscope run` tests. It never uses the kernel library; when asked, it
// produces records into the ring itself (FPSCOPE_RING), as the injector would.
//   test_program exit N                     exit with status N
//   test_program segv | kill-self           die of SIGSEGV / SIGKILL
//   test_program produce COUNT_FILE US      write numbered Scalar records until it SIGKILLs itself
//                                           US microseconds after the first; COUNT_FILE holds (8 bytes) how
//                                           many were published, updated after each publish
//   test_program trickle COUNT MS           write COUNT Scalar records, one every MS milliseconds (a
//                                           program that publishes now and then: collector/bench/idle.sh)
//   test_program trap MESSAGE               write a Trap record, wait for the drain, raise SIGTRAP
//   test_program env FILE                   write its environment to FILE, one variable a line
//   test_program wait STARTED_FILE          create STARTED_FILE, then sleep up to 30 s
//   test_program exit-then TRACE MORE       announce itself, write Scalar 1, say it exits (ProcessExit),
//                                           wait until TRACE says the collector completed it
//                                           (meta finished_during_exit = 1), then MORE: "nothing";
//                                           "record": Scalar 2 on its ring; "process": a child on a
//                                           sibling ring writes Scalar 3 and says it exits; either
//                                           waits until the collector has read it (else exits 98)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include <sqlite3.h>
#include <sys/wait.h>

#include "fpscope/collector/ring.h"

extern char** environ;

namespace {

using namespace fpscope;

std::unique_ptr<RingProducer> attach_ring() {
  std::string error;
  auto p = RingProducer::attach(std::getenv(kRingEnv), &error);
  if (!p || !p->claim()) {
    std::fprintf(stderr, "test_program: %s\n", error.c_str());
    std::exit(90);
  }
  return p;
}

void write_string(RingProducer& p, uint32_t id, const std::string& s) {
  const uint16_t slots = wire::slots_for(offsetof(wire::StringRecord, bytes), s.size());
  auto* r = static_cast<wire::StringRecord*>(p.reserve(slots));
  r->h = {wire::RecordType::String, slots, 1};
  r->id = id;
  r->length = static_cast<uint32_t>(s.size());
  std::memcpy(r->bytes, s.data(), s.size());
  p.publish();
}

// A Scalar record named by string 1; exits 92 when the ring has no room.
void write_scalar(RingProducer& p, int64_t t_ns, int64_t step, double value) {
  auto* r = static_cast<wire::ScalarRecord*>(p.reserve(1));
  if (!r) std::exit(92);
  *r = {};
  r->h = {wire::RecordType::Scalar, 1, 1};
  r->t_ns = t_ns;
  r->step = step;
  r->value = value;
  r->name = 1;
  p.publish();
}

[[noreturn]] void produce(const char* count_file, long kill_after_us) {
  int fd = open(count_file, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 8) != 0) std::exit(91);
  auto* published = static_cast<std::atomic<uint64_t>*>(mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  auto ring = attach_ring();
  write_string(*ring, 1, "counter");
  for (int64_t i = 0;; ++i) {
    if (i == 1) {  // the clock starts at the first publish, however late a busy machine ran us
      std::thread killer([kill_after_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(kill_after_us));
        raise(SIGKILL);
      });
      killer.detach();
    }
    write_scalar(*ring, i, i, static_cast<double>(i) * 0.5);
    published->store(static_cast<uint64_t>(i + 1), std::memory_order_release);
  }
}

void trickle(long count, long gap_ms) {
  auto ring = attach_ring();
  write_string(*ring, 1, "trickle");
  for (long i = 0; i < count; ++i) {
    write_scalar(*ring, i, i, static_cast<double>(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
}

[[noreturn]] void trap(const std::string& message) {
  auto ring = attach_ring();
  write_string(*ring, 1, message);
  auto* r = static_cast<wire::TrapRecord*>(ring->reserve(1));
  *r = {};
  r->h = {wire::RecordType::Trap, 1, 1};
  r->seq = 42;
  r->t_ns = 1000;
  r->reason = 1;
  ring->publish();
  ring->wait_drained(std::chrono::seconds(10));
  std::fprintf(stderr, "%s\n", message.c_str());
  raise(SIGTRAP);
  std::exit(93);
}

// A process's first records, as the injector writes them: its strings, its Process record.
void announce(RingProducer& p) {
  write_string(p, 1, "counter");
  write_string(p, 2, "test_program");
  auto* r = static_cast<wire::ProcessRecord*>(p.reserve(1));
  *r = {};
  r->h = {wire::RecordType::Process, 1, 1};
  r->protocol = wire::kProtocolVersion;
  r->pid = getpid();
  r->exe = 2;
  r->local_rank = r->world_size = -1;
  p.publish();
}

void say_exit(RingProducer& p) {
  auto* r = static_cast<wire::ProcessExitRecord*>(p.reserve(1));
  *r = {};
  r->h = {wire::RecordType::ProcessExit, 1, 1};
  r->t_ns = 1;
  p.publish();
}

// Whether the trace says it was completed while its processes were exiting.
bool finished_during_exit(const std::string& trace) {
  sqlite3* db = nullptr;
  bool yes = false;
  if (sqlite3_open_v2(("file:" + trace + "?mode=ro").c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) ==
      SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'finished_during_exit'", -1, &st, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      yes = std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "1") == 0;
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return yes;
}

int exit_then(const std::string& trace, const std::string& more) {
  auto ring = attach_ring();
  announce(*ring);
  write_scalar(*ring, 1, 0, 1);
  say_exit(*ring);
  int i = 0;
  for (; i < 6000 && !finished_during_exit(trace); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (i == 6000) return 95;
  // Each waits until the collector has read what it wrote, as a program that goes on running
  // would need it to (a collector that stopped draining would keep it waiting).
  constexpr auto kDrainLimit = std::chrono::seconds(20);
  if (more == "record") {
    write_scalar(*ring, 2, 0, 2);
    if (!ring->wait_drained(kDrainLimit)) return 98;
  }
  if (more == "process") {
    const pid_t child = fork();
    if (child == 0) {
      std::string error;
      auto sibling = RingProducer::create_sibling(*ring, std::getenv(kRingEnv), &error);
      if (!sibling) _exit(96);
      announce(*sibling);
      write_scalar(*sibling, 3, 0, 3);
      say_exit(*sibling);
      _exit(sibling->wait_drained(kDrainLimit) ? 0 : 98);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 97;
    return WEXITSTATUS(status);
  }
  return 0;
}

// Keeps a processor busy until this process has used `ms` milliseconds of CPU time.
int spin(long ms) {
  timespec used{};
  volatile uint64_t work = 0;
  do {
    for (int i = 0; i < 100000; ++i) work = work + static_cast<uint64_t>(i);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  } while (used.tv_sec * 1000L + used.tv_nsec / 1000000L < ms);
  return 0;
}

int write_environment(const char* file) {
  FILE* f = std::fopen(file, "w");
  if (!f) return 94;
  for (char** e = environ; *e; ++e) std::fprintf(f, "%s\n", *e);
  std::fclose(f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "exit" && argc > 2) return std::atoi(argv[2]);
  if (mode == "segv") {
    volatile int* nowhere = nullptr;
    return *nowhere;
  }
  if (mode == "kill-self") raise(SIGKILL);
  if (mode == "produce" && argc > 3) produce(argv[2], std::atol(argv[3]));
  if (mode == "trickle" && argc > 3) {
    trickle(std::atol(argv[2]), std::atol(argv[3]));
    return 0;
  }
  if (mode == "trap" && argc > 2) trap(argv[2]);
  if (mode == "env" && argc > 2) return write_environment(argv[2]);
  if (mode == "spin" && argc > 2) return spin(std::atol(argv[2]));
  if (mode == "wait-for" && argc > 3) {  // says it started, then runs until the file argv[3] exists
    if (FILE* f = std::fopen(argv[2], "w")) std::fclose(f);
    for (int i = 0; i < 3000 && access(argv[3], F_OK) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return 0;
  }
  if (mode == "exit-then" && argc > 3) return exit_then(argv[2], argv[3]);
  if (mode == "wait" && argc > 2) {
    if (FILE* f = std::fopen(argv[2], "w")) std::fclose(f);
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  std::fprintf(stderr, "test_program: unknown mode\n");
  return 64;
}
