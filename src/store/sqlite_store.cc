#include "store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/synchronization/mutex.h"
#include "core/text.h"

namespace gpucloud::store {
namespace {

constexpr int kSchemaVersion = 1;

// The status for a failed SQLite call. Conditions that pass or that say nothing about the file
// (busy, locked, out of memory or disk space, interrupted, a limit or a misuse) are Internal;
// everything else (a malformed page, a file that is not a database, an I/O error reading it) is
// DataLoss. Either way it is an error, never "no more rows".
absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string why = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (why == "not an error") why = sqlite3_errstr(rc);  // the message was of a later call
  std::string message = Cat("sqlite (", what, "): ", why);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_FULL:
    case SQLITE_INTERRUPT:
    case SQLITE_ABORT:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
    case SQLITE_MISUSE:
    case SQLITE_CONSTRAINT:
      return absl::InternalError(message);
    default:
      return absl::DataLossError(message);
  }
}

// A precondition failure of Txn (the caller's answer), as opposed to a storage error.
bool IsPreconditionFailure(const absl::Status& s) {
  return absl::IsAlreadyExists(s) || absl::IsNotFound(s) || absl::IsAborted(s) ||
         absl::IsFailedPrecondition(s);  // a kCheck's
}

// One SQLite connection and the statements prepared on it, kept for reuse: preparing (parsing
// and planning the SQL) costs more than running most of the store's statements. Statements are
// cached by their SQL text (not its address: a string built at run time may reuse the address
// of another, and two equal literals share one statement). Owns the connection: finalizes the
// statements and closes it on destruction. Not thread-safe: used by whoever owns the
// connection (SqliteStore's read_mu_ or writing_).
class Connection {
 public:
  explicit Connection(sqlite3* db) : db_(db) {}
  ~Connection() {
    for (auto& [sql, entry] : cache_) sqlite3_finalize(entry.stmt);
    sqlite3_close(db_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }

  // The statement for `sql`, ready to bind and step; a cached one unless it is in use (a
  // statement run inside another's loop), then one of its own that Release finalizes.
  int Acquire(const char* sql, sqlite3_stmt** out) {
    auto it = cache_.find(std::string_view(sql));
    if (it == cache_.end()) it = cache_.emplace(sql, Entry{}).first;
    Entry& entry = it->second;
    if (entry.stmt != nullptr && !entry.in_use) {
      entry.in_use = true;
      *out = entry.stmt;
      return SQLITE_OK;
    }
    const bool cache = entry.stmt == nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, cache ? SQLITE_PREPARE_PERSISTENT : 0, out, nullptr);
    if (rc == SQLITE_OK && cache) entry = {*out, true};
    return rc;
  }
  // Gives back what Acquire returned: a cached statement is reset (its read lock let go, its
  // bound values freed) for the next caller.
  void Release(const char* sql, sqlite3_stmt* stmt) {
    auto it = cache_.find(std::string_view(sql));
    if (it == cache_.end() || it->second.stmt != stmt) {
      sqlite3_finalize(stmt);
      return;
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    it->second.in_use = false;
  }

 private:
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  sqlite3* const db_;
  std::unordered_map<std::string, Entry, TextHash, std::equal_to<>> cache_;
};

// A prepared statement of `conn` (Connection::Acquire), given back on destruction. `what` names
// the operation in errors. The first failure (to prepare, bind or step) sticks: every later
// Next() or Run() returns it.
class Stmt {
 public:
  Stmt(Connection& conn, std::string_view what, const char* sql)
      : conn_(conn), db_(conn.db()), what_(what), sql_(sql) {
    int rc = conn_.Acquire(sql, &stmt_);
    if (rc != SQLITE_OK) status_ = SqliteError(db_, rc, what_);
  }
  ~Stmt() {
    if (stmt_ != nullptr) conn_.Release(sql_, stmt_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& Bind(int i, const std::string& s) {
    if (status_.ok()) {
      Check(sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    }
    return *this;
  }
  Stmt& BindText(int i, const std::string& s) {
    if (status_.ok()) {
      Check(sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    }
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    if (status_.ok()) Check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  // Steps to the next row: true when one is ready, false after the last one. Any other result
  // of sqlite3_step is an error, so a corrupt page is never read as the end of the data.
  absl::StatusOr<bool> Next() {
    if (!status_.ok()) return status_;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    status_ = SqliteError(db_, rc, what_);
    return status_;
  }
  // Runs a statement that returns no rows (a write).
  absl::Status Run() {
    absl::StatusOr<bool> row = Next();
    if (!row.ok()) return row.status();
    return *row ? absl::InternalError(Cat("sqlite (", what_, "): unexpected row"))
                : absl::OkStatus();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK) status_ = SqliteError(db_, rc, what_);
  }

  Connection& conn_;
  sqlite3* db_;
  std::string_view what_;
  const char* sql_;
  sqlite3_stmt* stmt_ = nullptr;
  absl::Status status_;
};

// Runs one statement that returns no rows (BEGIN, COMMIT, a savepoint).
absl::Status Exec(Connection& conn, const char* sql, std::string_view what) {
  return Stmt(conn, what, sql).Run();
}

// Ends the open transaction of `db`, if any (SQLite rolls some failures back by itself).
void Rollback(Connection& conn) {
  if (!sqlite3_get_autocommit(conn.db())) Exec(conn, "ROLLBACK", "roll back").IgnoreError();
}

// A read transaction: the statements run while it lives read one snapshot. It writes nothing,
// so it ends with a rollback.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Connection& conn)
      : conn_(conn), status_(Exec(conn, "BEGIN", "begin read")) {}
  ~ReadSnapshot() { Rollback(conn_); }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  Connection& conn_;
  absl::Status status_;
};

absl::StatusOr<int64_t> Meta(Connection& db, const char* k) {
  Stmt s(db, "read meta", "SELECT v FROM meta WHERE k = ?1");
  absl::StatusOr<bool> row = s.BindText(1, std::string(k)).Next();
  if (!row.ok()) return row.status();
  if (!*row) return absl::DataLossError(Cat("store meta entry '", k, "' is missing"));
  return s.Int(0);
}

absl::Status SetMeta(Connection& db, const char* k, int64_t v) {
  Stmt s(db, "write meta", "UPDATE meta SET v = ?1 WHERE k = ?2");
  return s.Bind(1, v).BindText(2, std::string(k)).Run();
}

// The object at `key`; nullopt when there is none.
absl::StatusOr<std::optional<KeyValue>> Read(Connection& db, const std::string& key) {
  Stmt s(db, "read object",
         "SELECT value, create_rev, mod_rev, version FROM objects WHERE key = ?1");
  absl::StatusOr<bool> row = s.Bind(1, key).Next();
  if (!row.ok()) return row.status();
  if (!*row) return std::nullopt;
  return KeyValue{key, s.Blob(0), s.Int(1), s.Int(2), s.Int(3)};
}

// PRAGMA quick_check: the b-trees' structure, every page read once. DataLoss with SQLite's
// first complaint when the file fails it.
absl::Status QuickCheck(Connection& db) {
  Stmt s(db, "integrity check", "PRAGMA quick_check(1)");
  absl::StatusOr<bool> row = s.Next();
  if (!row.ok()) return row.status();
  std::string first = *row ? s.Blob(0) : "no result";
  if (first != "ok") return absl::DataLossError(Cat("integrity check failed: ", first));
  return absl::OkStatus();
}

// Creates the database file 0600 if it is missing, and restricts an existing one and the WAL
// and shared-memory files an earlier run left to 0600: job environments hold secrets. SQLite
// creates a missing -wal or -shm file with the database file's mode.
absl::Status RestrictFileModes(const std::string& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(Cat("cannot open store ", path, ": ", strerror(errno)));
  int rc = ::fchmod(fd, 0600);
  int error = errno;
  ::close(fd);
  if (rc != 0) {
    return absl::UnavailableError(Cat("cannot make store ", path, " 0600: ", strerror(error)));
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    std::string file = path + suffix;
    if (::chmod(file.c_str(), 0600) != 0 && errno != ENOENT) {
      return absl::UnavailableError(Cat("cannot make ", file, " 0600: ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// Two connections to one WAL database: writes go through `writer_` in batches (group commit:
// the transactions that arrive while one batch is being written are written together, each
// with its own revision, under one fsync); reads use `reader_`, which sees committed data only.
// Whoever holds `writing_` owns `writer_`: a batch of transactions or a batch of compaction.
class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* writer, sqlite3* reader, const SqliteStoreOptions& options)
      : writer_(writer), reader_(reader), options_(options) {}

  absl::Status Init() {
    if (options_.quick_check) {
      if (absl::Status s = QuickCheck(writer_); !s.ok()) return s;
    }
    const char* setup =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=FULL;"
        "PRAGMA journal_size_limit=67108864;"  // a reset WAL file is cut back to 64 MiB
        "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY, value BLOB NOT NULL,"
        "  create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL, version INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS changes(rev INTEGER NOT NULL, key BLOB NOT NULL,"
        "  kind INTEGER NOT NULL, value BLOB NOT NULL, create_rev INTEGER NOT NULL,"
        "  version INTEGER NOT NULL, PRIMARY KEY(rev, key));"
        "INSERT OR IGNORE INTO meta VALUES('schema', 1), ('revision', 0), ('compacted', 0);";
    char* err = nullptr;
    if (sqlite3_exec(writer_.db(), setup, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      return absl::DataLossError(Cat("not a usable gpucloud store: ", why));
    }
    absl::StatusOr<int64_t> schema = Meta(writer_, "schema");
    if (!schema.ok()) return schema.status();
    if (*schema != kSchemaVersion) {
      return absl::DataLossError(
          Cat("store schema ", *schema, ", this build reads ", kSchemaVersion));
    }
    absl::StatusOr<int64_t> revision = Meta(writer_, "revision");
    absl::StatusOr<int64_t> compacted = Meta(writer_, "compacted");
    if (!revision.ok()) return revision.status();
    if (!compacted.ok()) return compacted.status();
    revision_ = *revision;
    compacted_ = *compacted;
    return absl::OkStatus();
  }

  absl::StatusOr<KeyValue> Get(const std::string& key) override {
    absl::MutexLock lock(&read_mu_);
    absl::StatusOr<std::optional<KeyValue>> kv = Read(reader_, key);
    if (!kv.ok()) return kv.status();
    if (!*kv) return absl::NotFoundError(Cat(key, " not found"));
    return **kv;
  }

  absl::StatusOr<ListResult> List(const std::string& prefix) override {
    absl::MutexLock lock(&read_mu_);
    // One read transaction: the items and the revision come from the same snapshot.
    ReadSnapshot snapshot(reader_);
    if (!snapshot.status().ok()) return snapshot.status();
    return ReadRows(prefix, "", -1);
  }

  // The page's rows only, then the keys after it counted on the index (values unread), in the
  // same read transaction.
  absl::StatusOr<ListResult> ListPage(const std::string& prefix, const std::string& after_key,
                                      int64_t limit, int64_t* remaining) override {
    if (limit <= 0) return absl::InvalidArgumentError("ListPage: limit must be positive");
    absl::MutexLock lock(&read_mu_);
    ReadSnapshot snapshot(reader_);
    if (!snapshot.status().ok()) return snapshot.status();
    absl::StatusOr<ListResult> out = ReadRows(prefix, after_key, limit);
    if (!out.ok()) return out.status();
    *remaining = 0;
    if (out->items.empty()) return out;  // nothing after after_key: nothing follows either
    absl::StatusOr<int64_t> after =
        CountIn(out->items.back().key, /*exclusive=*/true, PrefixEnd(prefix));
    if (!after.ok()) return after.status();
    *remaining = *after;
    return out;
  }

  // The store's revision and the rows under `prefix` after `after_key` ("": from the first),
  // at most `limit` of them (-1: all), in key order. With read_mu_ held, in a ReadSnapshot.
  absl::StatusOr<ListResult> ReadRows(const std::string& prefix, const std::string& after_key,
                                      int64_t limit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_) {
    ListResult out;
    absl::StatusOr<int64_t> revision = Meta(reader_, "revision");
    if (!revision.ok()) return revision.status();
    out.revision = *revision;
    // key > after_key when there is one (a key of the list), key >= prefix otherwise.
    Stmt s(reader_, "list",
           "SELECT key, value, create_rev, mod_rev, version FROM objects WHERE key >= ?1 "
           "AND key <> ?2 ORDER BY key LIMIT ?3");
    s.Bind(1, after_key.empty() || after_key < prefix ? prefix : after_key);
    s.Bind(2, after_key);
    s.Bind(3, limit);
    for (;;) {
      absl::StatusOr<bool> row = s.Next();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::string key = s.Blob(0);
      if (key.compare(0, prefix.size(), prefix) != 0) break;
      out.items.push_back({std::move(key), s.Blob(1), s.Int(2), s.Int(3), s.Int(4)});
    }
    return out;
  }

  absl::StatusOr<int64_t> Count(const std::string& prefix) override {
    if (prefix.empty()) return absl::InvalidArgumentError("Count: empty prefix");
    absl::MutexLock lock(&read_mu_);
    return CountIn(prefix, false, PrefixEnd(prefix));
  }

  // Keys in [prefix, prefix with its last byte + 1): "" when there is no such bound.
  static std::string PrefixEnd(const std::string& prefix) {
    std::string end = prefix;
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
    if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    return end;
  }

  // How many keys are in [from, end) ("" end: no bound), or (from, end) when `exclusive`: an
  // index range, values unread. With read_mu_ held.
  absl::StatusOr<int64_t> CountIn(const std::string& from, bool exclusive, const std::string& end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_) {
    const char* sql =
        exclusive ? (end.empty() ? "SELECT count(*) FROM objects WHERE key > ?1"
                                 : "SELECT count(*) FROM objects WHERE key > ?1 "
                                   "AND key < ?2")
                  : (end.empty() ? "SELECT count(*) FROM objects WHERE key >= ?1"
                                 : "SELECT count(*) FROM objects WHERE key >= ?1 AND key < ?2");
    Stmt s(reader_, "count", sql);
    s.Bind(1, from);
    if (!end.empty()) s.Bind(2, end);
    absl::StatusOr<bool> row = s.Next();
    if (!row.ok()) return row.status();
    return *row ? s.Int(0) : 0;
  }

  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    if (absl::Status s = ValidateTxnOps(ops); !s.ok()) return s;
    Pending me{&ops};
    return Commit(me);
  }

  bool HasTxnTails() const override { return true; }

  absl::StatusOr<int64_t> TxnWithTail(const std::vector<Op>& ops, TxnTail& tail) override {
    if (!ops.empty()) {
      if (absl::Status s = ValidateTxnOps(ops); !s.ok()) return s;
    }
    Pending me{&ops, &tail};
    return Commit(me);
  }

  absl::StatusOr<std::vector<Event>> Changes(const std::string& prefix, int64_t after,
                                             int limit) override {
    absl::MutexLock lock(&read_mu_);
    ReadSnapshot snapshot(reader_);
    if (!snapshot.status().ok()) return snapshot.status();
    absl::StatusOr<int64_t> compacted = Meta(reader_, "compacted");
    if (!compacted.ok()) return compacted.status();
    if (after < *compacted) {
      return absl::OutOfRangeError(Cat("revision ", after, " is compacted (the oldest kept is ",
                                       *compacted + 1, "); list again"));
    }
    std::vector<Event> out;
    Stmt s(reader_, "read changes",
           "SELECT rev, key, kind, value, create_rev, version FROM changes WHERE rev > ?1 "
           "ORDER BY rev, key");
    s.Bind(1, after);
    for (;;) {
      absl::StatusOr<bool> row = s.Next();
      if (!row.ok()) return row.status();
      if (!*row) break;
      // At the limit, only the rest of the last revision is still read (pages hold whole ones).
      const int64_t rev = s.Int(0);
      if (static_cast<int>(out.size()) >= limit && rev != out.back().revision) break;
      std::string key = s.Blob(1);
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      Event e;
      e.revision = rev;
      e.kind = s.Int(2) == 0 ? Event::Kind::kPut : Event::Kind::kDelete;
      e.kv = {key, s.Blob(3), s.Int(4), e.revision, s.Int(5)};
      out.push_back(std::move(e));
    }
    return out;
  }

  absl::Status Compact(int64_t revision) override {
    {
      absl::MutexLock lock(&mu_);
      if (revision > revision_) {
        return absl::InvalidArgumentError(
            Cat("cannot compact to ", revision, ", beyond the current revision ", revision_));
      }
      if (revision <= compacted_) return absl::OkStatus();
    }
    int64_t txn_batches_seen = -1;
    while (TakeWriterForCompaction(revision, txn_batches_seen)) {
      absl::StatusOr<int64_t> upto = CompactBatch(revision);
      ReleaseWriterAfterCompaction(upto.ok() ? *upto : 0, txn_batches_seen);
      if (!upto.ok()) return upto.status();
    }
    return CheckpointWal();
  }

  int64_t CompactedRevision() override {
    absl::MutexLock lock(&mu_);
    return compacted_;
  }

  int64_t Revision() override {
    absl::MutexLock lock(&mu_);
    return revision_;
  }

  bool WaitForChange(int64_t after, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    absl::Time deadline = absl::Now() + timeout;
    while (revision_ <= after) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return revision_ > after;
    }
    return true;
  }

 private:
  struct Pending {
    const std::vector<Op>* ops;
    TxnTail* tail = nullptr;  // TxnWithTail's
    absl::StatusOr<int64_t> result = absl::UnknownError("not written");
    bool done = false;
    bool tail_made = false;  // Make was called and Settled not yet
    absl::CondVar cv;        // its caller waits on it (with mu_)
  };

  // A leader writes up to this many batches in a row while callers queue behind it, instead
  // of handing over after each: the next one in line has to be woken, and on a busy machine
  // that took longer than applying a batch. Its own caller waits for them.
  static constexpr int kLeaderRounds = 4;

  // Queues `me` for the next batch and returns its result once written (group commit: the
  // first caller in line, once no batch is being written, writes everything queued, then what
  // queued meanwhile, up to kLeaderRounds batches, unless compaction waits). Each caller
  // sleeps on its own condition variable: a leader wakes the callers it wrote, then the next
  // one in line only, not every waiter at every batch.
  absl::StatusOr<int64_t> Commit(Pending& me) {
    std::vector<Pending*> batch;
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(&me);
      while (!me.done && (writing_ || queue_.front() != &me)) me.cv.Wait(&mu_);
      if (me.done) return me.result;
      writing_ = true;  // this caller writes everything queued so far
      batch.swap(queue_);
    }
    for (int round = 1;; ++round) {
      WriteBatch(batch);
      absl::MutexLock lock(&mu_);
      for (Pending* p : batch) {
        if (p->result.ok()) revision_ = std::max(revision_, *p->result);
        p->done = true;
        if (p != &me) p->cv.Signal();
      }
      ++txn_batches_;
      batch.clear();
      if (round >= kLeaderRounds || queue_.empty() || compaction_waiting_ > 0) {
        ReleaseWriterLocked();
        return me.result;
      }
      changed_.SignalAll();  // watchers see each batch
      batch.swap(queue_);    // still the writer
    }
  }

  // Gives `writer_` up: the first caller in line leads the next batch, and watchers and
  // compaction (on changed_) look again.
  void ReleaseWriterLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = false;
    if (!queue_.empty()) queue_.front()->cv.Signal();
    changed_.SignalAll();
  }

  // Writes `batch` in one SQLite transaction, each caller's transaction in a savepoint (so a
  // failed precondition undoes only that one) with the next revision. Sets every result; on a
  // storage error or a failed commit, every transaction of the batch fails and nothing is
  // written.
  void WriteBatch(const std::vector<Pending*>& batch) {
    int64_t rev;
    {
      absl::MutexLock lock(&mu_);
      rev = revision_;
    }
    absl::Status s = Exec(writer_, "BEGIN IMMEDIATE", "begin write");
    for (size_t i = 0; s.ok() && i < batch.size(); ++i) s = ApplyInSavepoint(*batch[i], rev);
    if (s.ok()) s = SetMeta(writer_, "revision", rev);
    if (s.ok()) s = Exec(writer_, "COMMIT", "commit");
    if (!s.ok()) {
      Rollback(writer_);
      for (Pending* p : batch) p->result = s;
    }
    // Committed with synchronous=FULL: on disk, so the callers may acknowledge.
    if (s.ok()) {
      for (Pending* p : batch) SettleTail(*p, s);
    } else {
      for (auto p = batch.rbegin(); p != batch.rend(); ++p) SettleTail(**p, s);
    }
  }

  static void SettleTail(Pending& p, const absl::Status& s) {
    if (!p.tail_made) return;
    p.tail_made = false;
    p.tail->Settled(s);
  }

  // Applies one caller's transaction as revision `rev` + 1 (and then advances `rev`), or, when
  // a precondition fails, undoes it alone. Returns a storage error, which fails the batch.
  absl::Status ApplyInSavepoint(Pending& p, int64_t& rev) {
    if (absl::Status s = Exec(writer_, "SAVEPOINT txn", "savepoint"); !s.ok()) return s;
    p.result = Apply(*p.ops, rev + 1);
    bool writes = !p.ops->empty();
    bool alone = !p.result.ok() && IsPreconditionFailure(p.result.status());
    if (p.result.ok() && p.tail != nullptr) {
      absl::StatusOr<std::vector<Op>> tail = p.tail->Make(rev + 1);
      p.tail_made = true;
      if (!tail.ok()) {
        p.result = tail.status();
        alone = true;  // the tail's refusal fails this transaction, not the batch
      } else {
        writes = writes || !tail->empty();
        p.result = Apply(*tail, rev + 1);
        alone = !p.result.ok() && IsPreconditionFailure(p.result.status());
      }
    }
    if (p.result.ok()) {
      if (writes) {
        ++rev;
      } else {
        p.result = rev;  // wrote nothing: no revision of its own
      }
      return Exec(writer_, "RELEASE txn", "release savepoint");
    }
    if (!alone) return p.result.status();  // a storage error: the batch fails
    SettleTail(p, p.result.status());
    absl::Status s = Exec(writer_, "ROLLBACK TO txn", "roll back savepoint");
    return s.ok() ? Exec(writer_, "RELEASE txn", "release savepoint") : s;
  }

  // One transaction inside the batch: preconditions against what the batch wrote so far, then
  // the writes.
  absl::StatusOr<int64_t> Apply(const std::vector<Op>& ops, int64_t rev) {
    std::vector<std::optional<KeyValue>> current;
    for (const Op& op : ops) {
      absl::StatusOr<std::optional<KeyValue>> kv = Read(writer_, op.key);
      if (!kv.ok()) return kv.status();
      if (absl::Status s = CheckPrecondition(op, *kv); !s.ok()) return s;
      current.push_back(std::move(*kv));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (absl::Status s = Write(ops[i], current[i], rev); !s.ok()) return s;
    }
    return rev;
  }

  static absl::Status CheckPrecondition(const Op& op, const std::optional<KeyValue>& kv) {
    if (op.kind == Op::Kind::kCheck) return CheckFence(op, kv);
    if (op.expect_mod_revision) {
      int64_t want = *op.expect_mod_revision;
      if (want == 0 && kv) return absl::AlreadyExistsError(Cat(op.key, " already exists"));
      if (want > 0 && !kv) return absl::NotFoundError(Cat(op.key, " not found"));
      if (want > 0 && kv->mod_revision != want) {
        return absl::AbortedError(
            Cat(op.key, " was changed: it is at revision ", kv->mod_revision, ", not ", want));
      }
    }
    if (op.kind == Op::Kind::kDelete && !kv) return absl::NotFoundError(Cat(op.key, " not found"));
    return absl::OkStatus();
  }

  // A kCheck: the key exists at exactly its expect_mod_revision (ValidateTxnOps made it > 0).
  static absl::Status CheckFence(const Op& op, const std::optional<KeyValue>& kv) {
    const int64_t want = *op.expect_mod_revision;
    if (!kv) return absl::FailedPreconditionError(Cat("check on ", op.key, ": it is absent"));
    if (kv->mod_revision != want) {
      return absl::FailedPreconditionError(
          Cat("check on ", op.key, ": it is at revision ", kv->mod_revision, ", not ", want));
    }
    return absl::OkStatus();
  }

  // Writes `op` (whose key holds `kv`) as revision `rev`, and logs it. A kCheck writes nothing.
  absl::Status Write(const Op& op, const std::optional<KeyValue>& kv, int64_t rev) {
    if (op.kind == Op::Kind::kCheck) return absl::OkStatus();
    if (op.kind == Op::Kind::kPut) {
      int64_t create = kv ? kv->create_revision : rev;
      int64_t version = kv ? kv->version + 1 : 1;
      Stmt put(writer_, "put", "INSERT OR REPLACE INTO objects VALUES(?1, ?2, ?3, ?4, ?5)");
      absl::Status s =
          put.Bind(1, op.key).Bind(2, op.value).Bind(3, create).Bind(4, rev).Bind(5, version).Run();
      if (!s.ok() || op.unlogged) return s;
      return LogChange(rev, op.key, 0, op.value, create, version);
    }
    Stmt del(writer_, "delete", "DELETE FROM objects WHERE key = ?1");
    absl::Status s = del.Bind(1, op.key).Run();
    return s.ok() ? LogChange(rev, op.key, 1, kv->value, kv->create_revision, kv->version) : s;
  }

  absl::Status LogChange(int64_t rev, const std::string& key, int kind, const std::string& value,
                         int64_t create, int64_t version) {
    Stmt s(writer_, "log change", "INSERT INTO changes VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    return s.Bind(1, rev)
        .Bind(2, key)
        .Bind(3, int64_t{kind})
        .Bind(4, value)
        .Bind(5, create)
        .Bind(6, version)
        .Run();
  }

  // Takes the writer connection for one compaction batch, once no batch is being written and,
  // when transactions are queued, once a batch of them was written after our previous batch
  // (compaction and writes take turns: neither starves the other). False, taking nothing, when
  // the log is compacted up to `revision` already.
  bool TakeWriterForCompaction(int64_t revision, int64_t txn_batches_seen) {
    absl::MutexLock lock(&mu_);
    ++compaction_waiting_;
    while (writing_ || (!queue_.empty() && txn_batches_ == txn_batches_seen)) {
      changed_.Wait(&mu_);
    }
    --compaction_waiting_;
    if (revision <= compacted_) return false;
    writing_ = true;
    return true;
  }

  void ReleaseWriterAfterCompaction(int64_t compacted, int64_t& txn_batches_seen) {
    absl::MutexLock lock(&mu_);
    compacted_ = std::max(compacted_, compacted);
    txn_batches_seen = txn_batches_;
    ReleaseWriterLocked();
  }

  // One durable transaction that drops about `compaction_batch_rows` of the oldest change rows
  // at or below `revision`, and records how far the log is compacted. A batch ends at a
  // revision boundary (a revision's rows go together), so the log and `compacted` agree after
  // every batch: a reader in between sees no revision in part. Returns the new compaction
  // point.
  absl::StatusOr<int64_t> CompactBatch(int64_t revision) {
    absl::Status s = Exec(writer_, "BEGIN IMMEDIATE", "begin compaction");
    int64_t upto = revision;
    if (s.ok()) {
      Stmt last(writer_, "find compaction batch",
                "SELECT rev FROM changes WHERE rev <= ?1 ORDER BY rev LIMIT 1 OFFSET ?2");
      absl::StatusOr<bool> row =
          last.Bind(1, revision).Bind(2, int64_t{options_.compaction_batch_rows - 1}).Next();
      if (row.ok() && *row) upto = last.Int(0);
      s = row.status();
    }
    if (s.ok()) {
      Stmt del(writer_, "compact", "DELETE FROM changes WHERE rev <= ?1");
      s = del.Bind(1, upto).Run();
    }
    if (s.ok()) s = SetMeta(writer_, "compacted", upto);
    if (s.ok()) s = Exec(writer_, "COMMIT", "commit compaction");
    if (!s.ok()) {
      Rollback(writer_);
      return s;
    }
    return upto;
  }

  // Copies the WAL into the database file and truncates it to nothing, holding the writer
  // connection and the reader (so no reader of ours pins an old snapshot). Another process
  // reading the file may keep the WAL from being truncated; the next compaction tries again.
  absl::Status CheckpointWal() {
    {
      absl::MutexLock lock(&mu_);
      ++compaction_waiting_;
      while (writing_) changed_.Wait(&mu_);
      --compaction_waiting_;
      writing_ = true;
    }
    absl::Status s;
    {
      absl::MutexLock read_lock(&read_mu_);
      Stmt checkpoint(writer_, "checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)");
      s = checkpoint.Next().status();
    }
    absl::MutexLock lock(&mu_);
    ReleaseWriterLocked();
    return s;
  }

  Connection writer_;
  Connection reader_;
  const SqliteStoreOptions options_;
  absl::Mutex read_mu_;  // serializes use of reader_
  absl::Mutex mu_;       // guards everything below
  absl::CondVar changed_;
  std::vector<Pending*> queue_;
  bool writing_ = false;        // someone owns writer_
  int compaction_waiting_ = 0;  // compaction or a checkpoint waits for writer_
  int64_t txn_batches_ = 0;     // batches of transactions written
  int64_t revision_ = 0;
  int64_t compacted_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                       const SqliteStoreOptions& options) {
  if (options.compaction_batch_rows < 1) {
    return absl::InvalidArgumentError("compaction_batch_rows must be at least 1");
  }
  if (absl::Status s = RestrictFileModes(path); !s.ok()) return s;
  sqlite3* dbs[2] = {nullptr, nullptr};
  for (sqlite3*& db : dbs) {
    int rc = sqlite3_open_v2(path.c_str(), &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
      std::string why = db ? sqlite3_errmsg(db) : "out of memory";
      sqlite3_close(dbs[0]);
      sqlite3_close(dbs[1]);
      return absl::UnavailableError(Cat("cannot open store ", path, ": ", why));
    }
    sqlite3_busy_timeout(db, 5000);
  }
  auto store = std::make_unique<SqliteStore>(dbs[0], dbs[1], options);
  if (absl::Status s = store->Init(); !s.ok()) {
    return absl::Status(s.code(), Cat(path, ": ", s.message()));
  }
  return store;
}

}  // namespace gpucloud::store
