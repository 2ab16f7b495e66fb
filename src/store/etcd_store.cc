#include "store/etcd_store.h"

#include <atomic>

#include "core/text.h"
#include "store/etcd_http.h"

namespace gpucloud::store {
namespace {

using etcd::Base64;
using etcd::JsonInt;
using nlohmann::json;

// The end of the key range of every key starting with `prefix` (etcd's range_end): the prefix
// with its last byte below 0xff raised by one; "\0" (every key) when there is none.
std::string RangeEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

absl::StatusOr<std::string> Decode(const json& kv, const char* field) {
  return kv.contains(field) && kv[field].is_string() ? etcd::FromBase64(kv[field])
                                                     : absl::StatusOr<std::string>("");
}

// Raises `a` to `value` unless it is there already (lock-free: several calls may race).
void RaiseTo(std::atomic<int64_t>& a, int64_t value) {
  int64_t seen = a.load();
  while (seen < value && !a.compare_exchange_weak(seen, value)) {
  }
}

json Compare(const std::string& key, const char* target, const char* result, int64_t value) {
  json c = {{"key", Base64(key)}, {"target", target}, {"result", result}};
  c[std::string(target) == "MOD" ? "mod_revision" : "create_revision"] = std::to_string(value);
  return c;
}

class EtcdStore final : public Store {
 public:
  EtcdStore(const EtcdStoreOptions& options, std::vector<etcd::Member> members,
            std::shared_ptr<etcd::TlsContext> tls)
      : options_(options), http_(std::move(members), options.request_timeout, std::move(tls)) {}

  absl::StatusOr<KeyValue> Get(const std::string& key) override {
    absl::StatusOr<json> r = Post("/v3/kv/range", {{"key", Base64(ns() + key)}});
    if (!r.ok()) return r.status();
    if (!r->contains("kvs") || (*r)["kvs"].empty())
      return absl::NotFoundError(Cat(key, " not found"));
    return ToKeyValue((*r)["kvs"][0]);
  }

  absl::StatusOr<ListResult> List(const std::string& prefix) override {
    ListResult out;
    std::string from = ns() + prefix;
    const std::string end = RangeEnd(ns() + prefix);
    for (;;) {
      json req = {
          {"key", Base64(from)}, {"range_end", Base64(end)}, {"limit", options_.list_page_size}};
      if (out.revision > 0) req["revision"] = std::to_string(out.revision);
      absl::StatusOr<json> r = Post("/v3/kv/range", req);
      if (!r.ok()) return r.status();
      if (out.revision == 0) out.revision = JsonInt((*r)["header"], "revision");
      for (const json& kv : r->value("kvs", json::array())) {
        absl::StatusOr<KeyValue> item = ToKeyValue(kv);
        if (!item.ok()) return item.status();
        out.items.push_back(std::move(*item));
      }
      if (!r->value("more", false) || out.items.empty()) return out;
      from = ns() + out.items.back().key + std::string(1, '\0');
    }
  }

  absl::StatusOr<int64_t> Count(const std::string& prefix) override {
    if (prefix.empty()) return absl::InvalidArgumentError("Count: empty prefix");
    absl::StatusOr<json> r = Post("/v3/kv/range", {{"key", Base64(ns() + prefix)},
                                                   {"range_end", Base64(RangeEnd(ns() + prefix))},
                                                   {"count_only", true}});
    if (!r.ok()) return r.status();
    return JsonInt(*r, "count");
  }

  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    if (absl::Status s = Validate(ops); !s.ok()) return s;
    json req = {{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
    for (const Op& op : ops) {
      std::string key = ns() + op.key;
      if (op.kind == Op::Kind::kCheck) {
        // Absent keys have mod revision 0, never equal to R > 0: one compare covers both.
        req["compare"].push_back(Compare(key, "MOD", "EQUAL", *op.expect_mod_revision));
      } else if (op.expect_mod_revision == 0) {
        req["compare"].push_back(Compare(key, "CREATE", "EQUAL", 0));
      } else if (op.expect_mod_revision) {
        req["compare"].push_back(Compare(key, "MOD", "EQUAL", *op.expect_mod_revision));
      } else if (op.kind == Op::Kind::kDelete) {
        req["compare"].push_back(Compare(key, "CREATE", "GREATER", 0));
      }
      if (op.kind == Op::Kind::kCheck) {
        // A condition only: nothing to write.
      } else if (op.kind == Op::Kind::kPut) {
        req["success"].push_back(
            {{"request_put", {{"key", Base64(key)}, {"value", Base64(op.value)}}}});
      } else {
        req["success"].push_back({{"request_delete_range", {{"key", Base64(key)}}}});
      }
      // Read at the revision the compares were evaluated at: says which one failed.
      req["failure"].push_back({{"request_range", {{"key", Base64(key)}, {"keys_only", true}}}});
    }
    absl::StatusOr<json> r = Post("/v3/kv/txn", req);
    if (!r.ok()) return TxnError(ops, r.status());
    if (r->value("succeeded", false)) return JsonInt((*r)["header"], "revision");
    return PreconditionFailure(ops, *r);
  }

  absl::StatusOr<std::vector<Event>> Changes(const std::string& prefix, int64_t after,
                                             int limit) override;

  absl::Status Compact(int64_t revision) override;

  int64_t CompactedRevision() override {
    absl::StatusOr<Mark> mark = ReadMark();
    return mark.ok() ? mark->compacted : compacted_.load();
  }

  int64_t Revision() override {
    absl::StatusOr<Mark> mark = ReadMark();
    return mark.ok() ? mark->revision : revision_.load();
  }

  bool WaitForChange(int64_t after, absl::Duration timeout) override;

  // Reads the compaction mark: etcd is there.
  absl::Status Ping() { return ReadMark().status(); }

 private:
  // The compaction mark and the revision it was read at.
  struct Mark {
    int64_t compacted = 0;
    int64_t mod_revision = 0;  // of the mark's key (0: never written)
    int64_t revision = 0;
  };

  const std::string& ns() const { return options_.namespace_prefix; }

  absl::StatusOr<json> Post(const std::string& path, const json& body) {
    absl::StatusOr<json> r = http_.Post(path, body);
    if (r.ok()) Saw(JsonInt((*r)["header"], "revision"));
    return r;
  }

  void Saw(int64_t revision) { RaiseTo(revision_, revision); }

  absl::StatusOr<KeyValue> ToKeyValue(const json& kv) const {
    absl::StatusOr<std::string> key = Decode(kv, "key");
    absl::StatusOr<std::string> value = Decode(kv, "value");
    if (!key.ok()) return key.status();
    if (!value.ok()) return value.status();
    if (!key->starts_with(ns())) return absl::InternalError(Cat("etcd: key outside ", ns()));
    return KeyValue{key->substr(ns().size()), *value, JsonInt(kv, "create_revision"),
                    JsonInt(kv, "mod_revision"), JsonInt(kv, "version")};
  }

  absl::Status Validate(const std::vector<Op>& ops) const {
    if (absl::Status s = ValidateTxnOps(ops); !s.ok()) return s;
    int64_t bytes = 0;
    for (const Op& op : ops) {
      int64_t size = static_cast<int64_t>(ns().size() + op.key.size() + op.value.size());
      if (size > options_.max_request_bytes) {
        return absl::InvalidArgumentError(
            Cat(op.key, ": a value of ", op.value.size(), " bytes is larger than etcd takes (",
                options_.max_request_bytes, " bytes in one request)"));
      }
      bytes += size;
    }
    if (bytes > options_.max_request_bytes) {
      return absl::InvalidArgumentError(Cat(
          "a transaction of ", bytes, " bytes (", ops.size(), " ops, the first on ", ops[0].key,
          ") is larger than etcd takes (", options_.max_request_bytes, " bytes in one request)"));
    }
    return absl::OkStatus();
  }

  // etcd's refusals of the transaction itself, made clear.
  static absl::Status TxnError(const std::vector<Op>& ops, const absl::Status& s) {
    const std::string m(s.message());
    if (m.find("too many operations") != std::string::npos) {
      return absl::InvalidArgumentError(Cat("a transaction of ", ops.size(),
                                            " ops is over the etcd server's --max-txn-ops (", m,
                                            "); the first op is on ", ops[0].key));
    }
    if (m.find("request is too large") != std::string::npos) {
      return absl::InvalidArgumentError(Cat("the transaction on ", ops[0].key,
                                            " is over the etcd server's --max-request-bytes (", m,
                                            ")"));
    }
    return s;
  }

  // The error of the first op whose precondition failed, from the failure branch's reads.
  absl::Status PreconditionFailure(const std::vector<Op>& ops, const json& r) const {
    const json& reads = r.value("responses", json::array());
    for (size_t i = 0; i < ops.size() && i < reads.size(); ++i) {
      const Op& op = ops[i];
      const json& kvs = reads[i]["response_range"].value("kvs", json::array());
      const bool exists = !kvs.empty();
      const int64_t mod = exists ? JsonInt(kvs[0], "mod_revision") : 0;
      if (op.kind == Op::Kind::kCheck) {
        if (!exists)
          return absl::FailedPreconditionError(Cat("check on ", op.key, ": it is absent"));
        if (mod != *op.expect_mod_revision) {
          return absl::FailedPreconditionError(Cat("check on ", op.key, ": it is at revision ", mod,
                                                   ", not ", *op.expect_mod_revision));
        }
        continue;
      }
      if (op.expect_mod_revision == 0 && exists) {
        return absl::AlreadyExistsError(Cat(op.key, " already exists"));
      }
      if (op.expect_mod_revision > 0 || op.kind == Op::Kind::kDelete) {
        if (!exists) return absl::NotFoundError(Cat(op.key, " not found"));
      }
      if (op.expect_mod_revision > 0 && mod != *op.expect_mod_revision) {
        return absl::AbortedError(Cat(op.key, " was changed: it is at revision ", mod, ", not ",
                                      *op.expect_mod_revision));
      }
    }
    return absl::InternalError("etcd: the transaction failed, but every precondition holds");
  }

  absl::StatusOr<Mark> ReadMark() {
    absl::StatusOr<json> r = Post("/v3/kv/range", {{"key", Base64(options_.compaction_key)}});
    if (!r.ok()) return r.status();
    Mark mark;
    mark.revision = JsonInt((*r)["header"], "revision");
    if (r->contains("kvs") && !(*r)["kvs"].empty()) {
      const json& kv = (*r)["kvs"][0];
      absl::StatusOr<std::string> value = Decode(kv, "value");
      if (!value.ok()) return value.status();
      mark.compacted = std::atoll(value->c_str());
      mark.mod_revision = JsonInt(kv, "mod_revision");
    }
    RaiseTo(compacted_, mark.compacted);
    return mark;
  }

  absl::StatusOr<std::unique_ptr<etcd::WatchStream>> WatchEverything(int64_t from) const {
    return http_.Watch({{"key", Base64(std::string(1, '\0'))},
                        {"range_end", Base64(std::string(1, '\0'))},
                        {"start_revision", std::to_string(from)},
                        {"prev_kv", true}});
  }

  // One watch message's events under `prefix` into `out`; false once the page is full (the
  // next revision would start past `limit`). `last` is the newest revision seen.
  absl::Status TakeEvents(const json& result, const std::string& prefix, int64_t after,
                          size_t limit, std::vector<Event>& out, int64_t& last, bool& full) const;

  const EtcdStoreOptions options_;
  const etcd::Http http_;
  std::atomic<int64_t> revision_{0};   // the newest seen (for Revision() when etcd is away)
  std::atomic<int64_t> compacted_{0};  // likewise for CompactedRevision()
};

absl::Status EtcdStore::TakeEvents(const json& result, const std::string& prefix, int64_t after,
                                   size_t limit, std::vector<Event>& out, int64_t& last,
                                   bool& full) const {
  const std::string want = ns() + prefix;
  for (const json& e : result.value("events", json::array())) {
    const json& kv = e.value("kv", json::object());
    int64_t rev = JsonInt(kv, "mod_revision");
    if (out.size() >= limit && rev > out.back().revision) {
      full = true;
      return absl::OkStatus();
    }
    last = std::max(last, rev);
    absl::StatusOr<std::string> key = Decode(kv, "key");
    if (!key.ok()) return key.status();
    if (rev <= after || !key->starts_with(want)) continue;
    Event event;
    event.revision = rev;
    const bool deleted = e.value("type", "PUT") == "DELETE";
    event.kind = deleted ? Event::Kind::kDelete : Event::Kind::kPut;
    absl::StatusOr<KeyValue> value = ToKeyValue(deleted ? e.value("prev_kv", json::object()) : kv);
    if (!value.ok()) return value.status();
    event.kv = std::move(*value);
    event.kv.key = key->substr(ns().size());
    event.kv.mod_revision = rev;
    out.push_back(std::move(event));
  }
  full = out.size() >= limit;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> EtcdStore::Changes(const std::string& prefix, int64_t after,
                                                      int limit) {
  absl::StatusOr<Mark> mark = ReadMark();
  if (!mark.ok()) return mark.status();
  auto compacted = [&](int64_t c) {
    return absl::OutOfRangeError(
        Cat("revision ", after, " is compacted (the oldest kept is ", c + 1, "); list again"));
  };
  if (after < mark->compacted) return compacted(mark->compacted);
  std::vector<Event> out;
  if (after >= mark->revision) return out;
  absl::StatusOr<std::unique_ptr<etcd::WatchStream>> watch = WatchEverything(after + 1);
  if (!watch.ok()) return watch.status();
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  int64_t last = after;
  bool full = false;
  // Every revision up to the one read with the mark has an event somewhere: the watch has
  // delivered everything up to it once it delivered an event of it.
  while (last < mark->revision && !full) {
    absl::StatusOr<json> result = (*watch)->Next(deadline);
    if (!result.ok()) return result.status();
    if (int64_t c = JsonInt(*result, "compact_revision"); c > 0) return compacted(c - 1);
    if (result->value("canceled", false)) {
      return absl::UnavailableError(Cat("etcd: the watch was canceled: ", result->dump()));
    }
    if (absl::Status s = TakeEvents(*result, prefix, after, std::max(limit, 1), out, last, full);
        !s.ok()) {
      return s;
    }
  }
  return out;
}

absl::Status EtcdStore::Compact(int64_t revision) {
  for (;;) {
    absl::StatusOr<Mark> mark = ReadMark();
    if (!mark.ok()) return mark.status();
    if (revision > mark->revision) {
      return absl::InvalidArgumentError(
          Cat("cannot compact to ", revision, ", beyond the current revision ", mark->revision));
    }
    if (revision <= mark->compacted) return absl::OkStatus();
    // The mark first: a crash between the two leaves the log longer than it says, never
    // shorter, so no watcher misses a change it was told it had.
    json req = {{"compare", {Compare(options_.compaction_key, "MOD", "EQUAL", mark->mod_revision)}},
                {"success",
                 {{{"request_put",
                    {{"key", Base64(options_.compaction_key)},
                     {"value", Base64(std::to_string(revision))}}}}}}};
    absl::StatusOr<json> r = Post("/v3/kv/txn", req);
    if (!r.ok()) return r.status();
    if (!r->value("succeeded", false)) continue;  // another compaction moved the mark: again
    absl::StatusOr<json> done =
        Post("/v3/kv/compaction", {{"revision", std::to_string(revision)}, {"physical", true}});
    // Compacted already (by someone else, further): nothing left to do.
    if (!done.ok() && !absl::IsOutOfRange(done.status())) return done.status();
    RaiseTo(compacted_, revision);
    return absl::OkStatus();
  }
}

bool EtcdStore::WaitForChange(int64_t after, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return Revision() > after;
  const absl::Time deadline = absl::Now() + timeout;
  // A watch from after + 1 answers at once when the revision is past `after` already: no
  // separate read of the revision first.
  absl::StatusOr<std::unique_ptr<etcd::WatchStream>> watch = WatchEverything(after + 1);
  // etcd is away: wait out the timeout all the same, so that callers looping on WaitForChange
  // (watch feeds, the controller) do not spin on refused connections.
  auto unavailable = [&] {
    absl::SleepFor(deadline - absl::Now());
    return false;
  };
  if (!watch.ok()) return unavailable();
  for (;;) {
    absl::StatusOr<json> result = (*watch)->Next(deadline);
    if (absl::IsUnavailable(result.status())) return unavailable();
    if (!result.ok()) return Revision() > after;
    if (!result->value("events", json::array()).empty()) return true;
    if (JsonInt(*result, "compact_revision") > 0) return true;  // long past `after`
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenEtcdStore(const EtcdStoreOptions& options) {
  if (options.namespace_prefix.empty()) {
    return absl::InvalidArgumentError("etcd store: namespace_prefix must not be empty");
  }
  if (options.compaction_key.starts_with(options.namespace_prefix)) {
    return absl::InvalidArgumentError(Cat("etcd store: compaction_key ", options.compaction_key,
                                          " must not be under namespace_prefix ",
                                          options.namespace_prefix));
  }
  if (options.list_page_size < 1 || options.max_request_bytes < 1) {
    return absl::InvalidArgumentError(
        "etcd store: list_page_size and max_request_bytes must be positive");
  }
  absl::StatusOr<std::vector<etcd::Member>> members = etcd::ParseMembers(options.endpoint);
  if (!members.ok()) return members.status();
  absl::StatusOr<std::shared_ptr<etcd::TlsContext>> tls = etcd::MakeTlsContext(options.tls);
  if (!tls.ok()) return tls.status();
  auto store = std::make_unique<EtcdStore>(options, std::move(*members), std::move(*tls));
  if (absl::Status s = store->Ping(); !s.ok()) return s;
  return store;
}

}  // namespace gpucloud::store
