// GET /apis/gpucloud/v1/audit/{records,digests,key,verify,anomalies}: the audit log and the hits
// of its anomaly rules, for whoever the policies allow audit:Read or audit:Verify: admins, and an
// auditor given examples/policies/read-only-auditor.yaml (docs/audit.md, "Reading the log over
// the API").
#include <cctype>
#include <optional>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "core/text.h"
#include "server/anomaly.h"
#include "server/audit_log.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

// RFC 3339 ("2025-12-01T14:40:00Z", fractions and offsets allowed) or Unix seconds, as Unix ms;
// nullopt when it is neither.
std::optional<int64_t> ParseAuditTime(const std::string& text) {
  if (!text.empty() && text.size() <= 12 &&
      text.find_first_not_of("0123456789") == std::string::npos) {
    return std::stoll(text) * 1000;
  }
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return std::nullopt;
  return absl::ToUnixMillis(t);
}

// The filter of GET audit/records, or the 400 naming the bad parameter.
std::optional<Response> ParseAuditFilter(const Request& r, AuditFilter& f) {
  if (auto bad =
          RefuseQuery(r, {"user", "action", "namespace", "since", "until", "afterSeq", "limit"})) {
    return bad;
  }
  auto text = [&r](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  f.user = text("user");
  f.action = text("action");
  f.namespace_ = text("namespace");
  for (const char* key : {"since", "until"}) {
    if (!r.query.contains(key)) continue;
    std::optional<int64_t> ms = ParseAuditTime(text(key));
    if (!ms) {
      return Status(400, "BadRequest",
                    Cat(key, ": \"", text(key), "\" is neither an RFC 3339 time nor Unix seconds"));
    }
    (std::string_view(key) == "since" ? f.since_ms : f.until_ms) = *ms;
  }
  for (const char* key : {"afterSeq", "limit"}) {
    std::optional<int64_t> n = QueryInt(r, key);
    if (n && *n < 0) {
      return Status(400, "BadRequest",
                    Cat(key, ": \"", text(key), "\" is not a non-negative integer"));
    }
    if (n) (std::string_view(key) == "limit" ? f.limit : f.after_seq) = *n;
  }
  return std::nullopt;
}

// GET audit/anomalies[?rule=R&user=U]: the stored anomaly Events (anomaly.h), oldest first, as
// JSON lines.
Response AnomaliesResponse(const Request& r, store::Store& store) {
  if (auto bad = RefuseQuery(r, {"rule", "user"})) return *bad;
  auto text = [&r](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  const std::string rule = text("rule"), user = text("user");
  absl::StatusOr<store::ListResult> list = store.List(kAnomalyPrefix);
  if (!list.ok()) return FromStatus(list.status());
  std::string body;
  for (const store::KeyValue& kv : list->items) {
    Json e = Json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
    if (e.is_discarded() || !e.is_object()) continue;
    if (!rule.empty() && e.value("rule", "") != rule) continue;
    if (!user.empty() && e.value("identity", "") != user) continue;
    body += kv.value + "\n";
  }
  return {200, body, "application/jsonl"};
}

Json VerifyReportJson(const VerifyReport& v) {
  return Json{{"ok", v.ok},
              {"firstBadSeq", v.first_bad_seq},
              {"what", v.what},
              {"records", v.records},
              {"firstSeq", v.first_seq},
              {"lastSeq", v.last_seq},
              {"signedThrough", v.signed_through},
              {"unsignedRecords", v.unsigned_records}};
}

}  // namespace

Response RestApi::HandleAudit(const Request& r, const std::vector<std::string>& parts) {
  if (audit_ == nullptr || parts.size() != 2) {
    return Status(404, "NotFound", Cat("no such path ", r.path));
  }
  const std::string& what = parts[1];
  if (what != "records" && what != "digests" && what != "key" && what != "verify" &&
      what != "anomalies") {
    return Status(404, "NotFound", Cat("no such path ", r.path));
  }
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat("the audit log is read-only (GET ", r.path, ")"));
  }
  if (what == "records") {
    AuditFilter filter;
    if (std::optional<Response> bad = ParseAuditFilter(r, filter)) return *bad;
    std::ostringstream out;
    if (absl::Status s = audit_->ExportJsonLines(out, filter); !s.ok()) return FromStatus(s);
    return {200, out.str(), "application/jsonl"};
  }
  if (what == "anomalies") return AnomaliesResponse(r, store_);
  if (std::optional<Response> bad = RefuseQuery(r, kNoQuery)) return *bad;
  if (what == "digests") {
    absl::StatusOr<std::vector<std::string>> digests = audit_->DigestTexts();
    if (!digests.ok()) return FromStatus(digests.status());
    std::string body;
    for (const std::string& d : *digests) body += d + "\n";
    return {200, body, "application/jsonl"};
  }
  if (what == "key") return {200, audit_->key().PublicPem(), "application/x-pem-file"};
  absl::StatusOr<VerifyReport> report = audit_->Verify();
  if (!report.ok()) return FromStatus(report.status());
  return {200, VerifyReportJson(*report).dump(2) + "\n"};
}

}  // namespace gpucloud::server
