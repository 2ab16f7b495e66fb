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

// The controller writes a job's status and puts the written document and what it derived into
// the cache itself; the change event of that write must not throw the derived entry away (it
// would parse the job's manifest again on every status change), while another writer's change
// of the same key must.
TEST_F(ObjectCacheTest, AnOwnersOwnWriteKeepsWhatItDerivedAnotherWriteDropsIt) {
  ObjectCache cache("/jobs/");
  PutMany(0, 1);
  ASSERT_TRUE(cache.Sync(*store_).ok());
  CachedObject& o = cache.mutable_objects().at("/jobs/0");
  absl::StatusOr<int64_t> rev = store_->Txn(
      {{.key = "/jobs/0", .value = "{\"n\":1}", .expect_mod_revision = o.mod_revision}});
  ASSERT_TRUE(rev.ok());
  o.doc = nlohmann::ordered_json::parse("{\"n\":1}");
  o.mod_revision = *rev;
  o.derived = std::make_shared<int>(7);
  ASSERT_TRUE(cache.Sync(*store_).ok());
  ASSERT_NE(o.derived, nullptr);
  EXPECT_EQ(*static_cast<int*>(o.derived.get()), 7);

  PutMany(0, 1);  // someone else writes {"n":0}
  ASSERT_TRUE(cache.Sync(*store_).ok());
  EXPECT_EQ(o.derived, nullptr);
  EXPECT_EQ(o.doc["n"], 0);
  EXPECT_EQ(o.mod_revision, store_->Revision());
}

}  // namespace
}  // namespace gpucloud::server
