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

/* Every allocation, scratch included: a kernel's scratch reaches mpt_alloc from inside the library,
 * through the PLT, so a tool sees it like any tensor (the conv scratch test reads these lines). */
void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name, uint64_t* id_out) {
  static void* (*real_alloc)(size_t, int32_t, int32_t, const char*, uint64_t*) = NULL;
  if (!real_alloc) *(void**)(&real_alloc) = dlsym(RTLD_NEXT, "mpt_alloc");
  if (!real_alloc) return NULL;
  printf("alloc %s category %d bytes %zu\n", name ? name : "", (int)category, bytes);
  return real_alloc(bytes, device, category, name, id_out);
}
