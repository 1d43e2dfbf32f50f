#include "common/drop_oldest_queue.h"

#include <gtest/gtest.h>

namespace stallwatch::common {
namespace {

TEST(DropOldestQueue, AFullQueueDropsTheOldestToTakeTheNewest) {
  DropOldestQueue<int> q(3);
  EXPECT_EQ(q.push(1), 0u);
  EXPECT_EQ(q.push(2), 0u);
  EXPECT_EQ(q.push(3), 0u);
  EXPECT_EQ(q.push(4), 1u);  // 1 dropped
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(*q.pop(), 2);
  EXPECT_EQ(*q.pop(), 3);
  EXPECT_EQ(*q.pop(), 4);
  EXPECT_FALSE(q.pop().has_value());
}

// A failed write puts back what it took, older than what came meanwhile, within capacity.
TEST(DropOldestQueue, PutBackGoesInFrontAndTrimsTheOldest) {
  DropOldestQueue<int> q(4);
  q.push(1);
  q.push(2);
  q.push(3);
  auto taken = q.takeAll();
  EXPECT_TRUE(q.empty());
  q.push(4);
  q.push(5);
  EXPECT_EQ(q.putBack(std::move(taken)), 1u);  // 1, 2, 3, 4, 5: the oldest goes
  const auto all = q.takeAll();
  EXPECT_EQ(std::vector<int>(all.begin(), all.end()), (std::vector<int>{2, 3, 4, 5}));
}

TEST(DropOldestQueue, ZeroCapacityStillHoldsOne) {
  DropOldestQueue<int> q(0);
  q.push(1);
  EXPECT_EQ(q.push(2), 1u);
  EXPECT_EQ(q.clear(), 1u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace stallwatch::common
