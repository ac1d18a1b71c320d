//===- StageBalanceTest.cpp - Pipeline cuts from per-layer costs ---------===//
//
// Part of loom, under the Apache License v2.0.
//
// Hand-worked splits: the costs are [embedding, layers..., head].
//===----------------------------------------------------------------------===//
#include "planner/StageBalance.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace loom::planner;

namespace {

std::vector<double> costs(double embed, int layers, double layer, double head) {
  std::vector<double> c = {embed};
  c.insert(c.end(), size_t(layers), layer);
  c.push_back(head);
  return c;
}

} // namespace

TEST(StageBalance, EvenSplitDealsExtraLayersFirst) {
  EXPECT_EQ(evenStageCuts(16, 3), (std::vector<int64_t>{6, 11}));
  EXPECT_EQ(evenStageCuts(8, 4), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(evenStageCuts(10, 4), (std::vector<int64_t>{3, 6, 8}));
  EXPECT_TRUE(evenStageCuts(4, 1).empty());
  EXPECT_TRUE(evenStageCuts(2, 3).empty());
}

TEST(StageBalance, CheapEndsKeepTheEvenSplit) {
  // Embedding and head much cheaper than a layer: even is as good as it gets.
  EXPECT_EQ(balanceStageCuts(costs(0.01, 4, 1, 0.3), 2), (std::vector<int64_t>{2}));
  EXPECT_EQ(balanceStageCuts(costs(0.01, 4, 1, 0.3), 4), (std::vector<int64_t>{1, 2, 3}));
  // Identical layers and free ends: the even split, extra layers first.
  EXPECT_EQ(balanceStageCuts(costs(0, 10, 1, 0), 4), (std::vector<int64_t>{3, 6, 8}));
}

TEST(StageBalance, HeavyHeadTakesFewerLayers) {
  // Llama-3.2-1B-like: 16 layers of 1, a head worth 4.3 layers. Even
  // (4/4/4/4) puts 8.3 on the last stage. The last stage holds at least
  // one layer, so no split beats 5.3; with 2 layers it would cost 6.3, so
  // it takes one and the other 15 split 5/5/5 (5.05 with the embedding).
  std::vector<double> c = costs(0.05, 16, 1, 4.3);
  std::vector<int64_t> cuts = balanceStageCuts(c, 4);
  EXPECT_EQ(cuts, (std::vector<int64_t>{5, 10, 15}));
  std::vector<double> s = stageCostsOf(c, cuts);
  EXPECT_NEAR(*std::max_element(s.begin(), s.end()), 5.3, 1e-12);
  std::vector<double> even = stageCostsOf(c, evenStageCuts(16, 4));
  EXPECT_NEAR(*std::max_element(even.begin(), even.end()), 8.3, 1e-12);
}

TEST(StageBalance, HeavyEmbeddingTakesFewerLayers) {
  // 9 in all over 3 stages; stage 0 holds the embedding (3) and at least
  // one layer: 4 is the least maximum. {1,2} (4, 1, 4), {1,3} (4, 2, 3)
  // and {1,4} (4, 3, 2) all reach it; the last two spread the rest more
  // evenly (squares 29 against 33), and {1,3} comes first.
  std::vector<double> c = costs(3, 6, 1, 0);
  std::vector<int64_t> cuts = balanceStageCuts(c, 3);
  EXPECT_EQ(cuts, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(stageCostsOf(c, cuts), (std::vector<double>{4, 2, 3}));
}

TEST(StageBalance, UnequalLayers) {
  // A heavy middle layer (e.g. a dense layer among cheaper ones).
  std::vector<double> c = {0, 1, 1, 6, 1, 1, 1, 0};
  std::vector<int64_t> cuts = balanceStageCuts(c, 3);
  std::vector<double> s = stageCostsOf(c, cuts);
  EXPECT_DOUBLE_EQ(*std::max_element(s.begin(), s.end()), 6);
  EXPECT_EQ(s[1], 6); // the heavy layer alone
}

TEST(StageBalance, Describe) {
  EXPECT_EQ(describeStageCuts({6, 11}, 16), "0-5 | 6-10 | 11-15");
  EXPECT_EQ(describeStageCuts({1, 2, 3}, 4), "0 | 1 | 2 | 3");
  EXPECT_EQ(describeStageCuts({}, 4), "");
  EXPECT_EQ(ppSplitSpelling({5, 10, 15}), "5,10,15");
}
