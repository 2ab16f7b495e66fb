#include "server/audit_log.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/cleanup/cleanup.h"
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
    : store_(store), clock_(clock), key_(std::move(key)), options_(std::move(options)) {}

std::string AuditLog::RecordKey(int64_t seq) const {
  return fmt::format("{}records/{:020d}", options_.prefix, seq);
}
std::string AuditLog::DigestKey(int64_t seq) const {
  return fmt::format("{}digests/{:020d}", options_.prefix, seq);
}

// The chain's records are contiguous, from seq 1 (or the one after retention's anchor digest,
// the oldest digest) to the head: the head is first + Count - 1.
absl::Status AuditLog::Open() {
  std::lock_guard<std::mutex> lock(commit_mu_);
  head_ = Head{};
  absl::StatusOr<store::ListResult> digests = store_.List(options_.prefix + "digests/");
  if (!digests.ok()) return digests.status();
  std::vector<int64_t> digest_seqs;
  for (const store::KeyValue& d : digests->items) {
    absl::StatusOr<AuditDigest> digest = DecodeDigest(d.value);
    if (digest.ok()) digest_seqs.push_back(digest->seq);
  }
  std::sort(digest_seqs.begin(), digest_seqs.end());
  signed_seq_ = digest_seqs.empty() ? 0 : digest_seqs.back();
  absl::StatusOr<int64_t> count = store_.Count(options_.prefix + "records/");
  if (!count.ok()) return count.status();
  if (*count > 0) {
    int64_t first = digest_seqs.empty() ? 1 : digest_seqs.front() + 1;
    if (absl::StatusOr<store::KeyValue> one = store_.Get(RecordKey(1)); one.ok()) first = 1;
    head_.seq = first + *count - 1;
    absl::StatusOr<store::KeyValue> last = store_.Get(RecordKey(head_.seq));
    absl::StatusOr<store::KeyValue> next = store_.Get(RecordKey(head_.seq + 1));
    absl::StatusOr<AuditRecord> r =
        last.ok() ? DecodeRecord(last->value) : absl::NotFoundError("missing");
    if (!r.ok() || RecordHash(*r) != r->hash || !absl::IsNotFound(next.status())) {
      return absl::DataLossError(Cat("audit log: the records are not a contiguous chain from seq ",
                                     first, " (", *count, " records): run a verification"));
    }
    head_.hash = r->hash;
  }
  if (signed_seq_ > head_.seq) {
    return absl::DataLossError(Cat("audit log: truncated: a digest covers seq ", signed_seq_,
                                   ", the last record is ", head_.seq));
  }
  durable_ = head_;
  {
    std::lock_guard<std::mutex> committed_lock(committed_mu_);
    committed_.clear();
    shown_seq_ = head_.seq;
  }
  last_sign_ms_ = clock_.NowMillis();
  broken_ = absl::OkStatus();
  return absl::OkStatus();
}

// The chain's commits. Each attempt is one store transaction: the records buffered so far and
// the queued callers' mutations with their records, chained after head_ under commit_mu_ and
// handed to the store with TxnQueued, which lets go of commit_mu_ as soon as the transaction has
// its place in the store's commit order. So the next attempt is chained while the store writes
// this one, and on SQLite both go in one group commit (one fsync); on a store that does not
// pipeline (the default TxnQueued) commit_mu_ is held through the Txn and the callers that queue
// meanwhile share the next attempt, as in a classic group commit.
//
// An attempt chained while another is in flight starts with a check that the record before its
// first exists, so it fails if the one before it failed: no gap is ever committed. Once an
// attempt fails, no new one is chained until those in flight have ended; then ResetLocked rolls
// head_ back to the last committed record (learning from the store whether a failed attempt
// was applied after all, and whether another writer took the next seq) and decides each failed
// attempt: redo it (it failed because the one before it did), redo each of its callers alone (a
// shared transaction failed on one of their mutations), or answer its one caller the error.

// Takes the queued callers for one attempt: the oldest, and after it those that neither must go
// alone nor touch a key already in the attempt, up to max_commit_batch; and the buffered records.
bool AuditLog::TakeQueuedLocked(Attempt& a) {
  {
    std::lock_guard<std::mutex> queue_lock(queue_mu_);
    std::set<std::string> keys;
    const size_t max = static_cast<size_t>(std::max(1, options_.max_commit_batch));
    while (!queue_.empty() && a.pendings.size() < max) {
      Pending* p = queue_.front();
      if (!a.pendings.empty() && (p->alone || a.pendings.front()->alone)) break;
      bool clash = false;
      for (const Op& op : p->ops) clash = clash || keys.count(op.key) > 0;
      if (clash) break;
      for (const Op& op : p->ops) keys.insert(op.key);
      a.pendings.push_back(p);
      queue_.pop_front();
    }
  }
  if (a.pendings.empty()) return false;
  a.records = TakeBuffer();
  a.buffered = a.records.size();
  for (Pending* p : a.pendings) a.records.push_back(p->record);
  return true;
}

// Chains a.records after head_ (seq, prevHash, hash) and builds a.ops: the check on the record
// before (when an attempt may still be in flight), the mutations, then the records (each key
// created: none may exist, so that a second writer cannot fork the chain).
void AuditLog::ChainLocked(Attempt& a) {
  a.ops.clear();
  if (in_flight_ > 0 && head_.seq > 0) {
    a.ops.push_back(Op{.kind = Op::Kind::kCheck, .key = RecordKey(head_.seq)});
  }
  for (const Pending* p : a.pendings) a.ops.insert(a.ops.end(), p->ops.begin(), p->ops.end());
  for (AuditRecord& r : a.records) {
    r.seq = head_.seq + 1;
    r.prev_hash = head_.hash;
    std::string text = HashAndEncodeRecord(r);
    head_ = Head{r.seq, r.hash};
    // Nobody watches the records: kept out of the change log (written once, not twice).
    a.ops.push_back(Op{Op::Kind::kPut, RecordKey(r.seq), std::move(text), 0, /*unlogged=*/true});
  }
}

// Runs one attempt (a.records not empty) with commit_mu_ held by `lock` (held again on return)
// and waits until it is decided. OK when it was applied; else its error (a.retry: redo it).
absl::Status AuditLog::RunAttemptLocked(Attempt& a, std::unique_lock<std::mutex>& lock) {
  ChainLocked(a);
  ++in_flight_;
  bool released = false;
  absl::StatusOr<int64_t> rev = store_.TxnQueued(a.ops, [&] {
    lock.unlock();
    released = true;
  });
  if (released) lock.lock();
  --in_flight_;
  if (rev.ok()) {
    AppliedLocked(a, *rev);
  } else {
    a.error = rev.status();
    failed_.push_back(&a);
    resetting_ = true;
  }
  if (resetting_ && in_flight_ == 0) ResetLocked();
  chain_cv_.notify_all();
  chain_cv_.wait(lock, [&] { return a.decided; });
  return a.error;
}

void AuditLog::AppliedLocked(Attempt& a, int64_t revision) {
  const AuditRecord& last = a.records.back();
  if (last.seq > durable_.seq) durable_ = Head{last.seq, last.hash};
  for (Pending* p : a.pendings) {
    p->result = revision;
    p->done = true;
  }
  if (observed_) {
    std::lock_guard<std::mutex> committed_lock(committed_mu_);
    for (AuditRecord& r : a.records) committed_.emplace(r.seq, std::move(r));
  }
  a.error = absl::OkStatus();
  a.decided = true;
}

// Nothing in flight, at least one attempt failed: back to the last record committed.
void AuditLog::ResetLocked() {
  std::sort(failed_.begin(), failed_.end(), [](const Attempt* x, const Attempt* y) {
    return x->records.front().seq < y->records.front().seq;
  });
  head_ = durable_;
  // An error after the commit (a lost answer): the store has the attempt's last record.
  for (Attempt* a : failed_) {
    if (a->records.front().seq != head_.seq + 1) continue;
    absl::StatusOr<store::KeyValue> last = store_.Get(RecordKey(a->records.back().seq));
    if (!last.ok() || last->value != a->ops.back().value) continue;
    AppliedLocked(*a, last->mod_revision);
    head_ = durable_;
  }
  if (broken_.ok() && store_.Get(RecordKey(head_.seq + 1)).ok()) {
    broken_ = absl::FailedPreconditionError(
        "audit log: another writer appended to the chain; reopen the log");
  }
  DecideFailedLocked();
  failed_.clear();
  resetting_ = false;
}

// What becomes of each failed attempt (in seq order) once head_ is the truth: its buffered
// records go back to the buffer; callers are queued again, ahead of the others.
void AuditLog::DecideFailedLocked() {
  std::vector<AuditRecord> buffered;
  std::vector<Pending*> again;
  for (Attempt* a : failed_) {
    if (a->decided) continue;
    buffered.insert(buffered.end(), a->records.begin(), a->records.begin() + a->buffered);
    // Its first record came right after a committed one: it failed on its own.
    const bool own = a->records.front().seq <= head_.seq + 1;
    a->retry = broken_.ok() && !own;
    for (Pending* p : a->pendings) {
      if (!broken_.ok() || (own && a->pendings.size() == 1)) {
        p->result = broken_.ok() ? a->error : broken_;
        p->done = true;
        continue;
      }
      p->alone = p->alone || own;  // a shared transaction failed on one of its mutations
      again.push_back(p);
    }
    if (!broken_.ok()) a->error = broken_;
    a->decided = true;
  }
  PutBackBuffer(std::move(buffered));
  std::lock_guard<std::mutex> queue_lock(queue_mu_);
  queue_.insert(queue_.begin(), again.begin(), again.end());
}

void AuditLog::DrainLocked(std::unique_lock<std::mutex>& lock) {
  ++draining_;
  chain_cv_.wait(lock, [&] { return in_flight_ == 0 && !resetting_; });
}

void AuditLog::EndDrainLocked() {
  --draining_;
  chain_cv_.notify_all();
}

std::vector<AuditRecord> AuditLog::TakeBuffer() {
  std::lock_guard<std::mutex> lock(buffer_mu_);
  std::vector<AuditRecord> out(std::make_move_iterator(buffer_.begin()),
                               std::make_move_iterator(buffer_.end()));
  buffer_.clear();
  return out;
}

void AuditLog::PutBackBuffer(std::vector<AuditRecord> records) {
  std::lock_guard<std::mutex> lock(buffer_mu_);
  buffer_.insert(buffer_.begin(), std::make_move_iterator(records.begin()),
                 std::make_move_iterator(records.end()));
}

absl::StatusOr<int64_t> AuditLog::CommitWith(AuditRecord record, std::vector<Op> ops) {
  for (const Op& op : ops) {
    if (op.key.starts_with(options_.prefix)) {
      return absl::InvalidArgumentError(Cat("audit log: ", op.key, " is the audit log's key"));
    }
  }
  if (record.stage_ms == 0) record.stage_ms = clock_.NowMillis();
  Pending mine{std::move(record), std::move(ops)};
  {
    std::lock_guard<std::mutex> queue_lock(queue_mu_);
    queue_.push_back(&mine);
  }
  std::unique_lock<std::mutex> lock(commit_mu_);
  while (!mine.done) {
    if (resetting_ || draining_ > 0) {
      chain_cv_.wait(lock);
      continue;
    }
    if (!broken_.ok()) {
      FailQueuedLocked(broken_);
      continue;
    }
    Attempt a;
    // Nothing queued: this caller's mutation is in another's attempt; wait for it to end.
    if (!TakeQueuedLocked(a)) {
      chain_cv_.wait(lock);
      continue;
    }
    RunAttemptLocked(a, lock).IgnoreError();  // each caller's answer is in its Pending
  }
  lock.unlock();
  // Refused: the buffered records that were in its transaction are committed without it.
  if (!mine.result.ok()) Flush().IgnoreError();
  NotifyObserver();
  return std::move(mine.result);
}

void AuditLog::FailQueuedLocked(const absl::Status& why) {
  std::lock_guard<std::mutex> queue_lock(queue_mu_);
  for (Pending* p : queue_) {
    p->result = why;
    p->done = true;
  }
  queue_.clear();
  chain_cv_.notify_all();
}

absl::Status AuditLog::Record(AuditRecord record) {
  int64_t now = clock_.NowMillis();
  if (record.stage_ms == 0) record.stage_ms = now;
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(buffer_mu_);
    if (buffer_.size() >= static_cast<size_t>(options_.max_buffered)) {
      ++dropped_;
      return absl::UnavailableError("audit log: the buffer is full (the store is failing)");
    }
    if (buffer_.empty()) oldest_buffered_ms_ = now;
    buffer_.push_back(std::move(record));
    full = buffer_.size() >= static_cast<size_t>(options_.max_batch);
  }
  return full ? Flush() : absl::OkStatus();
}

absl::Status AuditLog::Flush() {
  absl::Status status;
  {
    std::unique_lock<std::mutex> lock(commit_mu_);
    for (;;) {
      chain_cv_.wait(lock, [&] { return !resetting_ && draining_ == 0; });
      if (!broken_.ok()) return broken_;
      Attempt a;
      a.records = TakeBuffer();
      a.buffered = a.records.size();
      if (a.records.empty()) return absl::OkStatus();
      status = RunAttemptLocked(a, lock);
      if (!a.retry) break;
    }
  }
  NotifyObserver();
  return status;
}

void AuditLog::SetObserver(std::function<void(const AuditRecord&)> observer) {
  std::lock_guard<std::mutex> observer_lock(observer_mu_);
  std::lock_guard<std::mutex> lock(commit_mu_);
  observer_ = std::move(observer);
  observed_ = static_cast<bool>(observer_);
  std::lock_guard<std::mutex> committed_lock(committed_mu_);
  committed_.clear();
  shown_seq_ = durable_.seq;
}

// Shows the committed records to the observer, in seq order without gaps (a record committed
// right after another may get here first), one caller at a time (observer_mu_).
void AuditLog::NotifyObserver() {
  std::lock_guard<std::mutex> observer_lock(observer_mu_);
  std::vector<AuditRecord> records;
  {
    std::lock_guard<std::mutex> lock(committed_mu_);
    for (auto it = committed_.begin(); it != committed_.end() && it->first <= shown_seq_ + 1;) {
      if (it->first == shown_seq_ + 1) {
        records.push_back(std::move(it->second));
        ++shown_seq_;
      }
      it = committed_.erase(it);
    }
  }
  if (!observer_) return;
  for (const AuditRecord& r : records) observer_(r);
}

absl::StatusOr<std::optional<AuditDigest>> AuditLog::SignDigest() {
  if (absl::Status s = Flush(); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(commit_mu_);
  DrainLocked(lock);
  absl::Cleanup end = [&] { EndDrainLocked(); };
  if (!broken_.ok()) return broken_;
  int64_t now = clock_.NowMillis();
  last_sign_ms_ = now;
  if (head_.seq == 0 || head_.seq <= signed_seq_) return std::optional<AuditDigest>();
  absl::StatusOr<AuditDigest> d = server::SignDigest(head_.seq, head_.hash, now, key_);
  if (!d.ok()) return d.status();
  std::string text = EncodeDigest(*d);
  absl::StatusOr<int64_t> rev = store_.Txn({Op{Op::Kind::kPut, DigestKey(d->seq), text, 0}});
  if (!rev.ok()) {
    absl::StatusOr<store::KeyValue> stored = store_.Get(DigestKey(d->seq));
    if (!stored.ok() || stored->value != text) return rev.status();  // else applied after all
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

int64_t AuditLog::head_seq() const {
  std::lock_guard<std::mutex> lock(commit_mu_);
  return durable_.seq;
}

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
  std::unique_lock<std::mutex> lock(commit_mu_);
  DrainLocked(lock);
  absl::Cleanup end = [&] { EndDrainLocked(); };
  if (!broken_.ok()) return broken_;
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
