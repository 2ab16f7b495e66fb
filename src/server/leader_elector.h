// Leader election on etcd (after etcd's election recipe): each server campaigns by creating one
// election key attached to a lease of its own, in a transaction that succeeds only where the key
// is absent; the server whose key it is leads while it keeps its lease alive. The key's revision
// is the leader's fencing token: its controllers' writes carry a check on it (fenced_store.h), so
// a deposed leader that has not noticed yet changes nothing once another term's key exists.
//
// 1. ElectionMachine decides, a pure function of the clock and what etcd answered: when to
//    campaign (a follower, every renew interval), when to renew (a leader, every renew interval
//    after the last keep-alive that succeeded), when to step down (at once when etcd says the
//    lease or the key is gone; when no keep-alive has succeeded for a whole TTL, counted from when
//    the last good one was sent, so the leader stops acting before etcd can expire its lease).
// 2. LeaderElector is the thin I/O around it: a thread that grants the lease and campaigns,
//    renews (a keep-alive, then a read that the key is still this term's), and calls on_elected
//    (with the token) and on_deposed from that thread. A clean Stop deposes and revokes the
//    lease, so the key goes at once rather than after the TTL.
#ifndef GPUCLOUD_SERVER_LEADER_ELECTOR_H_
#define GPUCLOUD_SERVER_LEADER_ELECTOR_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.h"
#include "store/etcd_lease.h"

namespace gpucloud::server {

struct ElectionTiming {
  int64_t ttl_ms = 5000;  // the lease's time to live (`--leader-lease`)
  int64_t renew_ms = 0;   // keep-alive and campaign interval; 0: ttl_ms / 3
  int64_t RenewMs() const { return renew_ms > 0 ? renew_ms : std::max<int64_t>(1, ttl_ms / 3); }
  // After a keep-alive or campaign that etcd did not answer: the next try.
  int64_t RetryMs() const { return std::max<int64_t>(1, RenewMs() / 3); }
  // The longest one renewal's requests may take (their timeouts added up). A leader steps down
  // this long before its lease could run out rather than start a renewal that might still be
  // waiting on etcd when another server can be elected.
  int64_t io_ms = 0;
};

// The decisions of one server's election, without I/O. Not thread-safe (the elector's thread).
class ElectionMachine {
 public:
  enum class Action { kWait, kCampaign, kRenew, kStepDown };
  enum class Renewal {
    kRenewed,  // the keep-alive succeeded and the key is still this term's
    kLost,     // etcd says the lease has expired, or the key is gone or another term's
    kFailed,   // etcd did not answer (or answered an error): unknown
  };
  explicit ElectionMachine(ElectionTiming timing) : timing_(timing) {}

  Action Decide(int64_t now_ms) const;
  // When Decide's answer next changes without any event (for the thread's sleep).
  int64_t WakeAtMs() const;
  // A campaign whose lease grant was sent at `sent_ms` ended: won (this server's key, created at
  // revision `token`), lost (another's key is there), or failed (no answer: try again soon).
  void CampaignWon(int64_t sent_ms, int64_t token);
  void CampaignLost(int64_t sent_ms);
  void CampaignFailed(int64_t sent_ms);
  // A renewal whose keep-alive was sent at `sent_ms` ended.
  void Renewed(int64_t sent_ms, Renewal result);
  // The server stopped acting as leader (after kStepDown): a follower, campaigning from `now_ms`.
  void SteppedDown(int64_t now_ms);

  bool leader() const { return leader_; }
  int64_t token() const { return token_; }  // 0 when not leader

 private:
  const ElectionTiming timing_;
  bool leader_ = false;
  bool lost_ = false;        // the last renewal said the lease or key is gone
  int64_t token_ = 0;        // the election key's revision while leader
  int64_t renewed_ms_ = 0;   // when the last good keep-alive (or the grant) was sent
  int64_t next_try_ms_ = 0;  // the next campaign (follower) or renewal (leader)
};

struct LeaderElectorOptions {
  std::string key;       // the election key, etcd's own ("/gpucloud/data/meta/leader")
  std::string identity;  // the key's value: who leads (address, pid), for operators
  ElectionTiming timing;
};

// Thread-safe: Start once, Stop from any thread (the destructor stops); leader() and token() from
// any thread. on_elected and on_deposed run on the elector's thread, one at a time, alternating
// (elected first); on_deposed also runs in Stop when leading. They must not call Stop.
class LeaderElector {
 public:
  // Borrows `leases` and `clock`, which must outlive this.
  LeaderElector(store::LeaseClient& leases, const Clock& clock, LeaderElectorOptions options,
                std::function<void(int64_t token)> on_elected, std::function<void()> on_deposed);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void Start();
  void Stop();
  // What the thread does at each wake-up: the machine's action at the clock's now, carried out.
  // For tests that drive it with a FakeClock instead of Start.
  void StepOnce();
  bool leader() const { return leader_.load(); }
  int64_t token() const { return token_.load(); }

 private:
  void Loop(const std::stop_token& stop);
  void Campaign();
  void Renew();
  void StepDown();
  void RevokeLease();

  store::LeaseClient& leases_;
  const Clock& clock_;
  const LeaderElectorOptions options_;
  const std::function<void(int64_t)> on_elected_;
  const std::function<void()> on_deposed_;
  ElectionMachine machine_;  // the thread's (or StepOnce's caller's) only
  int64_t lease_ = 0;        // likewise: the lease of the current campaign or term (0: none)
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> token_{0};
  std::mutex mu_;  // for the sleep
  std::condition_variable_any wake_;
  std::jthread thread_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_LEADER_ELECTOR_H_
