#include "server/audited_store.h"

#include <openssl/rand.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_split.h"
#include "core/text.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

thread_local AuditRequest* current_request = nullptr;

constexpr std::string_view kApiRoot = "/apis/gpucloud/v1/";

// objectRef from an API path: namespaces/{ns}/{resource}[/{name}[/{sub}]] or
// {resource}[/{name}[/{sub}]].
void FillObjectRef(const std::string& path, AuditRecord& rec) {
  if (!path.starts_with(kApiRoot)) {
    rec.object_resource = path.size() > 1 ? path.substr(1) : "";  // "/metrics": "metrics"
    return;
  }
  const std::string rest = path.substr(kApiRoot.size());
  std::vector<std::string> parts = absl::StrSplit(rest, '/', absl::SkipEmpty());
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "namespaces") {
    rec.object_namespace = parts[1];
    i = 2;
    if (parts.size() == 2) {  // the namespace itself
      rec.object_resource = "namespaces";
      rec.object_name = parts[1];
      return;
    }
  }
  if (i < parts.size()) rec.object_resource = parts[i];
  if (i + 1 < parts.size()) rec.object_name = parts[i + 1];
  if (i + 2 < parts.size()) rec.annotations["gpucloud.io/subresource"] = parts[i + 2];
}

// A create names its object in the body, not the path: the name comes from the key the Txn
// writes for it (/jobs/team-a/train for jobs in team-a), never from the body.
void NameFromOps(const std::vector<store::Op>& ops, AuditRecord& rec) {
  if (!rec.object_name.empty() || rec.object_resource.empty()) return;
  const std::string prefix = rec.object_namespace.empty()
                                 ? Cat("/", rec.object_resource, "/")
                                 : Cat("/", rec.object_resource, "/", rec.object_namespace, "/");
  for (const store::Op& op : ops) {
    if (op.key.starts_with(prefix) && op.key.find('/', prefix.size()) == std::string::npos) {
      rec.object_name = op.key.substr(prefix.size());
      return;
    }
  }
}

std::string VerbOf(const Request& r, bool item) {
  if (r.method == "GET" || r.method == "HEAD") {
    if (QueryTrue(r, "watch")) return "watch";
    return item ? "get" : "list";
  }
  if (r.method == "POST") return "create";
  if (r.method == "PUT") return "update";
  if (r.method == "PATCH") return "patch";
  if (r.method == "DELETE") return "delete";
  return ToLower(r.method);
}

}  // namespace

AuditScope::AuditScope(AuditRequest* request) : previous_(current_request) {
  current_request = request;
}

AuditScope::~AuditScope() { current_request = previous_; }

AuditRequest* AuditScope::Current() { return current_request; }

void NoteAuditAuthorization(const Response::Authorization& decided) {
  AuditRequest* request = AuditScope::Current();
  if (request == nullptr) return;
  request->record.action = decided.action;
  request->record.resource = decided.resource;
  request->record.decision = decided.decision;
  request->record.reason = decided.reason;
}

void NoteAuditAnnotation(const std::string& key, std::string value) {
  AuditRequest* request = AuditScope::Current();
  if (request != nullptr) request->record.annotations[key] = std::move(value);
}

std::string NewAuditId() {
  // OpenSSL's generator, drawn 4 KiB at a time per thread: one RAND_bytes call per id cost
  // about 10 us of its locking.
  thread_local unsigned char pool[4096];
  thread_local size_t used = sizeof pool;
  if (used + 16 > sizeof pool) {
    if (RAND_bytes(pool, sizeof pool) != 1) {
      // Never expected (OpenSSL's generator failing): an id must still be unique enough.
      static std::atomic<uint64_t> counter{0};
      for (size_t i = 0; i < sizeof pool; i += 8) {
        uint64_t n = ++counter;
        for (int k = 0; k < 8; ++k) pool[i + k] = static_cast<unsigned char>(n >> (8 * k));
      }
    }
    used = 0;
  }
  unsigned char b[16];
  std::memcpy(b, pool + used, sizeof b);
  used += sizeof b;
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 0xf];
  }
  return out;
}

AuditRecord AuditRecordFor(const Request& r, const std::string& source_ip,
                           const std::string& user_agent, const std::string& audit_id,
                           int64_t received_ms) {
  AuditRecord rec;
  rec.audit_id = audit_id;
  rec.request_uri = r.path;
  char sep = '?';
  for (const auto& [k, v] : r.query) {
    rec.request_uri += Cat(std::string(1, sep), k, v.empty() ? "" : "=", v);
    sep = '&';
  }
  rec.username = r.who.user;
  rec.groups = r.who.groups;
  if (!source_ip.empty()) rec.source_ips = {source_ip};
  rec.user_agent = user_agent;
  FillObjectRef(r.path, rec);
  rec.verb = VerbOf(r, !rec.object_name.empty());
  rec.request_received_ms = received_ms;
  rec.token_name = r.who.token_name;
  rec.node_name = r.who.node_name;
  return rec;
}

absl::Status FinishAuditRequest(AuditLog& log, AuditRequest& request, const Response& resp) {
  if (request.committed > 0) return absl::OkStatus();  // recorded with its mutation
  const Response::Authorization& a = resp.authorization;
  // The audit policy's one level None: a node's successful heartbeat (every agent, once a
  // second; it changes nothing in the store, and says again what the last one said). Its
  // refusals and failures are recorded like every request.
  if (resp.status == 200 && a.action == "nodes:Heartbeat") return absl::OkStatus();
  AuditRecord rec = request.record;
  rec.stage = "ResponseComplete";
  rec.response_code = resp.status;
  rec.stage_ms = 0;  // now
  if (rec.action.empty()) rec.action = a.action;
  if (rec.resource.empty()) rec.resource = a.resource;
  if (rec.decision.empty()) rec.decision = a.decision;
  if (rec.reason.empty()) rec.reason = a.reason;
  return log.Record(std::move(rec));
}

AuditedStore::AuditedStore(store::Store& base, AuditLog& log, std::string audit_prefix)
    : base_(base), log_(log), prefix_(std::move(audit_prefix)) {}

absl::StatusOr<store::KeyValue> AuditedStore::Get(const std::string& key) {
  if (Hidden(key)) return absl::NotFoundError(Cat(key, " not found"));
  return base_.Get(key);
}

absl::StatusOr<store::ListResult> AuditedStore::ListPage(const std::string& prefix,
                                                         const std::string& after_key,
                                                         int64_t limit, int64_t* remaining) {
  if (Covers(prefix) || Hidden(prefix)) {
    return store::Store::ListPage(prefix, after_key, limit, remaining);
  }
  return base_.ListPage(prefix, after_key, limit, remaining);
}

absl::StatusOr<store::ListResult> AuditedStore::List(const std::string& prefix) {
  if (Hidden(prefix)) return store::ListResult{{}, base_.Revision()};
  absl::StatusOr<store::ListResult> list = base_.List(prefix);
  if (list.ok() && Covers(prefix)) {
    std::erase_if(list->items, [this](const store::KeyValue& kv) { return Hidden(kv.key); });
  }
  return list;
}

absl::StatusOr<int64_t> AuditedStore::Count(const std::string& prefix) {
  if (!prefix.empty() && Hidden(prefix)) return 0;
  absl::StatusOr<int64_t> n = base_.Count(prefix);
  if (!n.ok() || !Covers(prefix)) return n;
  absl::StatusOr<int64_t> audit = base_.Count(prefix_);
  if (!audit.ok()) return audit.status();
  return *n - *audit;
}

absl::StatusOr<int64_t> AuditedStore::Txn(const std::vector<store::Op>& ops) {
  AuditRequest* request = AuditScope::Current();
  if (request == nullptr || ops.empty()) {
    for (const store::Op& op : ops) {
      if (Hidden(op.key)) return absl::InvalidArgumentError(Cat(op.key, " is the audit log's"));
    }
    return base_.Txn(ops);
  }
  AuditRecord rec = request->record;
  rec.stage = kAuditCommittedStage;
  rec.response_code = 0;
  rec.stage_ms = 0;  // now
  NameFromOps(ops, rec);
  if (request->committed > 0) {
    rec.annotations["gpucloud.io/txn"] = std::to_string(request->committed + 1);
  }
  absl::StatusOr<int64_t> revision = log_.CommitWith(std::move(rec), ops);
  if (revision.ok()) ++request->committed;
  return revision;
}

// Whole revisions as the base gives them, audit keys left out; a page the filter made short
// reads on, so that "fewer than limit" still means "no more".
absl::StatusOr<std::vector<store::Event>> AuditedStore::Changes(const std::string& prefix,
                                                                int64_t after, int limit) {
  if (Hidden(prefix)) {
    absl::StatusOr<std::vector<store::Event>> probe = base_.Changes(prefix, after, 1);
    if (!probe.ok()) return probe.status();  // OutOfRange stays
    return std::vector<store::Event>{};
  }
  if (!Covers(prefix)) return base_.Changes(prefix, after, limit);
  std::vector<store::Event> out;
  for (int64_t cursor = after;;) {
    absl::StatusOr<std::vector<store::Event>> page = base_.Changes(prefix, cursor, limit);
    if (!page.ok()) return page.status();
    const bool more = static_cast<int>(page->size()) >= limit && !page->empty();
    if (more) cursor = page->back().revision;
    for (store::Event& e : *page) {
      if (!Hidden(e.kv.key)) out.push_back(std::move(e));
    }
    if (!more || static_cast<int>(out.size()) >= limit) return out;
  }
}

}  // namespace gpucloud::server
