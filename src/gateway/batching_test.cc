#include "gateway/batching.h"

#include <gtest/gtest.h>

namespace gpucloud::gateway {
namespace {

TEST(BatchingTest, GathersAndSplitsInOrder) {
  auto a = InstancesOf(R"({"instances": [1, [2, 3]]})");
  auto b = InstancesOf(R"({"instances": [{"x": "y"}]})");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(BatchBody({*a, *b}), R"({"instances":[1,[2,3],{"x":"y"}]})");
  auto parts = SplitPredictions(R"({"predictions": [10, 20, 30], "model": "m"})", {2, 1});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0], R"({"predictions":[10,20]})");
  EXPECT_EQ((*parts)[1], R"({"predictions":[30]})");
}

TEST(BatchingTest, BadBodiesAndAnswersAreErrors) {
  EXPECT_EQ(InstancesOf("not json").status().message(), "the body is not JSON");
  EXPECT_EQ(InstancesOf(R"({"inputs": []})").status().message(),
            R"(the body has no "instances" array)");
  EXPECT_EQ(InstancesOf(R"({"instances": []})").status().message(), R"("instances" is empty)");
  EXPECT_EQ(SplitPredictions(R"({"predictions": [1]})", {1, 1}).status().message(),
            "the batch's answer has 1 predictions for 2 instances");
  EXPECT_FALSE(SplitPredictions("[]", {1}).ok());
}

}  // namespace
}  // namespace gpucloud::gateway
