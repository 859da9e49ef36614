/* A tiny interposer used by the injection test: it exports mpt_launch, mpt_alloc and mpt_free,
 * counts every call (launches per kernel name too), forwards to the real library found with
 * dlsym(RTLD_NEXT), and at exit writes its counts to the file named by MPTRAIN_SHIM_OUT.
 * If mptrain's own counters agree with these, no kernel or allocation bypasses the ABI.
 * MPTRAIN_SHIM_FAIL=KERNEL makes every launch of KERNEL fail (MPT_ERR_BAD_ARGUMENTS, with a
 * message from mpt_last_error()) without running it, to test how mptrain reports kernel errors. */
#define _GNU_SOURCE
#include <mpt/abi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KERNELS 128

static unsigned long long g_launches, g_allocs, g_frees, g_scratch_allocs;
static char g_kernel_names[MAX_KERNELS][64];
static unsigned long long g_kernel_counts[MAX_KERNELS];
static int g_kernel_kinds;
static int g_planted_failure; /* the last launch failed on purpose */

static void* real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == NULL) {
    fprintf(stderr, "count_shim: %s not found after the shim\n", name);
    abort();
  }
  return fn;
}

static void count_kernel(const char* name) {
  for (int i = 0; i < g_kernel_kinds; ++i) {
    if (strcmp(g_kernel_names[i], name) == 0) {
      ++g_kernel_counts[i];
      return;
    }
  }
  if (g_kernel_kinds < MAX_KERNELS) {
    snprintf(g_kernel_names[g_kernel_kinds], sizeof g_kernel_names[0], "%s", name);
    g_kernel_counts[g_kernel_kinds++] = 1;
  }
}

MPT_API int mpt_launch(const mpt_launch_desc* launch) {
  static int (*next)(const mpt_launch_desc*);
  if (next == NULL) next = (int (*)(const mpt_launch_desc*))real("mpt_launch");
  ++g_launches;
  count_kernel(launch->kernel);
  const char* fail = getenv("MPTRAIN_SHIM_FAIL");
  g_planted_failure = fail != NULL && strcmp(fail, launch->kernel) == 0;
  if (g_planted_failure) return MPT_ERR_BAD_ARGUMENTS;
  return next(launch);
}

MPT_API const char* mpt_last_error(void) {
  static const char* (*next)(void);
  if (next == NULL) next = (const char* (*)(void))real("mpt_last_error");
  return g_planted_failure ? "planted failure from count_shim" : next();
}

MPT_API void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name, uint64_t* id_out) {
  static void* (*next)(size_t, int32_t, int32_t, const char*, uint64_t*);
  if (next == NULL) next = (void* (*)(size_t, int32_t, int32_t, const char*, uint64_t*))real("mpt_alloc");
  ++g_allocs;
  /* The kernel library's own scratch ("<kernel>.scratch", workspace): mptrain does not count it. */
  const size_t len = name ? strlen(name) : 0;
  if (category == MPT_CAT_WORKSPACE && len > 8 && strcmp(name + len - 8, ".scratch") == 0) ++g_scratch_allocs;
  return next(bytes, device, category, name, id_out);
}

MPT_API void mpt_free(void* ptr, int32_t device) {
  static void (*next)(void*, int32_t);
  if (next == NULL) next = (void (*)(void*, int32_t))real("mpt_free");
  if (ptr != NULL) ++g_frees;
  next(ptr, device);
}

__attribute__((destructor)) static void write_counts(void) {
  const char* path = getenv("MPTRAIN_SHIM_OUT");
  if (path == NULL) return;
  FILE* out = fopen(path, "w");
  if (out == NULL) return;
  fprintf(out, "launches %llu\nallocations %llu\nfrees %llu\nscratch_allocations %llu\n", g_launches, g_allocs, g_frees,
          g_scratch_allocs);
  for (int i = 0; i < g_kernel_kinds; ++i) fprintf(out, "kernel %s %llu\n", g_kernel_names[i], g_kernel_counts[i]);
  fclose(out);
}
