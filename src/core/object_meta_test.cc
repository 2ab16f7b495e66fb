#include "core/object_meta.h"

#include <gtest/gtest.h>

namespace gpucloud {
namespace {

TEST(ObjectMeta, DnsLabels) {
  EXPECT_TRUE(ValidateDnsLabel("ml-training").ok());
  EXPECT_TRUE(ValidateDnsLabel("a").ok());
  EXPECT_FALSE(ValidateDnsLabel("").ok());
  EXPECT_FALSE(ValidateDnsLabel("Upper").ok());
  EXPECT_FALSE(ValidateDnsLabel("-x").ok());
  EXPECT_FALSE(ValidateDnsLabel("x_y").ok());
  EXPECT_FALSE(ValidateDnsLabel(std::string(64, 'a')).ok());
}

TEST(ObjectMeta, LabelKeysAndValues) {
  EXPECT_TRUE(ValidateLabelKey("accelerator").ok());
  EXPECT_TRUE(ValidateLabelKey("nvidia.com/gpu.product").ok());
  EXPECT_FALSE(ValidateLabelKey("Bad Key").ok());
  EXPECT_FALSE(ValidateLabelKey("UPPER.com/x").ok());
  EXPECT_FALSE(ValidateLabelKey("").ok());
  EXPECT_TRUE(ValidateLabelValue("").ok());
  EXPECT_TRUE(ValidateLabelValue("NVIDIA-A100-SXM4-80GB").ok());
  EXPECT_FALSE(ValidateLabelValue("has space").ok());
}

}  // namespace
}  // namespace gpucloud
