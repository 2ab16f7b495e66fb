// ReplicaHealth: what the gateway knows of each service replica right now — whether its
// readiness check passes and how many requests it has in flight — shared with the service
// controller in the same process (services.h), which stops idle replicas only and reports
// readiness in the service's status. Entries are keyed "namespace/job" and live while the
// service's status lists the replica (Retain). Thread-safe: the map under a mutex, the entries'
// fields atomic.
#ifndef GPUCLOUD_GATEWAY_REPLICA_HEALTH_H_
#define GPUCLOUD_GATEWAY_REPLICA_HEALTH_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace gpucloud::gateway {

class ReplicaHealth {
 public:
  struct Entry {
    std::atomic<bool> ready{false};
    std::atomic<int64_t> in_flight{0};
    std::atomic<int> failures{0};  // readiness checks failed in a row
  };
  // The entry of `replica`, made (not ready, idle) when new.
  std::shared_ptr<Entry> Get(const std::string& replica) {
    std::lock_guard lock(mu_);
    std::shared_ptr<Entry>& e = entries_[replica];
    if (!e) e = std::make_shared<Entry>();
    return e;
  }
  // The entry of `replica`, or null when the gateway has not seen it.
  std::shared_ptr<const Entry> Find(const std::string& replica) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(replica);
    return it == entries_.end() ? nullptr : it->second;
  }
  // Forgets every replica not in `replicas`.
  void Retain(const std::set<std::string>& replicas) {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = replicas.count(it->first) ? std::next(it) : entries_.erase(it);
    }
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace gpucloud::gateway

#endif  // GPUCLOUD_GATEWAY_REPLICA_HEALTH_H_
