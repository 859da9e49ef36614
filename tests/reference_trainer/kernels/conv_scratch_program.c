/* One conv2d_forward launch in a fresh process, with the interposition shim preloaded: the shim
 * prints every mpt_alloc, and the test mpt_kernels_conv_scratch expects the convolution's scratch
 * among them with the sizes its geometry implies: the im2col matrix, C*R*S x N*P*Q floats, and the
 * product, K x N*P*Q floats (N=4, C=3, 10x10 images, K=5 3x3 filters, stride 1, padding 1:
 * P=Q=10, so 27 x 400 floats = 43200 bytes and 5 x 400 floats = 8000 bytes). */
#include <stdio.h>
#include <string.h>

#include "mpt/abi.h"

static mpt_tensor tensor4(float* data, const char* name, int64_t a, int64_t b, int64_t c, int64_t d, int ndim) {
  mpt_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.name = name;
  t.shape[0] = a, t.shape[1] = b, t.shape[2] = c, t.shape[3] = d;
  t.ndim = ndim;
  t.dtype = MPT_DTYPE_F32;
  t.device = MPT_DEVICE_CPU;
  return t;
}

int main(void) {
  static float x[4 * 3 * 10 * 10], w[5 * 3 * 3 * 3], b[5], y[4 * 5 * 10 * 10];
  for (size_t i = 0; i < sizeof x / sizeof x[0]; ++i) x[i] = (float)(i % 7) - 3.0f;
  for (size_t i = 0; i < sizeof w / sizeof w[0]; ++i) w[i] = 0.125f * (float)(i % 5);
  mpt_tensor inputs[3] = {tensor4(x, "x", 4, 3, 10, 10, 4), tensor4(w, "w", 5, 3, 3, 3, 4), tensor4(b, "b", 5, 0, 0, 0, 1)};
  mpt_tensor out = tensor4(y, "y", 4, 5, 10, 10, 4);
  mpt_scalar scalars[2] = {{"stride", 1}, {"padding", 1}};
  mpt_launch_desc conv = {MPT_ABI_VERSION, 0, "conv2d_forward", inputs, 3, 1, &out, scalars, 2, 0, NULL};
  if (mpt_launch(&conv) != MPT_OK) {
    printf("launch failed: %s\n", mpt_last_error());
    return 1;
  }
  printf("done\n");
  return 0;
}
