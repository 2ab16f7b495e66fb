// The etcd v3 backend of Store, for a control plane that outlives one machine: keys, values,
// revisions, compare-and-swap transactions and the change log are etcd's own, one to one.
// It talks to etcd's HTTP/JSON gateway (/v3/kv/range, /v3/kv/txn, /v3/watch,
// /v3/kv/compaction; keys and values base64) over plain HTTP or TLS 1.3 with a client
// certificate (`tls`, etcd_tls.h), one connection per request.
//
// Mapping:
// - Revisions are etcd's: a fresh etcd is at revision 1, not 0, and every etcd write counts,
//   also writes outside this store's namespace. create_revision, mod_revision and version are
//   etcd's.
// - Txn is one etcd txn: each op's precondition is a compare (expect_mod_revision 0: create
//   revision = 0; R > 0: mod revision = R; a delete without one: create revision > 0). When
//   etcd says a compare failed, the failure branch has read every key of the transaction at
//   the same revision, so the error (AlreadyExists, NotFound, Aborted naming the key) is the one
//   the first failing op earns, exactly as store.h says.
// - Changes reads etcd's watch from `after` + 1 over the whole key space (so the page knows
//   when it has reached the current revision: every etcd revision has an event), keeping the
//   events under this store's namespace and `prefix`; a delete event carries the last value
//   (prev_kv). OutOfRange when etcd reports the revision compacted, or `after` is below
//   CompactedRevision().
// - Compact(R) records R in a key of its own (`compaction_key`, outside the namespace: no
//   Changes shows it, but its write takes an etcd revision), then asks etcd to compact at R and
//   waits until it is done (physical). CompactedRevision reads that key: durable, as etcd is.
// - `unlogged` puts are stored and logged like any other: etcd logs every write.
// - Values and whole transactions larger than `max_request_bytes` (etcd's --max-request-bytes,
//   1.5 MiB by default) are refused with InvalidArgument naming the key, never split. A
//   transaction with more ops than etcd's --max-txn-ops (128 by default) is refused by etcd:
//   InvalidArgument saying so. gpucloud's transactions (a gang's bindings) need more: run etcd
//   with --max-txn-ops 1024 or more.
//
// Durability: etcd acknowledges a write once a majority of members has it in its fsynced WAL.
// Errors: Unavailable when etcd cannot be reached or answers that it cannot serve (no leader,
// timeouts) or a TLS handshake with it fails (the message names the member and OpenSSL's reason);
// after a Txn that failed so, the write may or may not have been applied. Internal for an
// answer that cannot be understood.
// Thread-safe: every call makes its own connection.
#ifndef GPUCLOUD_STORE_ETCD_STORE_H_
#define GPUCLOUD_STORE_ETCD_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/etcd_tls.h"
#include "store/store.h"

namespace gpucloud::store {

struct EtcdStoreOptions {
  // "host:port" of the members' client URLs (http://, or https:// with `tls`), comma-separated:
  // requests go to the one that answered last, or to the next that accepts a connection.
  std::string endpoint;
  // Every key of the store is this prefix + the key: several stores can share one etcd. Must
  // not be empty.
  std::string namespace_prefix = "/gpucloud/data";
  // Where the compaction point is kept; must not start with `namespace_prefix`.
  std::string compaction_key = "/gpucloud/meta/compacted-revision";
  // The largest request etcd takes (its --max-request-bytes).
  int64_t max_request_bytes = 1572864;
  // How long one request may take before it fails with Unavailable.
  absl::Duration request_timeout = absl::Seconds(10);
  // Keys a List reads per request (one snapshot: every page is read at the first's revision).
  int list_page_size = 1000;
  // TLS to every member (off: plain HTTP). The files are read once, by OpenEtcdStore.
  EtcdTlsOptions tls;
};

// Connects to etcd (a range request, so an etcd that does not answer is an error now).
// InvalidArgument for bad options (CheckEtcdTls's for `tls`), Unavailable when etcd cannot be
// reached or a TLS handshake fails.
absl::StatusOr<std::unique_ptr<Store>> OpenEtcdStore(const EtcdStoreOptions& options);

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_ETCD_STORE_H_
