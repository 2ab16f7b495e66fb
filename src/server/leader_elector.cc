#include "server/leader_elector.h"

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "core/text.h"

namespace gpucloud::server {

using Action = ElectionMachine::Action;
using Renewal = ElectionMachine::Renewal;

Action ElectionMachine::Decide(int64_t now_ms) const {
  if (!leader_) return now_ms >= next_try_ms_ ? Action::kCampaign : Action::kWait;
  // No keep-alive for a whole TTL: etcd may expire the lease any moment, and another server
  // take over; stop acting before that can happen, counting the longest a renewal started now
  // could keep this thread from deciding again.
  if (lost_ || now_ms + timing_.io_ms >= renewed_ms_ + timing_.ttl_ms) return Action::kStepDown;
  return now_ms >= next_try_ms_ ? Action::kRenew : Action::kWait;
}

int64_t ElectionMachine::WakeAtMs() const {
  if (!leader_) return next_try_ms_;
  if (lost_) return renewed_ms_;  // now
  return std::min(next_try_ms_, renewed_ms_ + timing_.ttl_ms - timing_.io_ms);
}

void ElectionMachine::CampaignWon(int64_t sent_ms, int64_t token) {
  leader_ = true;
  lost_ = false;
  token_ = token;
  renewed_ms_ = sent_ms;  // the lease's TTL counts from its grant, sent no earlier than this
  next_try_ms_ = sent_ms + timing_.RenewMs();
}

void ElectionMachine::CampaignLost(int64_t sent_ms) { next_try_ms_ = sent_ms + timing_.RenewMs(); }

void ElectionMachine::CampaignFailed(int64_t sent_ms) {
  next_try_ms_ = sent_ms + timing_.RetryMs();
}

void ElectionMachine::Renewed(int64_t sent_ms, Renewal result) {
  if (!leader_) return;
  switch (result) {
    case Renewal::kRenewed:
      renewed_ms_ = std::max(renewed_ms_, sent_ms);
      next_try_ms_ = sent_ms + timing_.RenewMs();
      return;
    case Renewal::kLost:
      lost_ = true;
      return;
    case Renewal::kFailed:
      next_try_ms_ = sent_ms + timing_.RetryMs();
      return;
  }
}

void ElectionMachine::SteppedDown(int64_t now_ms) {
  leader_ = false;
  lost_ = false;
  token_ = 0;
  next_try_ms_ = now_ms;
}

LeaderElector::LeaderElector(store::LeaseClient& leases, const Clock& clock,
                             LeaderElectorOptions options,
                             std::function<void(int64_t token)> on_elected,
                             std::function<void()> on_deposed)
    : leases_(leases),
      clock_(clock),
      options_(std::move(options)),
      on_elected_(std::move(on_elected)),
      on_deposed_(std::move(on_deposed)),
      machine_(options_.timing) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  thread_ = std::jthread([this](const std::stop_token& stop) { Loop(stop); });
}

void LeaderElector::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
  if (machine_.leader()) StepDown();
  RevokeLease();
}

void LeaderElector::Loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    lock.unlock();
    StepOnce();
    lock.lock();
    const int64_t wait_ms = machine_.WakeAtMs() - clock_.NowMillis();
    if (wait_ms > 0) {
      wake_.wait_for(lock, stop, std::chrono::milliseconds(wait_ms), [] { return false; });
    }
  }
}

void LeaderElector::StepOnce() {
  switch (machine_.Decide(clock_.NowMillis())) {
    case Action::kWait:
      return;
    case Action::kCampaign:
      return Campaign();
    case Action::kRenew:
      return Renew();
    case Action::kStepDown:
      return StepDown();
  }
}

void LeaderElector::Campaign() {
  const int64_t sent = clock_.NowMillis();
  RevokeLease();  // a lost campaign's or an ended term's, if etcd did not take it before
  absl::StatusOr<int64_t> lease = leases_.Grant(absl::Milliseconds(options_.timing.ttl_ms));
  if (!lease.ok()) {
    log::Warn("server", "leader campaign failed", {{"error", lease.status().ToString()}});
    return machine_.CampaignFailed(sent);
  }
  lease_ = *lease;
  absl::StatusOr<store::KeyHolder> holder =
      leases_.CreateIfAbsent(options_.key, options_.identity, lease_);
  if (!holder.ok()) {
    log::Warn("server", "leader campaign failed", {{"error", holder.status().ToString()}});
    return machine_.CampaignFailed(sent);
  }
  if (holder->lease != lease_) {
    RevokeLease();
    return machine_.CampaignLost(sent);
  }
  machine_.CampaignWon(sent, holder->create_revision);
  token_ = holder->create_revision;
  leader_ = true;
  log::Info(
      "server", "elected leader",
      {{"key", options_.key}, {"token", Cat(token_.load())}, {"identity", options_.identity}});
  on_elected_(holder->create_revision);
}

void LeaderElector::Renew() {
  const int64_t sent = clock_.NowMillis();
  absl::StatusOr<absl::Duration> alive = leases_.KeepAlive(lease_);
  if (absl::IsNotFound(alive.status())) return machine_.Renewed(sent, Renewal::kLost);
  if (!alive.ok()) {
    log::Warn("server", "leader keep-alive failed", {{"error", alive.status().ToString()}});
    return machine_.Renewed(sent, Renewal::kFailed);
  }
  absl::StatusOr<std::optional<store::KeyHolder>> holder = leases_.Holder(options_.key);
  if (!holder.ok()) return machine_.Renewed(sent, Renewal::kFailed);
  const bool ours = holder->has_value() && (*holder)->lease == lease_ &&
                    (*holder)->create_revision == machine_.token();
  machine_.Renewed(sent, ours ? Renewal::kRenewed : Renewal::kLost);
}

void LeaderElector::StepDown() {
  log::Warn("server", "no longer the leader",
            {{"key", options_.key}, {"token", Cat(token_.load())}});
  leader_ = false;
  token_ = 0;
  on_deposed_();
  machine_.SteppedDown(clock_.NowMillis());
}

void LeaderElector::RevokeLease() {
  if (lease_ == 0) return;
  // NotFound: expired already. Unavailable: it expires by itself after the TTL.
  if (absl::Status s = leases_.Revoke(lease_); !s.ok() && !absl::IsNotFound(s)) {
    log::Warn("server", "lease not revoked", {{"lease", Cat(lease_)}, {"error", s.ToString()}});
  }
  lease_ = 0;
}

}  // namespace gpucloud::server
