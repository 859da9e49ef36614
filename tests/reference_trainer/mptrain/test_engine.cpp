// Tests of the trainer's engine pieces over the real kernel library: RAII tensors and the memory
// ledger (live and peak bytes per category, the peak of the total), views, and the Runtime
// helpers (cast, upload, fill, read back, launch errors and counters).
#include "errors.h"
#include "runtime.h"
#include "tensor.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mptrain;

namespace {

TEST(MemoryLedger, TracksPeaksPerCategoryAndOfTheTotal) {
  MemoryLedger ledger;
  ledger.on_alloc(MPT_CAT_WEIGHT, 100);
  ledger.on_alloc(MPT_CAT_ACTIVATION, 50);
  ledger.on_free(MPT_CAT_ACTIVATION, 50);
  ledger.on_alloc(MPT_CAT_GRADIENT, 30);
  ledger.on_alloc(MPT_CAT_ACTIVATION, 20);
  EXPECT_EQ(ledger.peak(MPT_CAT_WEIGHT), 100u);
  EXPECT_EQ(ledger.peak(MPT_CAT_ACTIVATION), 50u);
  EXPECT_EQ(ledger.peak(MPT_CAT_GRADIENT), 30u);
  EXPECT_EQ(ledger.peak_total(), 150u);  // not 180: the two activation peaks never coexisted
  EXPECT_EQ(ledger.live_total(), 150u);
  EXPECT_EQ(ledger.allocations(), 4u);
  EXPECT_EQ(ledger.frees(), 1u);
}

TEST(TensorHandle, FreesWithTheLastHandleAndViewsShareTheAllocation) {
  const MemoryLedger& ledger = memory_ledger();
  const std::size_t before = ledger.live_total();
  {
    Tensor t = Tensor::allocate("t", {2, 3, 4}, MPT_DTYPE_F16, MPT_DEVICE_CPU, MPT_CAT_ACTIVATION);
    EXPECT_EQ(t.bytes(), 48u);
    EXPECT_NE(t.id(), 0u);
    EXPECT_EQ(ledger.live_total(), before + 48);
    Tensor flat = t.reshaped({2, 12});
    EXPECT_EQ(flat.id(), t.id());
    EXPECT_EQ(flat.data(), t.data());
    EXPECT_THROW(t.reshaped({5}), KernelError);
    t.reset();
    EXPECT_EQ(ledger.live_total(), before + 48);  // the view still holds it
    mpt_tensor abi = flat.abi();
    EXPECT_EQ(abi.ndim, 2);
    EXPECT_EQ(abi.shape[1], 12);
    EXPECT_EQ(abi.dtype, MPT_DTYPE_F16);
    EXPECT_STREQ(abi.name, "t");
  }
  EXPECT_EQ(ledger.live_total(), before);
}

TEST(RuntimeHelpers, UploadCastsToSixteenBitsWithNearestEven) {
  Runtime rt(MPT_DEVICE_CPU);
  Tensor w = rt.alloc("w", {3}, MPT_DTYPE_F16, MPT_CAT_WEIGHT);
  rt.upload({1.0f, -2.0f, 65520.0f}, w);  // 65520 is halfway to 65536 and rounds to +Inf in fp16
  const uint16_t* bits = w.data_as<uint16_t>();
  EXPECT_EQ(bits[0], 0x3C00);
  EXPECT_EQ(bits[1], 0xC000);
  EXPECT_EQ(bits[2], 0x7C00);
  Tensor b = rt.alloc("b", {1}, MPT_DTYPE_BF16, MPT_CAT_WEIGHT);
  rt.upload({1.0f + 1.0f / 256.0f}, b);  // halfway between two bf16 values: ties to even (1.0)
  EXPECT_EQ(b.data_as<uint16_t>()[0], 0x3F80);
}

TEST(RuntimeHelpers, CastReturnsTheSameTensorWhenTheTypeMatches) {
  Runtime rt(MPT_DEVICE_CPU);
  Tensor x = rt.alloc("x", {4}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
  EXPECT_EQ(rt.cast(x, MPT_DTYPE_F32).id(), x.id());
  EXPECT_EQ(rt.launches(), 0u);
  Tensor y = rt.cast(x, MPT_DTYPE_BF16);
  EXPECT_NE(y.id(), x.id());
  EXPECT_EQ(y.name(), "x.bf16");
  EXPECT_EQ(y.dtype(), MPT_DTYPE_BF16);
  EXPECT_EQ(y.category(), MPT_CAT_ACTIVATION);
  EXPECT_EQ(rt.launches(), 1u);
  EXPECT_EQ(rt.launches_by_kernel().at("cast"), 1u);
}

TEST(RuntimeHelpers, FillAndReadBack) {
  Runtime rt(MPT_DEVICE_CPU);
  Tensor s = rt.alloc("s", {1}, MPT_DTYPE_F32, MPT_CAT_WORKSPACE);
  rt.fill(s, 1024.0);
  EXPECT_EQ(rt.read_scalar(s), 1024.0);
  Tensor i = rt.alloc("i", {1}, MPT_DTYPE_I32, MPT_CAT_WORKSPACE);
  rt.fill(i, 7.0);
  EXPECT_EQ(rt.read_scalar(i), 7.0);
}

TEST(RuntimeHelpers, FailedLaunchNamesKernelAndReason) {
  Runtime rt(MPT_DEVICE_CPU);
  Tensor x = rt.alloc("x", {4}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
  Tensor y = rt.alloc("y", {5}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
  try {
    rt.launch("relu_forward", {&x}, {&y});
    FAIL() << "a shape mismatch was accepted";
  } catch (const KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("'relu_forward'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt.launch("no_such_kernel", {}, {&x}), KernelError);
}

TEST(RuntimeHelpers, CudaWithoutDeviceIsADeviceError) {
  Runtime rt(MPT_DEVICE_CUDA);
  try {
    Tensor t = rt.alloc("t", {4}, MPT_DTYPE_F32, MPT_CAT_ACTIVATION);
    GTEST_SKIP() << "a CUDA device is available";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("'t'"), std::string::npos) << e.what();
  }
}

}  // namespace
