#include "server/object_cache.h"

#include <gtest/gtest.h>

#include "core/text.h"
#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

class ObjectCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*store::OpenSqliteStore((tmp_.path() / "store.db").string()));
  }
  // One transaction putting keys /jobs/{first}..{first+n-1}.
  void PutMany(int first, int n) {
    std::vector<store::Op> ops;
    for (int i = first; i < first + n; ++i) {
      ops.push_back({.key = Cat("/jobs/", i), .value = Cat("{\"n\":", i, "}")});
    }
    ASSERT_TRUE(store_->Txn(ops).ok());
  }
  testing_util::TempDir tmp_{"gpucloud-cache"};
  std::unique_ptr<store::Store> store_;
};

TEST_F(ObjectCacheTest, APageEndingInsideATransactionLosesNoneOfIt) {
  ObjectCache cache("/jobs/");
  ASSERT_TRUE(cache.Sync(*store_).ok());  // lists the empty store
  // 1,000-write transactions: the first page of changes ends inside the fifth.
  for (int t = 0; t < 10; ++t) PutMany(t * 1000, 1000);
  ASSERT_TRUE(*cache.Sync(*store_));
  EXPECT_EQ(cache.objects().size(), 10'000u);
  EXPECT_EQ(cache.revision(), store_->Revision());
  EXPECT_EQ(cache.objects().at("/jobs/4500").doc["n"], 4500);
}

TEST_F(ObjectCacheTest, ATransactionBiggerThanAPageIsReadWhole) {
  ObjectCache cache("/jobs/");
  ASSERT_TRUE(cache.Sync(*store_).ok());
  PutMany(0, ObjectCache::kPage + 500);
  ASSERT_TRUE(*cache.Sync(*store_));
  EXPECT_EQ(cache.objects().size(), static_cast<size_t>(ObjectCache::kPage + 500));
  EXPECT_FALSE(*cache.Sync(*store_));  // nothing new
}

}  // namespace
}  // namespace gpucloud::server
