#include "server/wakeup_feed.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <mutex>

namespace gpucloud::server {
namespace {

namespace asio = boost::asio;

// A position that the test moves, with the blocking wait WakeupFeed expects of a source.
class Source {
 public:
  int64_t Wait(int64_t after, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return position_ > after; });
    return position_;
  }
  void Set(int64_t p) {
    std::lock_guard lock(mu_);
    position_ = p;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int64_t position_ = 0;
};

class WakeupFeedTest : public ::testing::Test {
 protected:
  WakeupFeedTest()
      : feed_([this](int64_t after, absl::Duration d) { return source_.Wait(after, d); }, 0) {
    feed_.Start();
  }
  // A timer that would wait an hour, and where its wait ended up: "aborted" when cancelled.
  std::shared_ptr<asio::steady_timer> Timer(std::string* outcome) {
    auto t = std::make_shared<asio::steady_timer>(asio::make_strand(io_));
    t->expires_after(std::chrono::hours(1));
    t->async_wait([outcome](boost::system::error_code ec) {
      *outcome = ec == asio::error::operation_aborted ? "aborted" : "expired";
    });
    return t;
  }
  void AwaitPosition(int64_t p) {
    while (feed_.position() < p) std::this_thread::yield();
  }
  Source source_;
  asio::io_context io_;
  WakeupFeed feed_;
};

TEST_F(WakeupFeedTest, AChangePastAWaitersPositionCancelsItsTimer) {
  std::string early, late;
  auto at0 = Timer(&early), at5 = Timer(&late);
  ASSERT_TRUE(feed_.Register(at0, 0));
  ASSERT_TRUE(feed_.Register(at5, 5));
  source_.Set(3);
  AwaitPosition(3);
  io_.run_one();  // the cancellation the feed posted for `at0`, then its handler
  io_.poll();
  EXPECT_EQ(early, "aborted");
  EXPECT_EQ(late, "");  // 3 is not past 5: still waiting
  EXPECT_EQ(feed_.waiters(), 1u);
  source_.Set(6);
  AwaitPosition(6);
  io_.run_one();
  io_.poll();
  EXPECT_EQ(late, "aborted");
  EXPECT_EQ(feed_.waiters(), 0u);
}

TEST_F(WakeupFeedTest, AWaiterAlreadyBehindIsToldNotToWait) {
  source_.Set(2);
  AwaitPosition(2);
  std::string outcome;
  auto t = Timer(&outcome);
  EXPECT_FALSE(feed_.Register(t, 1));  // the caller re-reads instead of waiting
  EXPECT_TRUE(feed_.Register(t, 2));
  feed_.Unregister(t.get());
  EXPECT_EQ(feed_.waiters(), 0u);
  t->cancel();
  io_.poll();
  EXPECT_EQ(outcome, "aborted");
}

TEST_F(WakeupFeedTest, StopReturnsWhileTheSourceIsQuiet) {
  feed_.Stop();  // the thread's wait is bounded by the poll period
  SUCCEED();
}

// A change log of keys for the prefix-aware feed: Set() appends a change at the next revision.
class KeyedSource {
 public:
  int64_t Wait(int64_t after, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [&] { return static_cast<int64_t>(log_.size()) > after; });
    return static_cast<int64_t>(log_.size());
  }
  std::optional<std::vector<WakeupFeed::Change>> Changes(int64_t after) {
    std::lock_guard lock(mu_);
    std::vector<WakeupFeed::Change> out;
    for (int64_t r = after + 1; r <= static_cast<int64_t>(log_.size()); ++r) {
      out.push_back({r, log_[r - 1]});
    }
    return out;
  }
  void Put(const std::string& key) {
    std::lock_guard lock(mu_);
    log_.push_back(key);
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> log_;  // log_[r - 1]: the key revision r changed
};

TEST(WakeupFeedKeyed, OnlyWaitersUnderTheChangedPrefixAreWokenAndQuietOnesAreCaughtUp) {
  KeyedSource source;
  WakeupFeed feed([&](int64_t after, absl::Duration d) { return source.Wait(after, d); }, 0,
                  absl::Milliseconds(50), [&](int64_t after) { return source.Changes(after); });
  feed.Start();
  asio::io_context io;
  auto timer = [&](std::string* outcome) {
    auto t = std::make_shared<asio::steady_timer>(asio::make_strand(io));
    t->expires_after(std::chrono::hours(1));
    t->async_wait([outcome](boost::system::error_code ec) {
      *outcome = ec == asio::error::operation_aborted ? "aborted" : "expired";
    });
    return t;
  };
  std::string a_outcome, b_outcome;
  auto a = timer(&a_outcome), b = timer(&b_outcome);
  ASSERT_TRUE(feed.Register(a, 0, "/assignments/node-a/"));
  ASSERT_TRUE(feed.Register(b, 0, "/assignments/node-b/"));
  source.Put("/jobs/default/train");
  source.Put("/assignments/node-a/train.0");
  while (feed.position() < 2) std::this_thread::yield();
  io.run_one();
  io.poll();
  EXPECT_EQ(a_outcome, "aborted");
  EXPECT_EQ(b_outcome, "");  // nothing of node-b's changed
  EXPECT_EQ(feed.waiters(), 1u);
  // node-b's watch is caught up to 2 without reading; node-a's is not (revision 2 is its news).
  EXPECT_EQ(feed.QuietThrough(0, "/assignments/node-b/"), std::optional<int64_t>(2));
  EXPECT_EQ(feed.QuietThrough(0, "/assignments/node-a/"), std::nullopt);
  EXPECT_EQ(feed.QuietThrough(2, "/assignments/node-a/"), std::optional<int64_t>(2));
  // A waiter registering behind a change under its prefix is told to read, not to wait.
  std::string c_outcome;
  auto c = timer(&c_outcome);
  EXPECT_FALSE(feed.Register(c, 1, "/assignments/node-a/"));
  EXPECT_TRUE(feed.Register(c, 1, "/assignments/node-c/"));
  feed.Unregister(c.get());
  feed.Unregister(b.get());
  EXPECT_EQ(feed.waiters(), 0u);
  b->cancel();
  c->cancel();
  io.poll();
}

}  // namespace
}  // namespace gpucloud::server
