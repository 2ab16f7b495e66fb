// AuditLog: the hash-chained audit records (audit_chain.h) kept in the store, next to the
// objects they are about, and the digests the server signs over them.
//
// Keys (under options.prefix, "/audit/"): records/<20-digit seq> (canonical record JSON) and
// digests/<20-digit seq> (canonical digest JSON). The records are contiguous: from seq 1, or
// after retention from the seq after the oldest digest (its anchor), to the head.
// 1. A mutation and its record are ONE store transaction (CommitWith): no acknowledged change
//    without its record, and a mutation that fails writes neither. On a store with transaction
//    tails (store::Store::HasTxnTails: SQLite) the record is the transaction's tail: numbered,
//    chained and encoded by the store as it applies the transaction, in its commit order, so
//    every CommitWith is a transaction of its own (its own revision) in the store's group commit
//    beside every other writer's, and the log adds no lock or hand-off of its own. On other
//    stores (etcd) the chain's one head serialises them: concurrent CommitWith calls are
//    group-committed by the log, mutations of distinct keys that wait together go into one
//    transaction and so share its revision (as the ops of one Txn do); if it fails, each is
//    redone alone, so one mutation's failed precondition never fails another's.
//    max_commit_batch = 1 turns this off.
// 2. Requests that write nothing (reads, denials, failures) are buffered (Record) and
//    group-committed: when max_batch are waiting, when the oldest has waited flush_delay_ms
//    (Tick), and before any CommitWith, in the order they were recorded.
// 3. Records are created only where no key exists (a create precondition): a second writer
//    (another process on the same store) cannot fork the chain, and the writer that finds its
//    next seq taken refuses to write (FailedPrecondition) until reopened — unless the chain is
//    shared (options.shared_chain): then it reads the new head and chains after it.
// 4. Sequence numbers and hashes are assigned inside the transaction that writes the records, so
//    a crash (kill -9) at any point leaves a chain that verifies: buffered records are lost,
//    never a gap or a fork.
// 5. An observer (SetObserver) sees each record once it is committed, in seq order.
// The destructor does not flush (like a crash): call Close() on shutdown.
// Thread-safe. Writes of the chain are serialised: by the store's commit order (tails), else by
// the log (one store transaction at a time).
#ifndef GPUCLOUD_SERVER_AUDIT_LOG_H_
#define GPUCLOUD_SERVER_AUDIT_LOG_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "server/audit_chain.h"
#include "store/store.h"

namespace gpucloud::server {

struct AuditLogOptions {
  std::string prefix = "/audit/";
  int max_batch = 256;                        // Record() flushes when this many wait
  int64_t flush_delay_ms = 100;               // Tick() flushes records older than this
  int64_t sign_interval_ms = 10 * 60 * 1000;  // Tick() signs a digest this often
  int max_buffered = 8192;  // beyond this (the store failing), Record() drops and says so
  int retain_batch = 1000;  // records one retention transaction deletes
  // Concurrent CommitWith calls committed in one store transaction at most (1: each alone).
  int max_commit_batch = 64;
  // Several writers on one chain (servers on one etcd; stores without tails only): a writer that
  // finds its next seq taken reads the new head from the store and chains its records after it
  // (at most kMaxChainRaces times per transaction), instead of refusing. Each transaction also
  // checks that the record it chains after is still there at the revision it was read at, so a
  // writer whose head retention removed cannot start a second chain. One writer should run
  // Retain (the leader).
  bool shared_chain = false;
};

// Which records Query and ExportJsonLines return; empty fields match everything.
struct AuditFilter {
  std::string user;        // user.username, exactly
  std::string action;      // a pattern as in policies: '*', '?', any case ("jobs:*")
  std::string namespace_;  // objectRef.namespace, exactly
  int64_t since_ms = 0;    // stageTimestamp >= since_ms (0: no bound)
  int64_t until_ms = 0;    // stageTimestamp < until_ms (0: no bound)
  int64_t after_seq = 0;   // seq > after_seq (for paging)
  int64_t limit = 0;       // at most this many, oldest first (0: all)
};

// What Retain keeps; 0 means no bound. The newest record is always kept.
struct RetentionPolicy {
  int64_t max_age_ms = 0;   // records whose stageTimestamp is older go
  int64_t max_records = 0;  // the oldest go beyond this many
  int64_t max_bytes = 0;    // the oldest go while the records' JSON is larger
};

class AuditLog {
 public:
  // `store` and `clock` must outlive the log. `key` signs digests (a private key).
  AuditLog(store::Store& store, const Clock& clock, AuditKey key, AuditLogOptions options = {});
  ~AuditLog() = default;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Finds the chain's head in the store (a Count and a few Gets); call once before anything
  // else. DataLoss when the records are not contiguous, the newest does not decode or hash, or
  // a digest covers a seq beyond it (the log was cut or altered).
  absl::Status Open();
  // Commits the buffered records, then `record` (seq, prevHash and hash assigned here; a zero
  // stage_ms becomes now) together with `ops` in one store transaction (see above), and returns
  // its revision: the revision of every key `ops` puts. The store's errors for `ops`
  // (AlreadyExists, NotFound, Aborted, ...) come back as they are, and then neither the ops nor
  // `record` are written (the buffered records wait for the next commit or flush; without
  // tails they are written in a transaction of their own). InvalidArgument for an op on a key
  // under the prefix; FailedPrecondition once another writer was seen on the chain.
  absl::StatusOr<int64_t> CommitWith(AuditRecord record, std::vector<store::Op> ops);
  // Buffers `record` for the next group commit (see above); flushes when max_batch are waiting
  // and returns that flush's error. Unavailable (the record dropped) when max_buffered are
  // waiting because the store keeps failing.
  absl::Status Record(AuditRecord record);
  // Commits every buffered record now (durable on return). On an error they stay buffered.
  absl::Status Flush();
  // Flushes, then signs a digest of the head and stores it; nullopt when no record is newer
  // than the last digest (nothing to sign).
  absl::StatusOr<std::optional<AuditDigest>> SignDigest();
  // The periodic work, as of `now_ms` (the caller's clock reading; call it every ~50 ms):
  // flushes when the oldest buffered record waited flush_delay_ms, signs when sign_interval_ms
  // passed since the last digest (or Open).
  absl::Status Tick(int64_t now_ms);
  // Shutdown: Flush and SignDigest.
  absl::Status Close();

  // Records matching `filter`, oldest first (after a Flush). DataLoss for a record that does
  // not decode.
  absl::StatusOr<std::vector<AuditRecord>> Query(const AuditFilter& filter);
  // Writes the matching records, one canonical JSON per line, exactly as stored (an unfiltered
  // export verifies with VerifyChain and DigestTexts()).
  absl::Status ExportJsonLines(std::ostream& out, const AuditFilter& filter);
  // The stored text of the committed records after `after_seq`, at most `limit`, oldest first,
  // each with its seq: read by key, one Get a record, so an exporter that remembers a seq reads
  // only what is new (buffered records are not flushed). When retention removed the records
  // right after `after_seq`, it resumes at the oldest kept one (one List). Empty when none is
  // newer.
  absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ReadAfter(int64_t after_seq,
                                                                         int limit);
  // The stored digests' JSON, oldest first.
  absl::StatusOr<std::vector<std::string>> DigestTexts();
  // VerifyChain over everything in the store (after a Flush), read without holding up writers;
  // what was committed meanwhile may or may not be included.
  absl::StatusOr<VerifyReport> Verify();
  // Deletes the oldest records beyond `policy`, keeping the log verifiable: each batch of
  // deletions stores, in the same transaction, a signed digest of the last record it deletes
  // (the anchor of the next record) and removes the digests before it. FailedPrecondition,
  // deleting nothing, when the log does not verify (retention must not hide tampering).
  // Returns how many records were deleted.
  absl::StatusOr<int64_t> Retain(const RetentionPolicy& policy);

  // `observer` is called with each record once it is committed (durable, seq and hash set), in
  // seq order, one call at a time, by the thread that committed it after it let go of the log's
  // locks (its request waits for it: keep it short). It must not call this log (it would wait
  // for itself). Set it before the log is used; records committed before are not shown.
  void SetObserver(std::function<void(const AuditRecord&)> observer);

  // The key that signs digests (its PublicPem() verifies them).
  const AuditKey& key() const { return key_; }
  // The newest committed record's seq (0 for an empty log).
  int64_t head_seq() const;
  // Records dropped by Record() because the buffer was full.
  int64_t dropped() const;
  // How many CommitWith calls wait for the one in flight (tests).
  size_t QueuedForTest();

 private:
  struct Head {
    int64_t seq = 0;
    std::string hash = kGenesisHash;
    int64_t mod_revision = 0;  // the head record's, when known (0: not known)
  };
  static constexpr int kMaxChainRaces = 64;
  // The chain's head as the store has it now, and the newest digest's seq (see Open).
  absl::StatusOr<std::pair<Head, int64_t>> ReadHead();
  absl::Status FollowAppended(Head& head, const std::string& first_what, int64_t counted_at);
  absl::StatusOr<Head> ReadHeadSettled();
  absl::StatusOr<Head> NewerHead(const Head& known);
  class Tail;  // a transaction's record as its store::TxnTail (audit_log.cc)
  struct Pending {
    AuditRecord record;
    std::vector<store::Op> ops;
    absl::StatusOr<int64_t> result = absl::UnknownError("not committed");
    bool done = false;  // guarded by queue_mu_
  };
  absl::StatusOr<int64_t> CommitWithTail(AuditRecord* record, const std::vector<store::Op>& ops);
  absl::StatusOr<std::vector<store::Op>> MakeTail(Tail& tail);
  void SettleTail(Tail& tail, const absl::Status& status);
  Head ChainHead() const;
  absl::Status ChainBroken() const;
  void NoteCommitted(std::vector<AuditRecord> records);
  void CommitBatchLocked(const std::vector<Pending*>& batch);
  absl::StatusOr<int64_t> CommitLocked(std::vector<AuditRecord> records,
                                       std::vector<store::Op> ops);
  std::optional<int64_t> ResyncHeadLocked(int64_t head_seq, int64_t seq,
                                          const std::string& last_text);
  absl::StatusOr<int64_t> ChainAndCommitLocked(std::vector<AuditRecord>& records,
                                               std::vector<store::Op> ops, const Head& head,
                                               Head& after, std::string& last_text);
  struct Buffered {
    AuditRecord record;
    PreparedRecord prepared;  // with tails: PrepareRecord(record), by Record's caller
  };
  static std::vector<AuditRecord> RecordsOf(std::vector<Buffered> buffered);
  std::vector<Buffered> TakeBuffer(bool for_tail = false);
  void PutBackBuffer(std::vector<Buffered> records, bool from_tail = false);
  void TailRecordsCommitted(size_t n);
  struct LogSnapshot {
    std::vector<store::KeyValue> records;  // by seq
    std::vector<store::KeyValue> digests;  // by seq
  };
  absl::StatusOr<store::ListResult> ListRecords();
  absl::Status ReadLogLocked(LogSnapshot& out);
  size_t RetainCount(const std::vector<store::KeyValue>& records,
                     const RetentionPolicy& policy) const;
  absl::Status RetainBatchLocked(LogSnapshot& log, size_t from, size_t to);
  void NotifyObserver();
  std::string RecordKey(int64_t seq) const;
  store::Op RecordPut(int64_t seq, std::string text) const;
  std::string DigestKey(int64_t seq) const;

  // Constant after construction.
  store::Store& store_;
  const Clock& clock_;
  const AuditKey key_;
  const AuditLogOptions options_;
  const bool tails_;  // store_.HasTxnTails(): records are transaction tails

  // Lock order: observer_mu_, commit_mu_, queue_mu_, chain_mu_, buffer_mu_, committed_mu_.
  // Only commit_mu_ (and observer_mu_, queue_mu_) may be held across a store call: a tail is
  // made and settled inside another thread's store call, taking chain_mu_ and those after it.

  // Taken by the log's own writes of the chain: without tails, every one (a store transaction
  // in flight); with tails, digests and retention only.
  mutable std::mutex commit_mu_;
  int64_t signed_seq_ = 0;    // guarded by commit_mu_: the newest digest's seq
  int64_t last_sign_ms_ = 0;  // guarded by commit_mu_

  mutable std::mutex chain_mu_;
  Head head_;            // guarded by chain_mu_: the newest durable record
  Head tentative_;       // guarded by chain_mu_: tails only: the newest record made, not settled
  absl::Status broken_;  // guarded by chain_mu_: set when another writer was seen

  std::mutex committed_mu_;
  bool observed_ = false;               // guarded by committed_mu_: an observer is set
  std::vector<AuditRecord> committed_;  // guarded by committed_mu_: not yet shown, seq order

  // Held while the observer is called (one call at a time, in seq order).
  std::mutex observer_mu_;
  std::function<void(const AuditRecord&)> observer_;  // guarded by observer_mu_

  // CommitWith's group commit: the callers waiting, and whether one of them is committing.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending*> queue_;  // guarded by queue_mu_
  bool leading_ = false;        // guarded by queue_mu_

  mutable std::mutex buffer_mu_;
  std::deque<Buffered> buffer_;     // guarded by buffer_mu_
  int64_t oldest_buffered_ms_ = 0;  // guarded by buffer_mu_
  size_t in_tails_ = 0;             // guarded by buffer_mu_: taken by tails not settled yet
  int64_t dropped_ = 0;             // guarded by buffer_mu_
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUDIT_LOG_H_
