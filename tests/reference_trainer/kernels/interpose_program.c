/* A tiny program linked against libmpt_kernels.so that launches two kernels and checks their
 * results; run with the interposition shim preloaded by the test mpt_kernels_interposition. */
#include <stdio.h>
#include <string.h>

#include "mpt/abi.h"

static mpt_tensor vector_tensor(float* data, int64_t n, const char* name) {
  mpt_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.name = name;
  t.shape[0] = n;
  t.ndim = 1;
  t.dtype = MPT_DTYPE_F32;
  t.device = MPT_DEVICE_CPU;
  return t;
}

int main(void) {
  float a[4] = {0}, b[4] = {0};
  mpt_tensor ta = vector_tensor(a, 4, "a"), tb = vector_tensor(b, 4, "b");
  mpt_scalar value = {"value", 2.5};
  mpt_launch_desc fill = {MPT_ABI_VERSION, 0, "fill", NULL, 0, 1, &ta, &value, 1, 0, NULL};
  mpt_launch_desc copy = {MPT_ABI_VERSION, 0, "copy", &ta, 1, 1, &tb, NULL, 0, 0, NULL};
  if (mpt_launch(&fill) != MPT_OK || mpt_launch(&copy) != MPT_OK) {
    printf("launch failed: %s\n", mpt_last_error());
    return 1;
  }
  printf("\nresult %g %g\n", a[3], b[3]);
  return b[3] == 2.5f ? 0 : 1;
}
