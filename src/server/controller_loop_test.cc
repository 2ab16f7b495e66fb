// The controller's own loop (Start/Stop), not RunOnce: what wakes a pass. The tick is set to ten
// minutes, so a test that needed it would time out instead of passing late.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/controller_fixture.h"

namespace gpucloud::server {
namespace {

// A store that runs the armed write (once) right after the controller's cache read what is
// under `prefix` (a List or its Changes): a write made in the middle of a pass, after the pass
// caught up.
class MidPassWriter : public store::Store {
 public:
  explicit MidPassWriter(store::Store& inner) : inner_(inner) {}
  void Arm(std::string prefix, std::function<void()> write) {
    absl::MutexLock lock(&mu_);
    prefix_ = std::move(prefix);
    write_ = std::move(write);
  }

  absl::StatusOr<store::KeyValue> Get(const std::string& key) override { return inner_.Get(key); }
  absl::StatusOr<store::ListResult> List(const std::string& prefix) override {
    absl::StatusOr<store::ListResult> out = inner_.List(prefix);
    AfterRead(prefix);
    return out;
  }
  absl::StatusOr<int64_t> Count(const std::string& prefix) override { return inner_.Count(prefix); }
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override {
    return inner_.Txn(ops);
  }
  absl::StatusOr<std::vector<store::Event>> Changes(const std::string& prefix, int64_t after,
                                                    int limit) override {
    absl::StatusOr<std::vector<store::Event>> out = inner_.Changes(prefix, after, limit);
    AfterRead(prefix);
    return out;
  }
  absl::Status Compact(int64_t revision) override { return inner_.Compact(revision); }
  int64_t CompactedRevision() override { return inner_.CompactedRevision(); }
  int64_t Revision() override { return inner_.Revision(); }
  bool WaitForChange(int64_t after, absl::Duration timeout) override {
    return inner_.WaitForChange(after, timeout);
  }

 private:
  void AfterRead(const std::string& prefix) {
    std::function<void()> write;
    {
      absl::MutexLock lock(&mu_);
      if (prefix == prefix_) write = std::exchange(write_, nullptr);
    }
    if (write) write();
  }

  store::Store& inner_;
  absl::Mutex mu_;
  std::string prefix_ ABSL_GUARDED_BY(mu_);
  std::function<void()> write_ ABSL_GUARDED_BY(mu_);
};

class ControllerLoopTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    writer_ = std::make_unique<MidPassWriter>(*store_);
  }
  void StartLoop() {
    ControllerOptions o;
    o.checkpoint_root = "/ckpt";
    o.tick_ms = 600'000;
    o.heartbeat_timeout_ms = 600'000;  // the fake clock stands still; nodes stay Ready
    loop_ = std::make_unique<Controller>(*writer_, nodes_, clock_, GpuCatalog::Default(), o);
    loop_->Start();
  }
  void TearDown() override {
    if (loop_) loop_->Stop();
  }

  // Waits (on store changes, up to 60 s) until `job` is in `phase`.
  bool AwaitPhase(const std::string& job, api::JobPhase phase) {
    absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      int64_t seen = store_->Revision();
      absl::StatusOr<store::KeyValue> kv = store_->Get("/jobs/default/" + job);
      if (kv.ok() && JobStatusFromJson(Json::parse(kv->value)).value().phase == phase) return true;
      store_->WaitForChange(seen, absl::Seconds(1));
    }
    return false;
  }

  std::unique_ptr<MidPassWriter> writer_;
  std::unique_ptr<Controller> loop_;
};

TEST_F(ControllerLoopTest, AJobSubmittedWhileAPassRunsIsScheduledWithoutWaitingForTheTick) {
  Register("node-a", 4);
  Heartbeat("node-a");
  Submit(GangJob("first", 1, 1));
  // The job is written after the pass read /jobs/ and /queues/: that pass cannot see it, and
  // nothing else happens afterwards, so only a pass run because of it schedules it.
  writer_->Arm("/queues/", [this] { Submit(GangJob("second", 1, 1)); });
  StartLoop();
  ASSERT_TRUE(AwaitPhase("first", api::JobPhase::kScheduled));
  EXPECT_TRUE(AwaitPhase("second", api::JobPhase::kScheduled))
      << "passes: " << loop_->Metrics().passes << "; "
      << store_->Get("/jobs/default/second")->value;
}

TEST_F(ControllerLoopTest, AHeartbeatKickMovesAJobAlongWithoutATick) {
  Register("node-a", 4);
  Heartbeat("node-a");
  Submit(GangJob("train", 1, 1));
  StartLoop();
  ASSERT_TRUE(AwaitPhase("train", api::JobPhase::kScheduled));
  // The agent's report lives in the NodeTable only: no store change, just the kick.
  Heartbeat("node-a", {Report("train", 0, api::TaskState::kRunning)});
  loop_->Kick();
  EXPECT_TRUE(AwaitPhase("train", api::JobPhase::kRunning));
}

}  // namespace
}  // namespace gpucloud::server
