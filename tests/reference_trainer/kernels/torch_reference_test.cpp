// SGD and AdamW against PyTorch itself, when the reference Python has torch (python3-torch):
// three steps of torch.optim.SGD / AdamW on the same parameters and gradients must land within a
// few fp32 ulps of the kernels (PyTorch's vectorised CPU code fuses some multiply-adds that the
// documented kernel formulas keep separate). Skipped without torch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "kernel_test_util.h"

namespace {

using mpt_test::HostTensor;
using mpt_test::launch;
using mpt_test::Scalars;

bool torch_available() {
  std::string command = std::string(FPSCOPE_REFERENCE_PYTHON) +
                        " -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(\"torch\") is None)'";
  return std::system(command.c_str()) == 0;
}

// Runs each torch.optim constructor (on a parameter `p`) for len(grads) steps in one Python
// process (importing torch takes seconds); returns the final parameter values of each.
std::vector<std::vector<double>> torch_steps(const std::vector<double>& p0, const std::vector<std::vector<double>>& grads,
                                             const std::vector<std::string>& optimizers) {
  std::ostringstream script;
  script.precision(17);
  script << "import torch\n";
  for (const std::string& optimizer : optimizers) {
    script << "p = torch.tensor([";
    for (double v : p0) script << v << ",";
    script << "], dtype=torch.float32, requires_grad=True)\nopt = " << optimizer << "\n";
    for (const auto& g : grads) {
      script << "p.grad = torch.tensor([";
      for (double v : g) script << v << ",";
      script << "], dtype=torch.float32)\nopt.step()\n";
    }
    script << "print(' '.join(repr(float(x)) for x in p.detach()))\n";
  }
  std::string path = ::testing::TempDir() + "/torch_reference.py";
  std::ofstream(path) << script.str();
  std::string command = std::string(FPSCOPE_REFERENCE_PYTHON) + " " + path;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::vector<std::vector<double>> out(optimizers.size());
  double v;
  for (auto& values : out)
    for (size_t i = 0; i < p0.size() && pipe && fscanf(pipe.get(), "%lf", &v) == 1; ++i) values.push_back(v);
  return out;
}

void expect_within_ulps(const HostTensor& got, const std::vector<double>& want, int ulps, const char* what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what << ": torch gave no result";
  for (size_t i = 0; i < want.size(); ++i) {
    float w = static_cast<float>(want[i]);
    double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    EXPECT_NEAR(got.value(static_cast<int64_t>(i)), want[i], ulps * ulp) << what << " element " << i;
  }
}

const std::vector<double> kParams{1.0, -2.0, 0.5, 3.0, -0.25, 1e-3};
const std::vector<std::vector<double>> kGrads{{0.3, -0.01, 2.0, 0.0, 1.5, -4.0},
                                              {0.2, 0.05, -1.0, 0.1, 1.5, -3.0},
                                              {-0.1, 0.02, 0.5, 0.3, 1.0, 2.0}};

TEST(TorchReference, SgdAndAdamW) {
  if (!torch_available()) GTEST_SKIP() << FPSCOPE_REFERENCE_PYTHON << " has no torch";
  auto want = torch_steps(kParams, kGrads,
                          {"torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)",
                           "torch.optim.AdamW([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)"});
  auto sgd_p = HostTensor::from_values({6}, kParams, MPT_DTYPE_F32, "p");
  auto adam_p = HostTensor::from_values({6}, kParams, MPT_DTYPE_F32, "p");
  HostTensor buf({6}, MPT_DTYPE_F32, "momentum"), m({6}, MPT_DTYPE_F32, "exp_avg"), v({6}, MPT_DTYPE_F32, "exp_avg_sq");
  for (size_t t = 0; t < kGrads.size(); ++t) {
    auto g = HostTensor::from_values({6}, kGrads[t], MPT_DTYPE_F32, "g");
    double step = static_cast<double>(t + 1);
    Scalars sgd{{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"step", step}};
    ASSERT_EQ(launch("sgd_step", {&sgd_p, &g, &buf}, {&sgd_p, &buf}, sgd), MPT_OK) << mpt_last_error();
    Scalars adam{{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.05}, {"step", step}};
    ASSERT_EQ(launch("adamw_step", {&adam_p, &g, &m, &v}, {&adam_p, &m, &v}, adam), MPT_OK) << mpt_last_error();
  }
  expect_within_ulps(sgd_p, want[0], 4, "sgd");
  expect_within_ulps(adam_p, want[1], 4, "adamw");
}

}  // namespace
