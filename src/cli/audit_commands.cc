#include "cli/audit_commands.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// Records asked for per GET when gpuctl reads the whole log to verify it.
constexpr int64_t kVerifyPageSize = 5000;

// RFC 3986 unreserved characters stay; everything else is %XX.
std::string PercentEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

absl::StatusOr<std::string> ReadFileText(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(Cat(flag, " ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Text(const nlohmann::json& j, const char* key, const char* inner = nullptr) {
  if (!j.is_object() || !j.contains(key)) return "-";
  const nlohmann::json& v = inner == nullptr ? j[key] : j[key].value(inner, nlohmann::json());
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  return v.is_null() ? "-" : v.dump();
}

}  // namespace

std::vector<std::string> SplitJsonLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) lines.emplace_back(line);
    start = end + 1;
  }
  return lines;
}

std::string FormatVerifyReport(const server::VerifyReport& report) {
  if (report.ok) return Cat("OK: ", report.what);
  return Cat("FAILED: record ", report.first_bad_seq, ": ", report.what);
}

int VerifyAuditTexts(const std::string& records, const std::string& digests,
                     const std::string& key_pem, std::ostream& out, std::ostream& err) {
  absl::StatusOr<server::AuditKey> key = server::AuditKey::FromPem(key_pem);
  if (!key.ok()) {
    err << "gpuctl audit verify: the key: " << key.status().message() << "\n";
    return kExitFailed;
  }
  server::VerifyReport report =
      server::VerifyChain(SplitJsonLines(records), SplitJsonLines(digests), *key);
  out << FormatVerifyReport(report) << "\n";
  return report.ok ? kExitOk : kExitFailed;
}

std::string AuditRecordsPath(const AuditQuery& q) {
  std::vector<std::string> params;
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) params.push_back(Cat(name, "=", PercentEncode(value)));
  };
  add("user", q.user);
  add("action", q.action);
  add("namespace", q.namespace_);
  add("since", q.since);
  add("until", q.until);
  if (q.after_seq > 0) add("afterSeq", Cat(q.after_seq));
  if (q.limit > 0) add("limit", Cat(q.limit));
  return params.empty() ? "audit/records" : Cat("audit/records?", Join(params, "&"));
}

void PrintAuditTable(const std::vector<std::string>& lines, std::ostream& out) {
  constexpr std::string_view kRow = "{:<27} {:<16} {:<20} {:<36} {:<8} {}\n";
  out << fmt::format(kRow, "TIME", "USER", "ACTION", "RESOURCE", "DECISION", "CODE");
  for (const std::string& line : lines) {
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object()) {
      out << "(not a record) " << line << "\n";
      continue;
    }
    std::string user = Text(r, "user", "username");
    if (user == "-" && Text(r, "nodeName") != "-") user = Cat("node:", Text(r, "nodeName"));
    out << fmt::format(kRow, Text(r, "stageTimestamp"), user, Text(r, "action"),
                       Text(r, "resource"), Text(r, "decision"), Text(r, "responseStatus", "code"));
  }
}

namespace {

// The server's log, oldest first, page by page (afterSeq = the last seq seen). The log grows
// while it is read (each of these GETs is recorded too), so reading stops at the first page
// shorter than asked for once it reaches `signed_through` (the newest digest fetched before),
// or at an empty page; what was recorded after that is not needed to check the signed log.
// nullopt (said on `err`) on a failed request.
std::optional<std::string> FetchRecords(const CallFn& call, int64_t signed_through,
                                        std::ostream& err) {
  std::string all;
  AuditQuery q{.limit = kVerifyPageSize};
  while (true) {
    std::optional<api::HttpResponse> r =
        SendRequest(call, "GET", Cat(kApiRoot, AuditRecordsPath(q)), "", err, "audit records");
    if (!r) return std::nullopt;
    std::vector<std::string> lines = SplitJsonLines(r->body);
    for (const std::string& line : lines) all += line + "\n";
    if (lines.empty()) return all;
    nlohmann::json last = nlohmann::json::parse(lines.back(), nullptr, false);
    if (!last.is_object() || !last["seq"].is_number_integer() ||
        last["seq"].get<int64_t>() <= q.after_seq) {
      return all;  // verification names what is wrong with such a line
    }
    q.after_seq = last["seq"].get<int64_t>();
    if (static_cast<int64_t>(lines.size()) < q.limit && q.after_seq >= signed_through) return all;
  }
}

// The newest digest's seq among JSON lines (0 when none decodes: VerifyChain says why).
int64_t NewestDigestSeq(const std::string& digests) {
  int64_t newest = 0;
  for (const std::string& line : SplitJsonLines(digests)) {
    nlohmann::json d = nlohmann::json::parse(line, nullptr, false);
    if (d.is_object() && d["seq"].is_number_integer()) {
      newest = std::max(newest, d["seq"].get<int64_t>());
    }
  }
  return newest;
}

// Digests first, then the records they cover (and any after), then the key.
int VerifyServerLog(const CallFn& call, std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> digests =
      SendRequest(call, "GET", Cat(kApiRoot, "audit/digests"), "", err, "audit digests");
  if (!digests) return kExitFailed;
  std::optional<std::string> records = FetchRecords(call, NewestDigestSeq(digests->body), err);
  if (!records) return kExitFailed;
  std::optional<api::HttpResponse> key =
      SendRequest(call, "GET", Cat(kApiRoot, "audit/key"), "", err, "audit key");
  if (!key) return kExitFailed;
  return VerifyAuditTexts(*records, digests->body, key->body, out, err);
}

}  // namespace

struct AuditCommands::Flags {
  CLI::App* verify = nullptr;
  CLI::App* query = nullptr;
  std::string file, digests, key, format = "table";
  AuditQuery q;
};

AuditCommands::AuditCommands(CLI::App& app) : flags_(std::make_shared<Flags>()) {
  Flags& f = *flags_;
  CLI::App* audit = app.add_subcommand("audit", "The audit log: audit verify, audit query");
  audit->require_subcommand(1);
  f.verify = audit->add_subcommand(
      "verify", "Check the audit log's hash chain and signed digests (the server's, or an export)");
  CLI::Option* file = f.verify->add_option("--file", f.file, "exported records (JSON lines)");
  CLI::Option* digests =
      f.verify->add_option("--digests", f.digests, "the signed digests (JSON lines)");
  CLI::Option* key = f.verify->add_option("--key", f.key, "the server's public key or certificate");
  file->needs(digests)->needs(key);
  digests->needs(file);
  key->needs(file);
  f.query = audit->add_subcommand("query", "Audit records, oldest first");
  f.query->add_option("--user", f.q.user, "user.username, exactly");
  f.query->add_option("--action", f.q.action, "an action or pattern: jobs:Create, jobs:*");
  f.query->add_option("-n,--namespace", f.q.namespace_, "objectRef.namespace");
  f.query->add_option("--since", f.q.since, "from this time (RFC 3339 or Unix seconds), inclusive");
  f.query->add_option("--until", f.q.until,
                      "until this time (RFC 3339 or Unix seconds), exclusive");
  f.query->add_option("--limit", f.q.limit, "at most this many records")
      ->check(CLI::PositiveNumber);
  f.query->add_option("-o,--output", f.format, "table or json (the records as JSON lines)")
      ->check(CLI::IsMember({"table", "json"}));
}

bool AuditCommands::parsed() const { return flags_->verify->parsed() || flags_->query->parsed(); }

int AuditCommands::Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
                       std::ostream& err) {
  const Flags& f = *flags_;
  if (f.verify->parsed() && !f.file.empty()) {
    absl::StatusOr<std::string> records = ReadFileText("--file", f.file);
    absl::StatusOr<std::string> digests = ReadFileText("--digests", f.digests);
    absl::StatusOr<std::string> key = ReadFileText("--key", f.key);
    for (const absl::Status& s : {records.status(), digests.status(), key.status()}) {
      if (!s.ok()) {
        err << "gpuctl audit verify: " << s.message() << "\n";
        return kExitFailed;
      }
    }
    return VerifyAuditTexts(*records, *digests, *key, out, err);
  }
  if (!f.verify->parsed() && !f.query->parsed()) return kExitUsage;
  std::optional<CallFn> call = connect();
  if (!call) return kExitFailed;
  if (f.verify->parsed()) return VerifyServerLog(*call, out, err);
  std::optional<api::HttpResponse> r =
      SendRequest(*call, "GET", Cat(kApiRoot, AuditRecordsPath(f.q)), "", err);
  if (!r) return kExitFailed;
  std::vector<std::string> lines = SplitJsonLines(r->body);
  if (f.format == "json") {
    for (const std::string& line : lines) out << line << "\n";
  } else {
    PrintAuditTable(lines, out);
  }
  return kExitOk;
}

}  // namespace gpucloud::cli
