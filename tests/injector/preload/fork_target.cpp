// A small traced program for the fork tests: it reports who it is through mpt_log_text() before
// and after forking, so the trace shows which processes wrote into the ring.
//   fork_target first   fork before any kernel-library call, then both sides call
//   fork_target later   call, fork, then both sides call
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "mpt/abi.h"

int main(int argc, char** argv) {
  const bool fork_first = argc > 1 && std::strcmp(argv[1], "first") == 0;
  if (!fork_first) mpt_log_text("who", "parent-before-fork");
  const pid_t child = fork();
  if (child == 0) {
    mpt_log_text("who", "child");
    uint64_t id = 0;
    void* p = mpt_alloc(64, MPT_DEVICE_CPU, MPT_CAT_WORKSPACE, "child.buffer", &id);
    mpt_free(p, MPT_DEVICE_CPU);
    _exit(p != nullptr && id != 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  mpt_log_text("who", "parent-after-fork");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
