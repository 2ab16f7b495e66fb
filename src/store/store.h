// Store: the control plane's durable object store, in etcd's model so that an etcd backend can
// replace the SQLite one without touching callers. Keys are strings ("/jobs/team-a/train"),
// values opaque bytes (JSON documents). One global revision counts every change; each object
// records the revision that created it, the one that last changed it and how often it changed.
// Writes are transactions of puts and deletes with per-key preconditions (compare-and-swap on
// mod_revision); a transaction applies entirely or not at all and gets one revision. The change
// log keeps every put and delete since the last compaction, so a watcher resumes from any
// revision it has seen (or learns it was compacted away and must list again).
//
// A write returns only after it is on disk: a 2xx answer built on it means the data is durable.
// Errors every method may return besides its own: DataLoss when the stored data cannot be read
// (a corrupt store: never answered as fewer items or as NotFound), Internal for a passing
// failure of the backend (busy, out of memory or disk space).
// Implementations are thread-safe.
#ifndef GPUCLOUD_STORE_STORE_H_
#define GPUCLOUD_STORE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpucloud::store {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;  // 1 on create, +1 on every update
  bool operator==(const KeyValue&) const = default;
};

// One write of a transaction. `expect_mod_revision`: nullopt = no condition; 0 = the key must
// not exist (create); R > 0 = the key must exist at mod_revision R (update or delete by CAS).
// `unlogged`: a put that no watch needs (the audit log's records): it may be left out of the
// change log (Changes never returns it; the SQLite backend leaves it out, so it is written once,
// not twice). The object itself is stored and read like any other.
// kCheck writes nothing: it is a condition only (a fence), "the key exists at mod_revision
// `expect_mod_revision`" (which must be set and > 0). A leader's writes carry one on its
// election key (server/fenced_store.h), so they apply only while that key is the one its term
// created. A failed check is FailedPrecondition naming the key (not Aborted: redoing the
// read-modify-write cannot help; the state that made the check must change first). A
// transaction of checks only is InvalidArgument: it would write nothing.
struct Op {
  enum class Kind { kPut, kDelete, kCheck };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut
  std::optional<int64_t> expect_mod_revision;
  bool unlogged = false;
};

struct Event {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  int64_t revision = 0;
  KeyValue kv;  // for kDelete: the key, the deleting revision, and the last value
  bool operator==(const Event&) const = default;
};

struct ListResult {
  std::vector<KeyValue> items;  // by key
  int64_t revision = 0;         // the store's revision the list was read at
};

// The checks every backend's Txn makes before it reads anything: InvalidArgument for an empty
// transaction, an empty key, a key given twice, a kCheck without expect_mod_revision > 0, or a
// transaction of checks only.
absl::Status ValidateTxnOps(const std::vector<Op>& ops);

// The end of a transaction, made by the backend at the moment the transaction is applied, in
// its commit order (Store::TxnWithTail): the audit log's record, numbered and hash-chained to the
// one committed before it, without a lock of its own around the store's group commit. A backend
// calls its tails one at a time (with its writer held), so a tail's state needs no lock against
// other tails; it must not call the store.
class TxnTail {
 public:
  virtual ~TxnTail() = default;
  // Called once the transaction's own ops hold (their preconditions), with the revision they
  // will have: the ops to write with them, in that same revision (their preconditions hold or
  // fail as any op's, but ValidateTxnOps is not run on them: the tail is trusted). An error
  // fails this transaction alone, with that error; nothing of it is written.
  virtual absl::StatusOr<std::vector<Op>> Make(int64_t revision) = 0;
  // Called exactly once after each Make: with the error, before any other tail is made, when
  // this transaction alone fails (Make's error, or a precondition of Make's ops: AlreadyExists
  // for a key it creates); else once its batch is durable (OK, tails in commit order) or has
  // failed (the batch's error, tails in reverse commit order, so each may undo what it did).
  virtual void Settled(const absl::Status& status) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // NotFound when absent (and only then).
  virtual absl::StatusOr<KeyValue> Get(const std::string& key) = 0;
  // Every key starting with `prefix`, in key order, and the revision read at: items and
  // revision are of one snapshot, so a watch from that revision misses and repeats nothing.
  virtual absl::StatusOr<ListResult> List(const std::string& prefix) = 0;
  // A page of List(prefix): the first `limit` keys after `after_key` ("": from the first), in
  // key order, the revision read at, and in `*remaining` how many keys under `prefix` follow the
  // page; one snapshot. InvalidArgument when `limit` is not positive. The default reads all of
  // List and slices it; a backend that can read only the page overrides it.
  virtual absl::StatusOr<ListResult> ListPage(const std::string& prefix,
                                              const std::string& after_key, int64_t limit,
                                              int64_t* remaining);
  // How many keys start with `prefix` (without reading their values; for quotas). `prefix`
  // must not be empty (InvalidArgument).
  virtual absl::StatusOr<int64_t> Count(const std::string& prefix) = 0;
  // Applies every op or none. Returns the new revision. A failed precondition changes nothing:
  // AlreadyExists (create of an existing key), NotFound (update or delete of an absent key),
  // Aborted (the key is at another mod_revision: a conflict, HTTP 409), FailedPrecondition (a
  // kCheck that does not hold: the key is absent or at another mod_revision); the message names
  // the key. When several fail, the first failing op in `ops` decides. InvalidArgument for an
  // empty transaction, one of checks only, a kCheck without expect_mod_revision > 0, or a key
  // given twice.
  virtual absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) = 0;
  // Whether TxnWithTail is offered (the SQLite backend; not etcd, whose answers may leave a
  // commit unknown, nor wrappers).
  virtual bool HasTxnTails() const { return false; }
  // Txn(ops + tail.Make(revision)): the tail is made while the transaction is applied, in the
  // store's commit order, so it can chain itself to the tail committed before it; the
  // transaction is group-committed with the others like any Txn, and the caller returns after
  // the tail was Settled. `ops` may be empty (the tail's ops alone); a transaction that writes
  // nothing at all is answered the current revision and takes none. Errors as Txn, plus those
  // of the tail (see TxnTail). Unimplemented where HasTxnTails() is false.
  virtual absl::StatusOr<int64_t> TxnWithTail(const std::vector<Op>& ops, TxnTail& tail) {
    (void)ops;
    (void)tail;
    return absl::UnimplementedError("this store has no transaction tails");
  }
  // Changes to keys under `prefix` with revision > `after`, oldest first, in whole revisions:
  // a page ends at `limit` events only where a revision ends, so one revision (a transaction)
  // is never split across pages, and one larger than `limit` comes whole. A reader that got
  // `limit` events or more resumes after the last one's revision; fewer means there is no more.
  // OutOfRange when `after` is older than the last compaction (HTTP 410: list again).
  virtual absl::StatusOr<std::vector<Event>> Changes(const std::string& prefix, int64_t after,
                                                     int limit) = 0;
  // Drops change-log entries at or below `revision` (objects are kept), so the log keeps a
  // window of recent revisions; callers compact periodically. Works in batches of whole
  // revisions, each its own durable transaction: writes go on between batches, and after a
  // failure or a crash the log is compacted up to the last batch done (CompactedRevision says
  // how far). Then gives the space back where the backend can (SQLite: truncates its WAL).
  // InvalidArgument when `revision` is above Revision(); OK, doing nothing, when it is at or
  // below CompactedRevision().
  virtual absl::Status Compact(int64_t revision) = 0;
  // How far the log is compacted (0 when never): Changes(prefix, after, ...) is OutOfRange for
  // every `after` below it. Durable: a reopened store reports the same.
  virtual int64_t CompactedRevision() = 0;
  virtual int64_t Revision() = 0;
  // Blocks until the revision exceeds `after` or `timeout` passes; true if it did. For watch.
  virtual bool WaitForChange(int64_t after, absl::Duration timeout) = 0;
};

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_STORE_H_
