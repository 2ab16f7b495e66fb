#include "server/compactor.h"

#include <gtest/gtest.h>

#include "store/sqlite_store.h"
#include "testing/temp_dir.h"

namespace gpucloud::server {
namespace {

TEST(CompactionTarget, KeepsTheNewestRevisions) {
  EXPECT_EQ(CompactionTarget(100, 0, 10), 90);
  EXPECT_EQ(CompactionTarget(100, 90, 10), 0);  // already there
  EXPECT_EQ(CompactionTarget(5, 0, 10), 0);     // not enough history yet
  EXPECT_EQ(CompactionTarget(100, 0, 0), 0);    // keep everything
  EXPECT_EQ(CompactionTarget(100, 95, 10), 0);  // never backwards
}

TEST(Compactor, DropsOldChangesAndWatchersFromBeforeGetOutOfRange) {
  testing_util::TempDir dir("gpucloud-compactor");
  auto store = std::move(*store::OpenSqliteStore((dir.path() / "s.db").string()));
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(
        store->Txn({{store::Op::Kind::kPut, "/jobs/a/j", std::to_string(i), std::nullopt}}).ok());
  }
  Compactor c(*store, CompactionPolicy{.keep_revisions = 10});
  ASSERT_TRUE(c.RunOnce().ok());
  EXPECT_EQ(store->CompactedRevision(), 20);
  EXPECT_TRUE(absl::IsOutOfRange(store->Changes("/jobs/", 5, 100).status()));
  absl::StatusOr<std::vector<store::Event>> recent = store->Changes("/jobs/", 20, 100);
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(recent->size(), 10u);
  EXPECT_EQ(store->Get("/jobs/a/j")->value, "29");  // objects are kept
}

}  // namespace
}  // namespace gpucloud::server
