#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <set>

#include "absl/synchronization/mutex.h"
#include "core/text.h"

namespace gpucloud::store {
namespace {

constexpr int kSchemaVersion = 1;

// A prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  Stmt& Bind(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindText(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(stmt_); }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }
  std::string Error() const { return sqlite3_errmsg(db_); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

bool Exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

absl::Status Failed(sqlite3* db, const std::string& what) {
  return absl::InternalError(Cat("sqlite (", what, "): ", sqlite3_errmsg(db)));
}

int64_t Meta(sqlite3* db, const char* k) {
  Stmt s(db, "SELECT v FROM meta WHERE k = ?1");
  if (!s.ok()) return -1;
  s.BindText(1, std::string(k));
  return s.Step() == SQLITE_ROW ? s.Int(0) : -1;
}

std::optional<KeyValue> Read(sqlite3* db, const std::string& key) {
  Stmt s(db, "SELECT value, create_rev, mod_rev, version FROM objects WHERE key = ?1");
  if (!s.ok()) return std::nullopt;
  s.Bind(1, key);
  if (s.Step() != SQLITE_ROW) return std::nullopt;
  return KeyValue{key, s.Blob(0), s.Int(1), s.Int(2), s.Int(3)};
}

// Two connections to one WAL database: writes go through `writer_` in batches (group commit:
// the transactions that arrive while one batch is being written are written together, each
// with its own revision, under one fsync); reads use `reader_`, which sees committed data only.
class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* writer, sqlite3* reader) : writer_(writer), reader_(reader) {}
  ~SqliteStore() override {
    sqlite3_close(reader_);
    sqlite3_close(writer_);
  }

  absl::Status Init() {
    const char* setup =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=FULL;"
        "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS objects(key BLOB PRIMARY KEY, value BLOB NOT NULL,"
        "  create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL, version INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS changes(rev INTEGER NOT NULL, key BLOB NOT NULL,"
        "  kind INTEGER NOT NULL, value BLOB NOT NULL, create_rev INTEGER NOT NULL,"
        "  version INTEGER NOT NULL, PRIMARY KEY(rev, key));"
        "INSERT OR IGNORE INTO meta VALUES('schema', 1), ('revision', 0), ('compacted', 0);";
    char* err = nullptr;
    if (sqlite3_exec(writer_, setup, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : "unknown error";
      sqlite3_free(err);
      return absl::DataLossError(Cat("not a usable gpucloud store: ", why));
    }
    if (Meta(writer_, "schema") != kSchemaVersion) {
      return absl::DataLossError(Cat("store schema ", Meta(writer_, "schema"), ", this build reads ",
                                     kSchemaVersion));
    }
    revision_ = Meta(writer_, "revision");
    compacted_ = Meta(writer_, "compacted");
    return absl::OkStatus();
  }

  absl::StatusOr<KeyValue> Get(const std::string& key) override {
    absl::MutexLock lock(&read_mu_);
    std::optional<KeyValue> kv = Read(reader_, key);
    if (!kv) return absl::NotFoundError(Cat(key, " not found"));
    return *kv;
  }

  absl::StatusOr<ListResult> List(const std::string& prefix) override {
    absl::MutexLock lock(&read_mu_);
    // One read transaction: the items and the revision come from the same snapshot.
    if (!Exec(reader_, "BEGIN")) return Failed(reader_, "begin");
    ListResult out;
    out.revision = Meta(reader_, "revision");
    Stmt s(reader_,
           "SELECT key, value, create_rev, mod_rev, version FROM objects WHERE key >= ?1 "
           "ORDER BY key");
    if (!s.ok()) {
      Exec(reader_, "COMMIT");
      return Failed(reader_, "list");
    }
    s.Bind(1, prefix);
    while (s.Step() == SQLITE_ROW) {
      std::string key = s.Blob(0);
      if (key.compare(0, prefix.size(), prefix) != 0) break;
      out.items.push_back({key, s.Blob(1), s.Int(2), s.Int(3), s.Int(4)});
    }
    Exec(reader_, "COMMIT");
    return out;
  }

  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    if (ops.empty()) return absl::InvalidArgumentError("empty transaction");
    std::set<std::string> keys;
    for (const Op& op : ops) {
      if (op.key.empty()) return absl::InvalidArgumentError("empty key");
      if (!keys.insert(op.key).second) {
        return absl::InvalidArgumentError(Cat("key ", op.key, " appears twice in a transaction"));
      }
    }
    Pending me{&ops};
    std::vector<Pending*> batch;
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(&me);
      while (!me.done && writing_) changed_.Wait(&mu_);
      if (me.done) return me.result;
      writing_ = true;  // this caller writes everything queued so far
      batch.swap(queue_);
    }
    WriteBatch(batch);
    {
      absl::MutexLock lock(&mu_);
      for (Pending* p : batch) {
        if (p->result.ok()) revision_ = std::max(revision_, *p->result);
        p->done = true;
      }
      writing_ = false;
      changed_.SignalAll();
    }
    return me.result;
  }

  absl::StatusOr<std::vector<Event>> Changes(const std::string& prefix, int64_t after,
                                             int limit) override {
    absl::MutexLock lock(&read_mu_);
    if (!Exec(reader_, "BEGIN")) return Failed(reader_, "begin");
    int64_t compacted = Meta(reader_, "compacted");
    if (after < compacted) {
      Exec(reader_, "COMMIT");
      return absl::OutOfRangeError(Cat("revision ", after, " is compacted (the oldest kept is ",
                                       compacted + 1, "); list again"));
    }
    std::vector<Event> out;
    {
      Stmt s(reader_,
             "SELECT rev, key, kind, value, create_rev, version FROM changes WHERE rev > ?1 "
             "ORDER BY rev, key");
      if (!s.ok()) {
        Exec(reader_, "COMMIT");
        return Failed(reader_, "changes");
      }
      s.Bind(1, after);
      while (static_cast<int>(out.size()) < limit && s.Step() == SQLITE_ROW) {
        std::string key = s.Blob(1);
        if (key.compare(0, prefix.size(), prefix) != 0) continue;
        Event e;
        e.revision = s.Int(0);
        e.kind = s.Int(2) == 0 ? Event::Kind::kPut : Event::Kind::kDelete;
        e.kv = {key, s.Blob(3), s.Int(4), e.revision, s.Int(5)};
        out.push_back(std::move(e));
      }
    }
    Exec(reader_, "COMMIT");
    return out;
  }

  absl::Status Compact(int64_t revision) override {
    absl::MutexLock lock(&mu_);
    while (writing_) changed_.Wait(&mu_);  // the writer connection is ours meanwhile
    if (revision > revision_) {
      return absl::InvalidArgumentError(
          Cat("cannot compact to ", revision, ", beyond the current revision ", revision_));
    }
    if (revision <= compacted_) return absl::OkStatus();
    if (!Exec(writer_, "BEGIN IMMEDIATE")) return Failed(writer_, "begin");
    Stmt del(writer_, "DELETE FROM changes WHERE rev <= ?1");
    Stmt meta(writer_, "UPDATE meta SET v = ?1 WHERE k = 'compacted'");
    if (!del.ok() || del.Bind(1, revision).Step() != SQLITE_DONE || !meta.ok() ||
        meta.Bind(1, revision).Step() != SQLITE_DONE || !Exec(writer_, "COMMIT")) {
      absl::Status s = Failed(writer_, "compact");
      Exec(writer_, "ROLLBACK");
      return s;
    }
    compacted_ = revision;
    return absl::OkStatus();
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
    absl::StatusOr<int64_t> result = absl::UnknownError("not written");
    bool done = false;
  };

  // Writes `batch` in one SQLite transaction, each caller's transaction in a savepoint (so a
  // failed precondition undoes only that one) with the next revision. Sets every result; on a
  // failed commit, every transaction of the batch fails and nothing is written.
  void WriteBatch(const std::vector<Pending*>& batch) {
    int64_t rev;
    {
      absl::MutexLock lock(&mu_);
      rev = revision_;
    }
    if (!Exec(writer_, "BEGIN IMMEDIATE")) {
      for (Pending* p : batch) p->result = Failed(writer_, "begin");
      return;
    }
    for (Pending* p : batch) {
      Exec(writer_, "SAVEPOINT txn");
      p->result = Apply(*p->ops, rev + 1);
      if (p->result.ok()) {
        ++rev;
        Exec(writer_, "RELEASE txn");
      } else {
        Exec(writer_, "ROLLBACK TO txn");
        Exec(writer_, "RELEASE txn");
      }
    }
    Stmt meta(writer_, "UPDATE meta SET v = ?1 WHERE k = 'revision'");
    if (!meta.ok() || meta.Bind(1, rev).Step() != SQLITE_DONE || !Exec(writer_, "COMMIT")) {
      absl::Status s = Failed(writer_, "commit");
      Exec(writer_, "ROLLBACK");
      for (Pending* p : batch) {
        if (p->result.ok()) p->result = s;
      }
    }
    // Committed with synchronous=FULL: on disk, so the callers may acknowledge.
  }

  // One transaction inside the batch: preconditions against what the batch wrote so far, then
  // the writes.
  absl::StatusOr<int64_t> Apply(const std::vector<Op>& ops, int64_t rev) {
    std::vector<std::optional<KeyValue>> current;
    for (const Op& op : ops) {
      std::optional<KeyValue> kv = Read(writer_, op.key);
      if (op.expect_mod_revision) {
        int64_t want = *op.expect_mod_revision;
        if (want == 0 && kv) return absl::AlreadyExistsError(Cat(op.key, " already exists"));
        if (want > 0 && !kv) return absl::NotFoundError(Cat(op.key, " not found"));
        if (want > 0 && kv->mod_revision != want) {
          return absl::AbortedError(Cat(op.key, " was changed: it is at revision ",
                                        kv->mod_revision, ", not ", want));
        }
      }
      if (op.kind == Op::Kind::kDelete && !kv) {
        return absl::NotFoundError(Cat(op.key, " not found"));
      }
      current.push_back(std::move(kv));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const std::optional<KeyValue>& kv = current[i];
      bool ok = true;
      if (op.kind == Op::Kind::kPut) {
        int64_t create = kv ? kv->create_revision : rev;
        int64_t version = kv ? kv->version + 1 : 1;
        Stmt put(writer_, "INSERT OR REPLACE INTO objects VALUES(?1, ?2, ?3, ?4, ?5)");
        ok = put.ok() &&
             put.Bind(1, op.key).Bind(2, op.value).Bind(3, create).Bind(4, rev).Bind(5, version)
                     .Step() == SQLITE_DONE;
        ok = ok && LogChange(rev, op.key, 0, op.value, create, version);
      } else {
        Stmt del(writer_, "DELETE FROM objects WHERE key = ?1");
        ok = del.ok() && del.Bind(1, op.key).Step() == SQLITE_DONE;
        ok = ok && LogChange(rev, op.key, 1, kv->value, kv->create_revision, kv->version);
      }
      if (!ok) return Failed(writer_, op.key);
    }
    return rev;
  }

  bool LogChange(int64_t rev, const std::string& key, int kind, const std::string& value,
                 int64_t create, int64_t version) {
    Stmt s(writer_, "INSERT INTO changes VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    return s.ok() &&
           s.Bind(1, rev).Bind(2, key).Bind(3, int64_t{kind}).Bind(4, value).Bind(5, create)
                   .Bind(6, version)
                   .Step() == SQLITE_DONE;
  }

  sqlite3* writer_;
  sqlite3* reader_;
  absl::Mutex read_mu_;  // serializes use of reader_
  absl::Mutex mu_;       // guards everything below
  absl::CondVar changed_;
  std::vector<Pending*> queue_;
  bool writing_ = false;
  int64_t revision_ = 0;
  int64_t compacted_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
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
  auto store = std::make_unique<SqliteStore>(dbs[0], dbs[1]);
  if (absl::Status s = store->Init(); !s.ok()) {
    return absl::Status(s.code(), Cat(path, ": ", s.message()));
  }
  return store;
}

}  // namespace gpucloud::store
