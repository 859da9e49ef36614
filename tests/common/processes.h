// Process helpers the tests share.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fpscope::test {

// A pid that named a process a moment ago and names none now: a child that exited and was reaped.
// Tests of "is that process still there" use it as a process known to be gone.
inline pid_t reaped_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

}  // namespace fpscope::test
