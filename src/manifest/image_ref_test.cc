#include "manifest/image_ref.h"

#include <gtest/gtest.h>

#include <string>

namespace gpucloud::manifest {
namespace {

TEST(ImageReference, SplitsDomainPathTagAndDigest) {
  absl::StatusOr<ImageReference> r = ParseImageReference("registry.local:5000/team/trainer:1.2");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ImageReference{"registry.local:5000", "team/trainer", "1.2", ""}));

  std::string digest = "sha256:" + std::string(64, 'f');
  r = ParseImageReference("trainer@" + digest);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ImageReference{"", "trainer", "", digest}));

  r = ParseImageReference("localhost/a__b/c-d.e:latest@" + digest);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ImageReference{"localhost", "a__b/c-d.e", "latest", digest}));

  // Without a '.' or ':' the first component is part of the path, as Docker reads it.
  r = ParseImageReference("pytorch/pytorch:2.0-cuda11.7-cudnn8-runtime");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (ImageReference{"", "pytorch/pytorch", "2.0-cuda11.7-cudnn8-runtime", ""}));

  r = ParseImageReference("[::1]:5000/trainer");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domain, "[::1]:5000");
}

TEST(ImageReference, RefusesWhatDockerRefuses) {
  auto why = [](std::string_view text) {
    absl::StatusOr<ImageReference> r = ParseImageReference(text);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_EQ(why(""), "must not be empty");
  EXPECT_EQ(why("a b"), "must not contain spaces or control characters");
  EXPECT_EQ(why("Trainer"), "repository must be lowercase");
  EXPECT_EQ(why("a//b"), "empty path component");
  EXPECT_EQ(why("a/"), "empty path component");
  EXPECT_EQ(why(":1"), "the repository name is empty");
  EXPECT_EQ(why("a-"),
            "path components are lowercase letters and digits, separated by '.', "
            "'_', '__' or '-'");
  EXPECT_EQ(why("a:"),
            "the tag must be 1 to 128 letters, digits, '_', '.' or '-', not starting "
            "with '.' or '-'");
  EXPECT_EQ(why("a:" + std::string(129, 't')).substr(0, 7), "the tag");
  EXPECT_EQ(why("a@sha256:abc"), "the digest must be algorithm:hex, such as sha256:<64 hex>");
  EXPECT_EQ(why("a@sha256:" + std::string(64, 'A')), "a sha256 digest is 64 lowercase hex digits");
  EXPECT_EQ(why("reg.local:port/a"), "the registry's port must be a number");
  EXPECT_EQ(why("-reg.local/a"), "the registry must be a host name or address");
  EXPECT_EQ(why(std::string(256, 'a')), "the repository name is longer than 255 characters");
}

}  // namespace
}  // namespace gpucloud::manifest
