// EtcdLeases: etcd's leases and a key held by one, for leader election (server/leader_elector.h)
// over the same HTTP/JSON gateway as the store (/v3/lease/grant, /v3/lease/keepalive,
// /v3/lease/revoke, /v3/kv/txn, /v3/kv/range). A lease lives `ttl` after the last keep-alive etcd
// received; when it expires or is revoked, etcd deletes every key attached to it.
//
// Keys here are etcd's own (no namespace added): the caller names the full key.
// Errors: Unavailable when etcd cannot be reached, does not answer in the request timeout
// (the request may or may not have been applied) or a TLS handshake with it fails; NotFound from
// KeepAlive and Revoke when the lease has expired or was revoked; InvalidArgument for bad options.
// Thread-safe (every call makes its own connection).
#ifndef GPUCLOUD_STORE_ETCD_LEASE_H_
#define GPUCLOUD_STORE_ETCD_LEASE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/etcd_tls.h"

namespace gpucloud::store {

// Who holds an election key: its value and the revision that created it (the holder's fencing
// token: a key re-created by another term has a higher one).
struct KeyHolder {
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
  bool operator==(const KeyHolder&) const = default;
};

// The lease operations leader election needs, as an interface so the elector can be tested
// against a fake. Implementations are thread-safe.
class LeaseClient {
 public:
  virtual ~LeaseClient() = default;
  // A new lease of `ttl` (rounded up to whole seconds; etcd may raise it to its minimum): its id.
  virtual absl::StatusOr<int64_t> Grant(absl::Duration ttl) = 0;
  // Renews the lease; its remaining time to live. NotFound when it is gone.
  virtual absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) = 0;
  // Ends the lease now (its keys are deleted). NotFound when it is gone already.
  virtual absl::Status Revoke(int64_t lease) = 0;
  // Creates `key` = `value` attached to `lease` if no such key exists, in one transaction; the
  // key's holder after it (this one's when it won, the earlier holder's when it did not).
  virtual absl::StatusOr<KeyHolder> CreateIfAbsent(const std::string& key, const std::string& value,
                                                   int64_t lease) = 0;
  // The key's holder; nullopt when there is no such key.
  virtual absl::StatusOr<std::optional<KeyHolder>> Holder(const std::string& key) = 0;
};

// `endpoints`: "host:port[,host:port...]" (as EtcdStoreOptions::endpoint), over TLS with `tls`
// when it is enabled (the files read now). InvalidArgument for a bad list or bad TLS options
// (CheckEtcdTls); nothing is dialled yet.
absl::StatusOr<std::unique_ptr<LeaseClient>> OpenEtcdLeases(const std::string& endpoints,
                                                            absl::Duration request_timeout,
                                                            const EtcdTlsOptions& tls = {});

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_ETCD_LEASE_H_
