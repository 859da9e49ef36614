/* A minimal stand-in for a tool: preloaded into a program linked against libmpt_kernels.so, it
 * interposes mpt_launch, forwards to the real one found with dlsym(RTLD_NEXT) and prints what it
 * saw. If the library bound its ABI calls internally (-Bsymbolic, hidden visibility, inlining),
 * nothing would be printed and the interposition test would fail. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "mpt/abi.h"

int mpt_launch(const mpt_launch_desc* launch) {
  static int (*real_launch)(const mpt_launch_desc*) = NULL;
  if (!real_launch) *(void**)(&real_launch) = dlsym(RTLD_NEXT, "mpt_launch");
  if (!real_launch) {
    fprintf(stderr, "interpose_shim: the real mpt_launch was not found\n");
    return MPT_ERR_DEVICE;
  }
  int status = real_launch(launch);
  printf("intercepted %s: status %d, ", launch->kernel, status);
  return status;
}
