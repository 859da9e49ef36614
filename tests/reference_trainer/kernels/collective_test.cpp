// allreduce_sum through a communicator that stands in for the other ranks: rank 0 of 3, whose
// allgather returns this process's bytes in slot 0 and canned bytes of ranks 1 and 2 in theirs.
// The sums are checked against exact arithmetic written here: rank-order addition, each sum
// rounded to the dtype (the library's rounding is not used).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "mpt/abi.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;

// The other ranks' tensors for the next allgather calls, in call order.
struct FakeRanks {
  std::vector<std::vector<HostTensor>> calls;  // calls[c][r - 1]: rank r's tensor in call c
  std::size_t next = 0;
  bool fail = false;
};

int fake_allgather(void* context, const void* send, void* recv, size_t bytes) {
  auto* fake = static_cast<FakeRanks*>(context);
  if (fake->fail || fake->next >= fake->calls.size()) return 1;
  auto* out = static_cast<unsigned char*>(recv);
  std::memcpy(out, send, bytes);
  std::vector<HostTensor>& others = fake->calls[fake->next++];
  for (std::size_t r = 0; r < others.size(); ++r) std::memcpy(out + (r + 1) * bytes, others[r].data(), bytes);
  return 0;
}

class Allreduce : public ::testing::Test {
 protected:
  void SetUp() override {
    mpt_communicator comm{0, 3, &fake_, fake_allgather};
    mpt_set_communicator(&comm);
  }
  void TearDown() override { mpt_set_communicator(nullptr); }
  FakeRanks fake_;
};

TEST_F(Allreduce, SumsInRankOrderRoundingEveryAdditionToTheDtype) {
  // fp16: 0.1 + 0.2 + 0.3 with a rounding after each addition; 40000 + 30000 overflows (65504 is
  // the largest fp16) though each share is finite; a subnormal plus zeros stays itself.
  const std::vector<double> mine = {0.1, 40000, 6e-8, -2.5, 1.0};
  const std::vector<double> r1 = {0.2, 30000, 0.0, 2.5, 1.0 / 2048};
  const std::vector<double> r2 = {0.3, 0.0, 0.0, 0.0, 1.0 / 2048};
  for (int dtype : {MPT_DTYPE_F16, MPT_DTYPE_BF16, MPT_DTYPE_F32}) {
    HostTensor x = HostTensor::from_values({5}, mine, dtype, "g");
    HostTensor a = x;
    fake_.calls = {{HostTensor::from_values({5}, r1, dtype), HostTensor::from_values({5}, r2, dtype)}};
    fake_.next = 0;
    ASSERT_EQ(launch("allreduce_sum", {&x}, {&x}), MPT_OK) << mpt_last_error();
    for (int64_t i = 0; i < 5; ++i) {
      double acc = a.value(i);
      acc = mpt_test::reference_round(acc + fake_.calls[0][0].value(i), dtype);
      acc = mpt_test::reference_round(acc + fake_.calls[0][1].value(i), dtype);
      EXPECT_EQ(x.value(i), acc) << "dtype " << dtype << " element " << i;
    }
    // fp16's largest value is 65504: the shares are finite, their sum is not.
    if (dtype == MPT_DTYPE_F16) EXPECT_TRUE(std::isinf(x.value(1)) && x.value(1) > 0);
    else EXPECT_TRUE(std::isfinite(x.value(1)));
  }
}

TEST_F(Allreduce, EveryTensorOfALaunchAndIntegerCountsToo) {
  HostTensor c = HostTensor::i32({2}, {7, -3}, "correct");
  HostTensor f = HostTensor::from_values({1}, {1.0}, MPT_DTYPE_F32, "found_inf");
  HostTensor out = HostTensor::from_values({1}, {0.0}, MPT_DTYPE_F32, "found_inf.sum");
  fake_.calls = {{HostTensor::i32({2}, {5, 3}), HostTensor::i32({2}, {-12, 2147483647})},
                 {HostTensor::from_values({1}, {0.0}), HostTensor::from_values({1}, {1.0})}};
  ASSERT_EQ(launch("allreduce_sum", {&c, &f}, {&c, &out}), MPT_OK) << mpt_last_error();
  EXPECT_EQ(c.i32_at(0), 0);
  EXPECT_EQ(c.i32_at(1), static_cast<int32_t>(static_cast<uint32_t>(-3) + 3u + 2147483647u));  // wraps
  EXPECT_EQ(out.value(0), 2.0);
  EXPECT_EQ(f.value(0), 1.0);  // an output apart from its input: the input is left alone
}

TEST_F(Allreduce, ATransportFailureIsAnErrorThatSaysSo) {
  fake_.fail = true;
  HostTensor x = HostTensor::from_values({2}, {1, 2}, MPT_DTYPE_F32, "fc1.weight.grad");
  EXPECT_EQ(launch("allreduce_sum", {&x}, {&x}), MPT_ERR_COMMUNICATION);
  EXPECT_NE(std::string(mpt_last_error()).find("allgather failed for"), std::string::npos) << mpt_last_error();
  EXPECT_NE(std::string(mpt_last_error()).find("fc1.weight.grad"), std::string::npos) << mpt_last_error();
}

TEST_F(Allreduce, MismatchedTensorsAreRefused) {
  HostTensor x = HostTensor::from_values({2}, {1, 2}, MPT_DTYPE_F32);
  HostTensor y = HostTensor::from_values({3}, {1, 2, 3}, MPT_DTYPE_F32);
  HostTensor h = HostTensor::from_values({2}, {1, 2}, MPT_DTYPE_F16);
  EXPECT_EQ(launch("allreduce_sum", {&x}, {&y}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(launch("allreduce_sum", {&x}, {&h}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(launch("allreduce_sum", {&x, &x}, {&x}), MPT_ERR_BAD_ARGUMENTS);
  EXPECT_EQ(fake_.next, 0u);  // nothing was sent
}

TEST(AllreduceAlone, WithoutACommunicatorTheSumIsTheTensorItself) {
  mpt_set_communicator(nullptr);
  HostTensor x = HostTensor::from_values({3}, {1.5, -2, 1e-3}, MPT_DTYPE_F16);
  HostTensor y = HostTensor::from_values({3}, {0, 0, 0}, MPT_DTYPE_F16);
  ASSERT_EQ(launch("allreduce_sum", {&x}, {&y}), MPT_OK) << mpt_last_error();
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(y.bits16(i), x.bits16(i));
}

}  // namespace
