// Workspace layout of a group's buffers (runtime/workspace_plan.h): buffers live at the
// same time never overlap, dead ones give their bytes to later ones, the largest is
// placed first, offsets are aligned.
#include <gtest/gtest.h>

#include <random>

#include "runtime/workspace_plan.h"

namespace fuser::runtime {
namespace {

bool overlapInMemory(const WorkspacePlan& plan, const std::vector<BufferNeed>& b, size_t x,
                     size_t y) {
  return plan.offsets[x] < plan.offsets[y] + b[y].bytes &&
         plan.offsets[y] < plan.offsets[x] + b[x].bytes;
}

void expectValid(const WorkspacePlan& plan, const std::vector<BufferNeed>& b, int64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), b.size());
  int64_t sum = 0;
  for (size_t x = 0; x < b.size(); ++x) {
    sum += (b[x].bytes + alignment - 1) / alignment * alignment;
    EXPECT_EQ(plan.offsets[x] % alignment, 0);
    EXPECT_LE(plan.offsets[x] + b[x].bytes, plan.bytes);
    for (size_t y = x + 1; y < b.size(); ++y) {
      const bool live_together = b[x].first <= b[y].last && b[y].first <= b[x].last;
      if (live_together) {
        EXPECT_FALSE(overlapInMemory(plan, b, x, y)) << x << " and " << y;
      }
    }
  }
  EXPECT_EQ(plan.sum_of_buffers, sum);
  EXPECT_LE(plan.bytes, plan.sum_of_buffers);
}

TEST(WorkspacePlan, BuffersLiveTogetherAreLaidSideBySide) {
  const std::vector<BufferNeed> b = {{1000, 0, 2}, {3000, 1, 2}, {500, 2, 2}};
  const WorkspacePlan plan = planWorkspace(b, 256);
  expectValid(plan, b, 256);
  // Largest first, at 0; then 1000 (1024 aligned) after it; then 500.
  EXPECT_EQ(plan.offsets[1], 0);
  EXPECT_EQ(plan.offsets[0], 3072);
  EXPECT_EQ(plan.offsets[2], 3072 + 1024);
  EXPECT_EQ(plan.bytes, plan.sum_of_buffers);
}

TEST(WorkspacePlan, ADeadBufferGivesItsBytesToALaterOne) {
  // Stage 0 writes A, stage 1 reads A and writes B, stage 2 reads B and writes C: C
  // takes A's place.
  const std::vector<BufferNeed> b = {{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}};
  const WorkspacePlan plan = planWorkspace(b, 256);
  expectValid(plan, b, 256);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
  EXPECT_EQ(plan.bytes, 8192);
  EXPECT_EQ(plan.sum_of_buffers, 12288);
}

TEST(WorkspacePlan, BuffersOfDisjointLifetimesShareBytes) {
  // A and C live at stage 0 only, side by side within the bytes B (stages 1 and 2)
  // takes later; D lives beside B, so it goes after it.
  const std::vector<BufferNeed> b = {{1024, 0, 0}, {2048, 1, 2}, {1024, 0, 0}, {512, 2, 2}};
  const WorkspacePlan plan = planWorkspace(b, 256);
  expectValid(plan, b, 256);
  EXPECT_EQ(plan.offsets[1], 0);
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[2], 1024);
  EXPECT_EQ(plan.offsets[3], 2048);
  EXPECT_EQ(plan.bytes, 2560);
}

TEST(WorkspacePlan, RandomLifetimesNeverOverlapLiveBuffers) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<BufferNeed> b(1 + rng() % 12);
    for (auto& need : b) {
      need.bytes = 1 + static_cast<int64_t>(rng() % 5000);
      need.first = static_cast<int>(rng() % 6);
      need.last = need.first + static_cast<int>(rng() % 4);
    }
    const int64_t alignment = int64_t{1} << (rng() % 9);
    expectValid(planWorkspace(b, alignment), b, alignment);
  }
}

TEST(WorkspacePlan, NoBuffersNoBytes) {
  const WorkspacePlan plan = planWorkspace({});
  EXPECT_EQ(plan.bytes, 0);
  EXPECT_EQ(plan.sum_of_buffers, 0);
}

}  // namespace
}  // namespace fuser::runtime
