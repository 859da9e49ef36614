// The CUDA kernels' scratch comes from mpt_alloc as workspace named after the kernel, with the
// sizes the launch's geometry implies, and is reused from the thread's cache on the same stream
// only. This program defines mpt_alloc and mpt_free itself, so the emulated backend compiled into
// it calls these: they record each call and hand it on to the library's own.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_scratch.h"
#include "mpt/abi.h"
#include "mpt/cuda_backend.h"

namespace {

struct AllocCall {
  std::string name;
  int category;
  int device;
  size_t bytes;
};
std::vector<AllocCall> g_allocs;
int g_frees = 0;

template <typename Fn>
Fn next_symbol(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) std::abort();
  return reinterpret_cast<Fn>(f);
}

}  // namespace

extern "C" void* mpt_alloc(size_t bytes, int32_t device, int32_t category, const char* name, uint64_t* id_out) {
  static auto real = next_symbol<void* (*)(size_t, int32_t, int32_t, const char*, uint64_t*)>("mpt_alloc");
  g_allocs.push_back({name ? name : "", category, device, bytes});
  return real(bytes, device, category, name, id_out);
}

extern "C" void mpt_free(void* p, int32_t device) {
  static auto real = next_symbol<void (*)(void*, int32_t)>("mpt_free");
  ++g_frees;
  real(p, device);
}

namespace {

mpt_tensor tensor(void* data, const char* name, std::vector<int64_t> shape, int dtype) {
  mpt_tensor t{};
  t.data = data;
  t.name = name;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.dtype = dtype;
  t.device = MPT_DEVICE_CUDA;  // emulated device memory is host memory
  return t;
}

int launch(const char* kernel, std::vector<mpt_tensor> in, std::vector<mpt_tensor> out,
           std::vector<mpt_scalar> scalars, void* stream) {
  mpt_launch_desc d{MPT_ABI_VERSION, 0, kernel, in.data(), static_cast<int32_t>(in.size()),
                    static_cast<int32_t>(out.size()), out.data(), scalars.data(),
                    static_cast<int32_t>(scalars.size()), 0, stream, nullptr};
  std::string error;
  const int status = mpt::cuda::launch(d, &error);
  EXPECT_EQ(status, MPT_OK) << kernel << ": " << error;
  return status;
}

TEST(EmulatedCudaScratch, ConvolutionScratchIsWorkspaceWithTheSizesItsGeometryImplies) {
  mpt::cuda::detail::drop_scratch_cache();
  g_allocs.clear();
  g_frees = 0;
  // N=4, C=3, 10x10 images, K=5 3x3 filters, stride 1, padding 1: P=Q=10. One chunk of samples:
  // the fp32 accumulator is K x N*P*Q floats (8000 bytes), the column buffer C*R*S x N*P*Q floats
  // (43200 bytes).
  std::vector<float> x(4 * 3 * 10 * 10, 0.5f), w(5 * 3 * 3 * 3, 0.25f), b(5, 0.0f), y(4 * 5 * 10 * 10);
  auto conv = [&](void* stream) {
    return launch("conv2d_forward",
                  {tensor(x.data(), "x", {4, 3, 10, 10}, MPT_DTYPE_F32), tensor(w.data(), "w", {5, 3, 3, 3}, MPT_DTYPE_F32),
                   tensor(b.data(), "b", {5}, MPT_DTYPE_F32)},
                  {tensor(y.data(), "y", {4, 5, 10, 10}, MPT_DTYPE_F32)}, {{"stride", 1}, {"padding", 1}}, stream);
  };
  void* stream_a = &x;  // any distinct non-null handles name two streams to the emulation
  void* stream_b = &w;
  ASSERT_EQ(conv(stream_a), MPT_OK);
  ASSERT_EQ(g_allocs.size(), 2u);
  EXPECT_EQ(g_allocs[0].name, "conv2d_forward.scratch");
  EXPECT_EQ(g_allocs[0].category, MPT_CAT_WORKSPACE);
  EXPECT_EQ(g_allocs[0].bytes, 8000u);
  EXPECT_EQ(g_allocs[1].name, "conv2d_forward.scratch");
  EXPECT_EQ(g_allocs[1].bytes, 43200u);
  EXPECT_EQ(g_frees, 0);
  // Each output sums 0.5 * 0.25 over the window's positions inside the image, 3 channels each:
  // 4 positions at a corner, all 9 inside.
  EXPECT_EQ(y[0], 12 * 0.125f);
  EXPECT_EQ(y[11], 27 * 0.125f);

  // The same launch on the same stream takes both blocks from the cache.
  ASSERT_EQ(conv(stream_a), MPT_OK);
  EXPECT_EQ(g_allocs.size(), 2u);
  // On another stream a cached block could still be in use by queued work: fresh blocks.
  ASSERT_EQ(conv(stream_b), MPT_OK);
  ASSERT_EQ(g_allocs.size(), 4u);
  EXPECT_EQ(g_allocs[2].bytes, 8000u);
  EXPECT_EQ(g_allocs[3].bytes, 43200u);
  EXPECT_EQ(g_frees, 0);

  // Dropping the cache gives every block back through mpt_free.
  mpt::cuda::detail::drop_scratch_cache();
  EXPECT_EQ(g_frees, 4);
}

TEST(EmulatedCudaScratch, HalfPrecisionPoolingBackwardAccumulatesInNamedScratch) {
  mpt::cuda::detail::drop_scratch_cache();
  g_allocs.clear();
  // dx is fp16 [2, 3, 4, 4]: its sums are kept in an fp32 scratch buffer of 96 floats.
  std::vector<uint16_t> dy(2 * 3 * 2 * 2, 0x3c00 /* 1.0 */), dx(2 * 3 * 4 * 4, 0xffff);
  std::vector<int32_t> argmax(2 * 3 * 2 * 2);
  for (size_t i = 0; i < argmax.size(); ++i) argmax[i] = static_cast<int32_t>((i % 4) * 5);  // 0, 5, 10, 15
  ASSERT_EQ(launch("maxpool2d_backward",
                   {tensor(dy.data(), "dy", {2, 3, 2, 2}, MPT_DTYPE_F16), tensor(argmax.data(), "argmax", {2, 3, 2, 2}, MPT_DTYPE_I32)},
                   {tensor(dx.data(), "dx", {2, 3, 4, 4}, MPT_DTYPE_F16)}, {}, &dy),
            MPT_OK);
  ASSERT_EQ(g_allocs.size(), 1u);
  EXPECT_EQ(g_allocs[0].name, "maxpool2d_backward.scratch");
  EXPECT_EQ(g_allocs[0].category, MPT_CAT_WORKSPACE);
  EXPECT_EQ(g_allocs[0].bytes, 96u * sizeof(float));
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_EQ(dx[i], (i % 16) % 5 == 0 ? 0x3c00 : 0) << i;
  mpt::cuda::detail::drop_scratch_cache();
}

}  // namespace
