// A C++ program that loads a model saved from Python, enables the fuser and checks
// that the model's elementwise chain ran as one generated kernel and matches eager.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cstdlib>

#include "api.h"
#include "stats.h"

TEST(LoadModel, FusesAndMatchesEager) {
  const char* dir = std::getenv("FUSER_TEST_DATA_DIR");
  ASSERT_NE(dir, nullptr) << "run tests/cpp/make_test_model.py first (ctest sets the dir)";
  torch::jit::Module module = torch::jit::load(std::string(dir) + "/chain.pt");

  fuser::enable();
  ASSERT_TRUE(fuser::isEnabled());
  fuser::resetStats();
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({64, 32});
  const at::Tensor y = torch::randn({64, 32});
  at::Tensor out;
  for (int call = 0; call < 3; ++call) {  // call 1 profiles, call 2 optimizes
    out = module.forward({x, y}).toTensor();
  }
  const at::Tensor expected = (x * y + 1).relu().sigmoid();
  EXPECT_TRUE(torch::allclose(out, expected, 1.3e-6, 1e-5));
  EXPECT_GE(fuser::stats().groups_formed.load(), 1);
  EXPECT_GE(fuser::stats().kernel_launches.load(), 1);

  // A new batch size reuses the kernel: no guard failure, no new compile.
  const int64_t compiled = fuser::stats().kernels_compiled.load();
  const at::Tensor x2 = torch::randn({7, 32});
  const at::Tensor y2 = torch::randn({7, 32});
  EXPECT_TRUE(torch::allclose(module.forward({x2, y2}).toTensor(), (x2 * y2 + 1).relu().sigmoid(),
                              1.3e-6, 1e-5));
  EXPECT_EQ(fuser::stats().guard_failures.load(), 0);
  EXPECT_EQ(fuser::stats().kernels_compiled.load(), compiled);
  fuser::disable();
  EXPECT_FALSE(fuser::isEnabled());
}
