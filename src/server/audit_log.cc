#include "server/audit_log.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/policy.h"
#include "core/text.h"

namespace gpucloud::server {
namespace {

using nlohmann::json;
using store::Op;

bool Matches(const AuditFilter& f, const AuditRecord& r) {
  return (f.user.empty() || f.user == r.username) &&
         (f.action.empty() || WildcardMatch(f.action, r.action, /*ignore_case=*/true)) &&
         (f.namespace_.empty() || f.namespace_ == r.object_namespace) &&
         (f.since_ms == 0 || r.stage_ms >= f.since_ms) &&
         (f.until_ms == 0 || r.stage_ms < f.until_ms) && r.seq > f.after_seq;
}

std::vector<std::string> Values(const std::vector<store::KeyValue>& kvs) {
  std::vector<std::string> out;
  out.reserve(kvs.size());
  for (const store::KeyValue& kv : kvs) out.push_back(kv.value);
  return out;
}

}  // namespace

AuditLog::AuditLog(store::Store& store, const Clock& clock, AuditKey key, AuditLogOptions options)
    : store_(store),
      clock_(clock),
      key_(std::move(key)),
      options_(std::move(options)),
      tails_(store.HasTxnTails()) {}

// A transaction's records as the store's tail: the buffered ones and the request's own (none for
// a flush), chained after the newest record made when the store applies the transaction.
class AuditLog::Tail final : public store::TxnTail {
 public:
  // `own` is the request's record (nullptr for a flush), prepared here, by the caller.
  Tail(AuditLog& log, AuditRecord* own)
      : own_(own), own_prepared_(own ? PrepareRecord(*own) : PreparedRecord{}), log_(log) {}
  absl::StatusOr<std::vector<Op>> Make(int64_t) override { return log_.MakeTail(*this); }
  void Settled(const absl::Status& status) override { log_.SettleTail(*this, status); }

  AuditRecord* own_;  // the request's record, or nullptr
  const PreparedRecord own_prepared_;
  std::vector<Buffered> buffered;  // taken from the buffer by Make
  Head before;                     // the chain's tentative head before Make
  Head after;                      // and after it

 private:
  AuditLog& log_;
};

std::string AuditLog::RecordKey(int64_t seq) const {
  return fmt::format("{}records/{:020d}", options_.prefix, seq);
}
// A record's put: created (no key may exist, so another writer's record is found) and kept out
// of the change log (nobody watches the records: written once, not twice).
Op AuditLog::RecordPut(int64_t seq, std::string text) const {
  return Op{Op::Kind::kPut, RecordKey(seq), std::move(text), 0, /*unlogged=*/true};
}

std::string AuditLog::DigestKey(int64_t seq) const {
  return fmt::format("{}digests/{:020d}", options_.prefix, seq);
}

// From the record at `head.seq` (counted), on through the records other servers appended
// since the count, each chained to the one before: the head now. A record past the counted ones
// that is as old as `counted_at` (the store's revision before the count) was there when counted,
// so the count is short of the records: one is missing before it.
absl::Status AuditLog::FollowAppended(Head& head, const std::string& first_what,
                                      int64_t counted_at) {
  absl::StatusOr<store::KeyValue> last = store_.Get(RecordKey(head.seq));
  absl::StatusOr<AuditRecord> r =
      last.ok() ? DecodeRecord(last->value) : absl::NotFoundError("missing");
  for (;;) {
    if (!r.ok() || RecordHash(*r) != r->hash) {
      return absl::DataLossError(Cat("audit log: the records are not a contiguous chain from ",
                                     first_what, ": run a verification"));
    }
    head.hash = r->hash;
    head.mod_revision = last->mod_revision;
    absl::StatusOr<store::KeyValue> next = store_.Get(RecordKey(head.seq + 1));
    if (absl::IsNotFound(next.status())) return absl::OkStatus();
    if (!next.ok()) return next.status();
    absl::StatusOr<AuditRecord> n = DecodeRecord(next->value);
    if (next->mod_revision <= counted_at || (n.ok() && n->prev_hash != head.hash)) {
      r = absl::DataLossError("a gap");
    } else {
      r = std::move(n);
      last = std::move(next);
      ++head.seq;
    }
  }
}

// The chain's records are contiguous, from seq 1 (or the one after retention's anchor digest,
// the oldest digest) to the head: the head is first + Count - 1, or later when other servers
// (several on etcd) appended records since the count.
absl::StatusOr<std::pair<AuditLog::Head, int64_t>> AuditLog::ReadHead() {
  Head head;
  const int64_t counted_at = store_.Revision();
  absl::StatusOr<store::ListResult> digests = store_.List(options_.prefix + "digests/");
  if (!digests.ok()) return digests.status();
  std::vector<int64_t> digest_seqs;
  for (const store::KeyValue& d : digests->items) {
    absl::StatusOr<AuditDigest> digest = DecodeDigest(d.value);
    if (digest.ok()) digest_seqs.push_back(digest->seq);
  }
  std::sort(digest_seqs.begin(), digest_seqs.end());
  const int64_t signed_seq = digest_seqs.empty() ? 0 : digest_seqs.back();
  absl::StatusOr<int64_t> count = store_.Count(options_.prefix + "records/");
  if (!count.ok()) return count.status();
  if (*count > 0) {
    int64_t first = digest_seqs.empty() ? 1 : digest_seqs.front() + 1;
    if (absl::StatusOr<store::KeyValue> one = store_.Get(RecordKey(1)); one.ok()) first = 1;
    head.seq = first + *count - 1;
    if (absl::Status s =
            FollowAppended(head, Cat("seq ", first, " (", *count, " records)"), counted_at);
        !s.ok()) {
      return s;
    }
  }
  if (signed_seq > head.seq) {
    return absl::DataLossError(Cat("audit log: truncated: a digest covers seq ", signed_seq,
                                   ", the last record is ", head.seq));
  }
  return std::make_pair(head, signed_seq);
}

absl::Status AuditLog::Open() {
  std::lock_guard<std::mutex> lock(commit_mu_);
  absl::StatusOr<std::pair<Head, int64_t>> read = ReadHead();
  if (!read.ok()) return read.status();
  signed_seq_ = read->second;
  last_sign_ms_ = clock_.NowMillis();
  std::lock_guard<std::mutex> chain_lock(chain_mu_);
  head_ = tentative_ = read->first;
  broken_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::Status AuditLog::ChainBroken() const {
  std::lock_guard<std::mutex> lock(chain_mu_);
  return broken_;
}

AuditLog::Head AuditLog::ChainHead() const {
  std::lock_guard<std::mutex> lock(chain_mu_);
  return head_;
}

void AuditLog::NoteCommitted(std::vector<AuditRecord> records) {
  std::lock_guard<std::mutex> lock(committed_mu_);
  if (!observed_) return;
  committed_.insert(committed_.end(), std::make_move_iterator(records.begin()),
                    std::make_move_iterator(records.end()));
}

// Chains the buffered records and the tail's own after the newest record made (committed or in
// the store's batch being written): called by the store, in its commit order.
absl::StatusOr<std::vector<Op>> AuditLog::MakeTail(Tail& tail) {
  std::lock_guard<std::mutex> lock(chain_mu_);
  tail.before = tail.after = tentative_;
  if (!broken_.ok()) return broken_;
  tail.buffered = TakeBuffer(/*for_tail=*/true);
  Head h = tentative_;
  std::vector<Op> ops;
  ops.reserve(tail.buffered.size() + 1);
  // Only the chaining is done here, in the store's commit order: records come encoded.
  auto chain = [&](AuditRecord& r, const PreparedRecord& prepared) {
    std::string text = ChainRecord(prepared, ++h.seq, h.hash, r);
    h.hash = r.hash;
    ops.push_back(RecordPut(r.seq, std::move(text)));
  };
  for (Buffered& b : tail.buffered) chain(b.record, b.prepared);
  if (tail.own_ != nullptr) chain(*tail.own_, tail.own_prepared_);
  tail.after = tentative_ = h;
  return ops;
}

// Durable: the head moves and the observer will see them. Not written: the chain goes back to
// where it was before the tail (the store settles failed batches newest first) and the buffered
// records go back to the buffer; a record key that existed means another writer.
void AuditLog::SettleTail(Tail& tail, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(chain_mu_);
  if (status.ok()) {
    head_ = tail.after;
    TailRecordsCommitted(tail.buffered.size());
    std::vector<AuditRecord> records = RecordsOf(std::move(tail.buffered));
    // CommitWithTail's caller owns the record and is done with it.
    if (tail.own_ != nullptr) records.push_back(std::move(*tail.own_));
    NoteCommitted(std::move(records));
    return;
  }
  tentative_ = tail.before;
  PutBackBuffer(std::move(tail.buffered), /*from_tail=*/true);
  if (broken_.ok() && (absl::IsAlreadyExists(status) || absl::IsFailedPrecondition(status))) {
    broken_ = absl::FailedPreconditionError(
        "audit log: another writer appended to the chain; reopen the log");
  }
}

absl::StatusOr<int64_t> AuditLog::CommitWithTail(AuditRecord* record, const std::vector<Op>& ops) {
  Tail tail(*this, record);
  absl::StatusOr<int64_t> rev = store_.TxnWithTail(ops, tail);
  NotifyObserver();
  if (!rev.ok()) {
    // As without tails: once another writer was seen, that is the answer.
    if (absl::Status broken = ChainBroken(); !broken.ok()) return broken;
  }
  return rev;
}

// Chains `records` after the head and writes them (each key created: none may exist) with `ops`
// in one transaction. A shared chain whose head another writer moved meanwhile is read again and
// the records chained after the new head.
absl::StatusOr<int64_t> AuditLog::CommitLocked(std::vector<AuditRecord> records,
                                               std::vector<Op> ops) {
  for (int race = 0;; ++race) {
    Head head;
    {
      std::lock_guard<std::mutex> lock(chain_mu_);
      if (!broken_.ok()) return broken_;
      head = head_;
    }
    if (records.empty() && ops.empty()) return store_.Revision();
    if (options_.shared_chain && head.seq == 0 && !records.empty() && race == 0) {
      // Nothing to check against yet: start from what the store has now, not from an empty log
      // that others may have written (and retention cut) since this writer opened it.
      absl::StatusOr<Head> now = ReadHeadSettled();
      if (!now.ok()) return now.status();
      head = *now;
    }
    Head after;
    std::string last_text;
    absl::StatusOr<int64_t> rev = ChainAndCommitLocked(records, ops, head, after, last_text);
    if (rev.ok()) {
      after.mod_revision = *rev;
      std::lock_guard<std::mutex> lock(chain_mu_);
      head_ = after;
    } else if (records.empty()) {
      return rev.status();
    } else if (std::optional<int64_t> applied = ResyncHeadLocked(head.seq, after.seq, last_text)) {
      rev = *applied;
    } else {
      if (options_.shared_chain && race < kMaxChainRaces) {
        // Did another writer move the head (or retention take the one we chained after)?
        absl::StatusOr<Head> now = NewerHead(head);
        if (now.ok() && (now->seq != head.seq || now->hash != head.hash)) {
          std::lock_guard<std::mutex> lock(chain_mu_);
          head_ = *now;
          continue;
        }
      }
      std::lock_guard<std::mutex> lock(chain_mu_);
      return broken_.ok() ? rev.status() : broken_;
    }
    NoteCommitted(std::move(records));
    return rev;
  }
}

// Shared chain: the head after `known`, found by reading the records after it one by one (the
// others append while we look: a count would race them); when there is none, the head as a
// count of the records says (`known` may be gone: retention).
absl::StatusOr<AuditLog::Head> AuditLog::NewerHead(const Head& known) {
  Head h = known;
  for (;;) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(RecordKey(h.seq + 1));
    if (absl::IsNotFound(kv.status())) break;
    if (!kv.ok()) return kv.status();
    absl::StatusOr<AuditRecord> r = DecodeRecord(kv->value);
    if (!r.ok())
      return absl::DataLossError(Cat("audit log: record ", h.seq + 1, " does not decode"));
    h = Head{h.seq + 1, r->hash, kv->mod_revision};
  }
  if (h.seq != known.seq) return h;
  return ReadHeadSettled();
}

// ReadHead's head, read again while other writers make it look cut (a record appended between
// its count and its reads).
absl::StatusOr<AuditLog::Head> AuditLog::ReadHeadSettled() {
  absl::StatusOr<std::pair<Head, int64_t>> read = ReadHead();
  for (int tries = 1; tries < kMaxChainRaces && absl::IsDataLoss(read.status()); ++tries) {
    read = ReadHead();
  }
  if (!read.ok()) return read.status();
  return read->first;
}

// One try of CommitLocked: `records` numbered and chained after `head` (`after`: the last of
// them), written with `ops`; on a shared chain with a check that `head`'s record is still there.
absl::StatusOr<int64_t> AuditLog::ChainAndCommitLocked(std::vector<AuditRecord>& records,
                                                       std::vector<Op> ops, const Head& head,
                                                       Head& after, std::string& last_text) {
  after = head;
  if (options_.shared_chain && head.seq > 0 && head.mod_revision > 0 && !records.empty()) {
    ops.push_back(Op{Op::Kind::kCheck, RecordKey(head.seq), "", head.mod_revision});
  }
  ops.reserve(ops.size() + records.size());
  for (AuditRecord& r : records) {
    r.seq = ++after.seq;
    r.prev_hash = after.hash;
    std::string text = HashAndEncodeRecord(r);
    after.hash = r.hash;
    ops.push_back(RecordPut(r.seq, std::move(text)));
  }
  last_text = records.empty() ? std::string() : ops.back().value;
  return store_.Txn(ops);
}

// After a failed transaction that meant to write records up to `seq` (the last one `last_text`):
// learns from the store whether it was applied after all (an error after the commit; then
// returns its revision) and whether another writer took the next seq (then, unless the chain is
// shared, this log stops writing: broken_).
std::optional<int64_t> AuditLog::ResyncHeadLocked(int64_t head_seq, int64_t seq,
                                                  const std::string& last_text) {
  absl::StatusOr<store::KeyValue> next = store_.Get(RecordKey(head_seq + 1));
  if (!next.ok()) return std::nullopt;  // not applied (or unreadable: the next create tells)
  absl::StatusOr<store::KeyValue> last = store_.Get(RecordKey(seq));
  std::lock_guard<std::mutex> lock(chain_mu_);
  if (last.ok() && last->value == last_text) {
    absl::StatusOr<AuditRecord> r = DecodeRecord(last_text);
    if (r.ok()) {
      head_ = Head{seq, r->hash, last->mod_revision};  // ours, applied
      return last->mod_revision;
    }
  }
  if (!options_.shared_chain) {
    broken_ = absl::FailedPreconditionError(
        "audit log: another writer appended to the chain; reopen the log");
  }
  return std::nullopt;
}

std::vector<AuditRecord> AuditLog::RecordsOf(std::vector<Buffered> buffered) {
  std::vector<AuditRecord> out;
  out.reserve(buffered.size());
  for (Buffered& b : buffered) out.push_back(std::move(b.record));
  return out;
}

std::vector<AuditLog::Buffered> AuditLog::TakeBuffer(bool for_tail) {
  std::lock_guard<std::mutex> lock(buffer_mu_);
  std::vector<Buffered> out(std::make_move_iterator(buffer_.begin()),
                            std::make_move_iterator(buffer_.end()));
  buffer_.clear();
  if (for_tail) in_tails_ += out.size();
  return out;
}

// Records taken back come first again, and the buffer is as old as the oldest of them.
void AuditLog::PutBackBuffer(std::vector<Buffered> records, bool from_tail) {
  if (records.empty()) return;
  std::lock_guard<std::mutex> lock(buffer_mu_);
  if (from_tail) in_tails_ -= records.size();
  const int64_t oldest = records.front().record.stage_ms;
  oldest_buffered_ms_ = buffer_.empty() ? oldest : std::min(oldest_buffered_ms_, oldest);
  buffer_.insert(buffer_.begin(), std::make_move_iterator(records.begin()),
                 std::make_move_iterator(records.end()));
}

void AuditLog::TailRecordsCommitted(size_t n) {
  std::lock_guard<std::mutex> lock(buffer_mu_);
  in_tails_ -= n;
}

absl::StatusOr<int64_t> AuditLog::CommitWith(AuditRecord record, std::vector<Op> ops) {
  for (const Op& op : ops) {
    if (op.key.starts_with(options_.prefix)) {
      return absl::InvalidArgumentError(Cat("audit log: ", op.key, " is the audit log's key"));
    }
  }
  if (record.stage_ms == 0) record.stage_ms = clock_.NowMillis();
  if (tails_) return CommitWithTail(&record, ops);
  // Group commit: the first caller to find no commit in flight leads, and commits its own
  // mutation with every one that queued meanwhile; the others wait for their result.
  Pending mine{std::move(record), std::move(ops)};
  std::unique_lock<std::mutex> queue_lock(queue_mu_);
  queue_.push_back(&mine);
  while (!mine.done) {
    if (leading_) {
      queue_cv_.wait(queue_lock);
      continue;
    }
    leading_ = true;
    size_t n = std::min(queue_.size(), static_cast<size_t>(std::max(1, options_.max_commit_batch)));
    std::vector<Pending*> batch(queue_.begin(), queue_.begin() + n);
    queue_.erase(queue_.begin(), queue_.begin() + n);
    queue_lock.unlock();
    {
      std::lock_guard<std::mutex> lock(commit_mu_);
      CommitBatchLocked(batch);
    }
    queue_lock.lock();
    for (Pending* p : batch) p->done = true;
    leading_ = false;
    queue_cv_.notify_all();
  }
  queue_lock.unlock();
  NotifyObserver();
  return std::move(mine.result);
}

// Commits `batch` (in order) with the buffered records before it: as few transactions as the
// mutations' keys allow (two that touch one key go in different ones); a transaction that fails
// is redone one mutation at a time, so that each gets its own answer.
void AuditLog::CommitBatchLocked(const std::vector<Pending*>& batch) {
  std::vector<Buffered> taken = TakeBuffer();
  std::vector<AuditRecord> buffered = RecordsOf(taken);  // `taken` kept to give back
  size_t from = 0;
  while (from < batch.size()) {
    std::set<std::string> keys;
    size_t to = from;
    for (; to < batch.size(); ++to) {
      bool clash = false;
      for (const Op& op : batch[to]->ops) clash = clash || keys.count(op.key) > 0;
      if (clash && to > from) break;
      for (const Op& op : batch[to]->ops) keys.insert(op.key);
    }
    std::vector<AuditRecord> records = buffered;
    std::vector<Op> ops;
    for (size_t i = from; i < to; ++i) {
      records.push_back(batch[i]->record);
      ops.insert(ops.end(), batch[i]->ops.begin(), batch[i]->ops.end());
    }
    absl::StatusOr<int64_t> rev = CommitLocked(std::move(records), std::move(ops));
    if (rev.ok()) {
      for (size_t i = from; i < to; ++i) batch[i]->result = rev;
      buffered.clear();
    } else if (to - from == 1) {
      batch[from]->result = rev.status();
    } else {
      for (size_t i = from; i < to; ++i) {
        std::vector<AuditRecord> one = buffered;
        one.push_back(batch[i]->record);
        batch[i]->result = CommitLocked(std::move(one), batch[i]->ops);
        if (batch[i]->result.ok()) buffered.clear();
      }
    }
    from = to;
  }
  // The buffered records are committed even when every mutation failed; else kept for later.
  if (!buffered.empty() && !CommitLocked(buffered, {}).ok()) PutBackBuffer(std::move(taken));
}

absl::Status AuditLog::Record(AuditRecord record) {
  int64_t now = clock_.NowMillis();
  if (record.stage_ms == 0) record.stage_ms = now;
  // With tails, encoded here rather than by the store's writer (see MakeTail).
  PreparedRecord prepared = tails_ ? PrepareRecord(record) : PreparedRecord{};
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(buffer_mu_);
    if (buffer_.size() + in_tails_ >= static_cast<size_t>(options_.max_buffered)) {
      ++dropped_;
      return absl::UnavailableError("audit log: the buffer is full (the store is failing)");
    }
    if (buffer_.empty()) oldest_buffered_ms_ = now;
    buffer_.push_back(Buffered{std::move(record), std::move(prepared)});
    full = buffer_.size() >= static_cast<size_t>(options_.max_batch);
  }
  return full ? Flush() : absl::OkStatus();
}

absl::Status AuditLog::Flush() {
  if (tails_) {
    {
      // Records a tail took are durable only once it settles (or are given back): then a flush
      // commits after that batch, even when it finds the buffer empty.
      std::lock_guard<std::mutex> lock(buffer_mu_);
      if (buffer_.empty() && in_tails_ == 0) return absl::OkStatus();
    }
    static const std::vector<Op> kNoOps;
    return CommitWithTail(nullptr, kNoOps).status();
  }
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    std::vector<Buffered> records = TakeBuffer();
    if (records.empty()) return absl::OkStatus();
    absl::StatusOr<int64_t> rev = CommitLocked(RecordsOf(records), {});
    if (!rev.ok()) PutBackBuffer(std::move(records));
    status = rev.status();
  }
  NotifyObserver();
  return status;
}

void AuditLog::SetObserver(std::function<void(const AuditRecord&)> observer) {
  std::lock_guard<std::mutex> observer_lock(observer_mu_);
  std::lock_guard<std::mutex> lock(committed_mu_);
  observer_ = std::move(observer);
  observed_ = static_cast<bool>(observer_);
  committed_.clear();
}

// Shows the committed records to the observer: taken from committed_ while observer_mu_ is held,
// so that a later batch (higher seqs) waits for an earlier one to be shown.
void AuditLog::NotifyObserver() {
  std::lock_guard<std::mutex> observer_lock(observer_mu_);
  std::vector<AuditRecord> records;
  {
    std::lock_guard<std::mutex> lock(committed_mu_);
    records.swap(committed_);
  }
  if (!observer_) return;
  for (const AuditRecord& r : records) observer_(r);
}

absl::StatusOr<std::optional<AuditDigest>> AuditLog::SignDigest() {
  if (absl::Status s = Flush(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(commit_mu_);
  Head head;
  {
    std::lock_guard<std::mutex> chain_lock(chain_mu_);
    if (!broken_.ok()) return broken_;
    head = head_;
  }
  int64_t now = clock_.NowMillis();
  last_sign_ms_ = now;
  if (head.seq == 0 || head.seq <= signed_seq_) return std::optional<AuditDigest>();
  absl::StatusOr<AuditDigest> d = server::SignDigest(head.seq, head.hash, now, key_);
  if (!d.ok()) return d.status();
  std::string text = EncodeDigest(*d);
  absl::StatusOr<int64_t> rev = store_.Txn({Op{Op::Kind::kPut, DigestKey(d->seq), text, 0}});
  if (!rev.ok()) {
    // Applied after all; or, on a shared chain, another writer signed this seq first.
    absl::StatusOr<store::KeyValue> stored = store_.Get(DigestKey(d->seq));
    if (!stored.ok() || (stored->value != text && !options_.shared_chain)) return rev.status();
  }
  signed_seq_ = d->seq;
  return std::optional<AuditDigest>(*d);
}

absl::Status AuditLog::Tick(int64_t now_ms) {
  bool flush_due = false;
  {
    std::lock_guard<std::mutex> lock(buffer_mu_);
    flush_due = !buffer_.empty() && now_ms - oldest_buffered_ms_ >= options_.flush_delay_ms;
  }
  bool sign_due = false;
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    sign_due = now_ms - last_sign_ms_ >= options_.sign_interval_ms;
  }
  if (sign_due) return SignDigest().status();  // flushes first
  return flush_due ? Flush() : absl::OkStatus();
}

absl::Status AuditLog::Close() { return SignDigest().status(); }

int64_t AuditLog::head_seq() const { return ChainHead().seq; }

size_t AuditLog::QueuedForTest() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return queue_.size();
}

int64_t AuditLog::dropped() const {
  std::lock_guard<std::mutex> lock(buffer_mu_);
  return dropped_;
}

absl::StatusOr<store::ListResult> AuditLog::ListRecords() {
  if (absl::Status s = Flush(); !s.ok()) return s;
  return store_.List(options_.prefix + "records/");
}

absl::StatusOr<std::vector<AuditRecord>> AuditLog::Query(const AuditFilter& filter) {
  absl::StatusOr<store::ListResult> list = ListRecords();
  if (!list.ok()) return list.status();
  std::vector<AuditRecord> out;
  for (const store::KeyValue& kv : list->items) {
    absl::StatusOr<AuditRecord> r = DecodeRecord(kv.value);
    if (!r.ok()) return absl::DataLossError(Cat(kv.key, ": ", r.status().message()));
    if (!Matches(filter, *r)) continue;
    out.push_back(std::move(*r));
    if (filter.limit > 0 && static_cast<int64_t>(out.size()) >= filter.limit) break;
  }
  return out;
}

absl::Status AuditLog::ExportJsonLines(std::ostream& out, const AuditFilter& filter) {
  absl::StatusOr<store::ListResult> list = ListRecords();
  if (!list.ok()) return list.status();
  int64_t written = 0;
  for (const store::KeyValue& kv : list->items) {
    absl::StatusOr<AuditRecord> r = DecodeRecord(kv.value);
    if (!r.ok()) return absl::DataLossError(Cat(kv.key, ": ", r.status().message()));
    if (!Matches(filter, *r)) continue;
    out << kv.value << '\n';
    if (filter.limit > 0 && ++written >= filter.limit) break;
  }
  out.flush();
  return out ? absl::OkStatus() : absl::UnavailableError("audit export: cannot write");
}

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> AuditLog::ReadAfter(int64_t after_seq,
                                                                                 int limit) {
  std::vector<std::pair<int64_t, std::string>> out;
  const int64_t head = head_seq();
  for (int64_t seq = after_seq + 1; seq <= head && static_cast<int>(out.size()) < limit; ++seq) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(RecordKey(seq));
    if (kv.ok()) {
      out.emplace_back(seq, std::move(kv->value));
      continue;
    }
    if (!absl::IsNotFound(kv.status())) return kv.status();
    if (!out.empty()) break;  // the chain is contiguous: nothing can follow a gap
    // Retention removed it: the kept records are contiguous up to the head (Open checks it),
    // so the oldest kept one is the head less their count (at most that: `head` was read
    // first, and records appended since only add to the count). Jump there; else step on.
    absl::StatusOr<int64_t> kept = store_.Count(options_.prefix + "records/");
    if (!kept.ok()) return kept.status();
    const int64_t oldest = head - *kept + 1;
    if (oldest > seq + 1) seq = oldest - 1;  // the loop's ++seq reads `oldest` next
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> AuditLog::DigestTexts() {
  absl::StatusOr<store::ListResult> list = store_.List(options_.prefix + "digests/");
  if (!list.ok()) return list.status();
  return Values(list->items);
}

absl::Status AuditLog::ReadLogLocked(LogSnapshot& out) {
  absl::StatusOr<store::ListResult> records = store_.List(options_.prefix + "records/");
  if (!records.ok()) return records.status();
  absl::StatusOr<store::ListResult> digests = store_.List(options_.prefix + "digests/");
  if (!digests.ok()) return digests.status();
  out.records = std::move(records->items);
  out.digests = std::move(digests->items);
  return absl::OkStatus();
}

absl::StatusOr<VerifyReport> AuditLog::Verify() {
  if (absl::Status s = Flush(); !s.ok()) return s;
  // Without the writers' lock (a long read must not stall them): digests first, so that each
  // covers a record the later list holds (retention never deletes the newest); then, for a
  // retention that ran in between, the digests that anchor the start of what was read.
  absl::StatusOr<std::vector<std::string>> digests = DigestTexts();
  if (!digests.ok()) return digests.status();
  absl::StatusOr<store::ListResult> records = store_.List(options_.prefix + "records/");
  if (!records.ok()) return records.status();
  if (!records->items.empty()) {
    absl::StatusOr<AuditRecord> first = DecodeRecord(records->items.front().value);
    absl::StatusOr<std::vector<std::string>> later = DigestTexts();
    if (!later.ok()) return later.status();
    for (const std::string& text : *later) {
      absl::StatusOr<AuditDigest> d = DecodeDigest(text);
      if (first.ok() && d.ok() && d->seq < first->seq) digests->push_back(text);
    }
  }
  return VerifyChain(Values(records->items), *digests, key_);
}

// How many of the oldest records `policy` lets go (the newest always stays).
size_t AuditLog::RetainCount(const std::vector<store::KeyValue>& records,
                             const RetentionPolicy& policy) const {
  if (records.size() < 2) return 0;
  size_t cut = 0;
  size_t keep_max = records.size() - 1;
  if (policy.max_age_ms > 0) {
    int64_t oldest_kept = clock_.NowMillis() - policy.max_age_ms;
    while (cut < keep_max) {
      absl::StatusOr<AuditRecord> r = DecodeRecord(records[cut].value);
      if (!r.ok() || r->stage_ms >= oldest_kept) break;
      ++cut;
    }
  }
  if (policy.max_records > 0 && records.size() - cut > static_cast<size_t>(policy.max_records)) {
    cut = records.size() - static_cast<size_t>(policy.max_records);
  }
  if (policy.max_bytes > 0) {
    int64_t bytes = 0;
    for (size_t i = cut; i < records.size(); ++i) bytes += records[i].value.size();
    while (cut < records.size() && bytes > policy.max_bytes) bytes -= records[cut++].value.size();
  }
  return std::min(cut, keep_max);
}

absl::StatusOr<int64_t> AuditLog::Retain(const RetentionPolicy& policy) {
  if (absl::StatusOr<std::optional<AuditDigest>> d = SignDigest(); !d.ok()) return d.status();
  std::lock_guard<std::mutex> lock(commit_mu_);
  if (absl::Status broken = ChainBroken(); !broken.ok()) return broken;
  LogSnapshot log;
  if (absl::Status s = ReadLogLocked(log); !s.ok()) return s;
  VerifyReport report = VerifyChain(Values(log.records), Values(log.digests), key_);
  if (!report.ok) {
    return absl::FailedPreconditionError(
        Cat("audit retention refused: the log does not verify: ", report.what));
  }
  size_t cut = RetainCount(log.records, policy);
  size_t batch = static_cast<size_t>(std::max(1, options_.retain_batch));
  for (size_t from = 0; from < cut; from += batch) {
    size_t to = std::min(cut, from + batch);
    absl::Status s = RetainBatchLocked(log, from, to);
    if (!s.ok()) return s;
  }
  return static_cast<int64_t>(cut);
}

// Deletes records [from, to) and the digests before the last of them, and anchors what remains:
// a signed digest of record to-1 (whose hash record `to` holds as prevHash), in one transaction.
absl::Status AuditLog::RetainBatchLocked(LogSnapshot& log, size_t from, size_t to) {
  absl::StatusOr<AuditRecord> last = DecodeRecord(log.records[to - 1].value);
  if (!last.ok()) return last.status();  // verified above: cannot happen
  std::vector<Op> ops;
  for (size_t i = from; i < to; ++i) {
    ops.push_back(Op{Op::Kind::kDelete, log.records[i].key, "", log.records[i].mod_revision});
  }
  std::vector<store::KeyValue> kept_digests;
  bool anchored = false;
  for (const store::KeyValue& kv : log.digests) {
    absl::StatusOr<AuditDigest> d = DecodeDigest(kv.value);
    if (d.ok() && d->seq < last->seq) {
      ops.push_back(Op{Op::Kind::kDelete, kv.key, "", kv.mod_revision});
      continue;
    }
    anchored = anchored || (d.ok() && d->seq == last->seq);
    kept_digests.push_back(kv);
  }
  if (!anchored) {
    absl::StatusOr<AuditDigest> anchor =
        server::SignDigest(last->seq, last->hash, clock_.NowMillis(), key_);
    if (!anchor.ok()) return anchor.status();
    ops.push_back(Op{Op::Kind::kPut, DigestKey(anchor->seq), EncodeDigest(*anchor), 0});
  }
  absl::StatusOr<int64_t> rev = store_.Txn(ops);
  if (!rev.ok()) return rev.status();
  if (!anchored) {
    absl::StatusOr<store::KeyValue> kv = store_.Get(DigestKey(last->seq));
    if (kv.ok()) kept_digests.insert(kept_digests.begin(), *kv);
  }
  log.digests = std::move(kept_digests);
  return absl::OkStatus();
}

}  // namespace gpucloud::server
