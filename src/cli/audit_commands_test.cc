#include "cli/audit_commands.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/gpuctl.h"
#include "core/text.h"
#include "server/audit_chain.h"

namespace gpucloud::cli {
namespace {

using server::AuditKey;
using server::AuditRecord;

constexpr int64_t kStartMs = 1'764'600'000'000;  // 2025-12-01T14:40:00Z

// A log of `n` chained records and a digest signed at `signed_at` (0: none), as exported.
struct Log {
  std::vector<std::string> records;
  std::vector<std::string> digests;
  AuditKey key = AuditKey::Generate();
  std::string head = server::kGenesisHash;

  explicit Log(int n, int64_t signed_at) {
    for (int i = 1; i <= n; ++i) {
      Append();
      if (i == signed_at) {
        digests.push_back(server::EncodeDigest(*server::SignDigest(i, head, kStartMs, key)));
      }
    }
  }
  // One more record, chained to the last.
  void Append() {
    const int i = static_cast<int>(records.size()) + 1;
    AuditRecord r;
    r.seq = i;
    r.audit_id = Cat("req-", i);
    r.request_uri = "/apis/gpucloud/v1/namespaces/team-a/jobs";
    r.verb = "create";
    r.username = i % 2 ? "alice" : "bob";
    r.groups = {"ml-team"};
    r.source_ips = {"10.0.0.7"};
    r.object_resource = "jobs";
    r.object_namespace = "team-a";
    r.object_name = Cat("train-", i);
    r.response_code = i == 3 ? 403 : 201;
    r.request_received_ms = kStartMs + i * 1000;
    r.stage_ms = kStartMs + i * 1000 + 8;
    r.action = "jobs:Create";
    r.resource = Cat("gpucloud:job/team-a/train-", i);
    r.decision = i == 3 ? "deny" : "allow";
    r.reason = "policy p, statement 0";
    r.prev_hash = head;
    r.hash = server::RecordHash(r);
    head = r.hash;
    records.push_back(server::EncodeRecord(r));
  }
  static std::string Lines(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    return text;
  }
};

struct Ran {
  int code;
  std::string out, err;
};

Ran Verify(const std::vector<std::string>& records, const Log& log) {
  std::ostringstream out, err;
  int code =
      VerifyAuditTexts(Log::Lines(records), Log::Lines(log.digests), log.key.PublicPem(), out, err);
  return {code, out.str(), err.str()};
}

TEST(AuditVerify, AnIntactLogIsOkWithCounts) {
  Log log(5, 4);
  Ran r = Verify(log.records, log);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "OK: 5 records verified (seq 1 to 5), signed through seq 4; 1 not yet signed\n");
}

TEST(AuditVerify, TamperingNamesTheFirstBadRecord) {
  Log log(5, 5);
  std::vector<std::string> modified = log.records;
  size_t at = modified[2].find("\"allow\"");
  if (at == std::string::npos) at = modified[2].find("\"deny\"");
  ASSERT_NE(at, std::string::npos);
  modified[2][at + 1] = modified[2][at + 1] == 'a' ? 'A' : 'D';  // one byte of record 3
  Ran m = Verify(modified, log);
  EXPECT_EQ(m.code, 1);
  EXPECT_EQ(m.out, "FAILED: record 3: record 3 was modified: its hash does not match\n");

  std::vector<std::string> deleted = log.records;
  deleted.erase(deleted.begin() + 1);
  Ran d = Verify(deleted, log);
  EXPECT_EQ(d.code, 1);
  EXPECT_EQ(d.out, "FAILED: record 2: records 2 to 2 are missing (deleted)\n");

  std::vector<std::string> truncated(log.records.begin(), log.records.end() - 2);
  Ran t = Verify(truncated, log);
  EXPECT_EQ(t.code, 1);
  EXPECT_TRUE(t.out.starts_with("FAILED: record 4: the log is truncated")) << t.out;

  Log other(5, 5);  // a digest signed by another key
  std::ostringstream out, err;
  EXPECT_EQ(VerifyAuditTexts(Log::Lines(log.records), Log::Lines(log.digests),
                             other.key.PublicPem(), out, err),
            1);
  EXPECT_TRUE(out.str().starts_with("FAILED: ")) << out.str();
  std::ostringstream bad_key_out, bad_key_err;
  EXPECT_EQ(VerifyAuditTexts("", "", "not a key", bad_key_out, bad_key_err), 1);
  EXPECT_NE(bad_key_err.str().find("the key"), std::string::npos);
}

// `gpuctl audit verify --file --digests --key` on files, through gpuctl itself.
TEST(AuditVerify, ExportedFilesThroughGpuctl) {
  Log log(4, 4);
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / Cat("gpuctl-audit-", getpid());
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  std::string records = write("records.jsonl", Log::Lines(log.records));
  std::string digests = write("digests.jsonl", Log::Lines(log.digests));
  std::string key = write("key.pem", log.key.PublicPem());
  auto gpuctl = [](std::vector<std::string> args) {
    args.insert(args.begin(), "gpuctl");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::istringstream in;
    std::ostringstream out, err;
    int code = RunGpuctl(static_cast<int>(argv.size()), argv.data(), in, out, err);
    return Ran{code, out.str(), err.str()};
  };
  Ran ok = gpuctl({"audit", "verify", "--file", records, "--digests", digests, "--key", key});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(ok.out.starts_with("OK: 4 records verified")) << ok.out;
  std::string text = Log::Lines(log.records);
  text[text.find("train-2")] = 'T';  // a byte of record 2
  write("records.jsonl", text);
  Ran bad = gpuctl({"audit", "verify", "--file", records, "--digests", digests, "--key", key});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "FAILED: record 2: record 2 was modified: its hash does not match\n");
  EXPECT_EQ(gpuctl({"audit", "verify", "--file", records}).code, kExitUsage);  // needs the rest
  Ran missing = gpuctl({"audit", "verify", "--file", records, "--digests", digests, "--key",
                        (dir / "none.pem").string()});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("--key " + (dir / "none.pem").string() + ": cannot read"),
            std::string::npos)
      << missing.err;
  std::filesystem::remove_all(dir);
}

// A fake server's audit endpoints: records paged by afterSeq and limit, at most `page` an
// answer whatever the limit; like the real server, each GET of records adds a record to the
// log (its own, recorded after the answer).
struct FakeAuditServer {
  Log log{12, 10};
  int64_t page = 1'000'000;
  std::vector<std::string> targets;
  CallFn Call() {
    return [this](std::string_view, const std::string& target,
                  const std::string&) -> absl::StatusOr<api::HttpResponse> {
      targets.push_back(target);
      std::string path = target.substr(kApiRoot.size());
      if (path == "audit/digests") return api::HttpResponse{200, Log::Lines(log.digests)};
      if (path == "audit/key") return api::HttpResponse{200, log.key.PublicPem()};
      if (!path.starts_with("audit/records")) return api::HttpResponse{404, "{}"};
      auto param = [&](const std::string& name) -> int64_t {
        size_t at = path.find(name + "=");
        return at == std::string::npos ? 0 : std::stoll(path.substr(at + name.size() + 1));
      };
      const int64_t after = param("afterSeq");
      const int64_t limit = param("limit") > 0 ? std::min(param("limit"), page) : page;
      std::string body;
      for (int64_t seq = after + 1;
           seq <= static_cast<int64_t>(log.records.size()) && seq <= after + limit; ++seq) {
        body += log.records[seq - 1] + "\n";
      }
      log.Append();
      return api::HttpResponse{200, body};
    };
  }
};

Ran RunAudit(std::vector<std::string> args, FakeAuditServer& server) {
  CLI::App app{"test", "gpuctl"};
  AuditCommands audit(app);
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return {kExitUsage, "", e.what()};
  }
  std::ostringstream out, err;
  int code = audit.Run([&]() -> std::optional<CallFn> { return server.Call(); }, out, err);
  return {code, out.str(), err.str()};
}

// The log grows while gpuctl reads it; reading still ends, once past the newest digest.
TEST(AuditVerify, TheServersLogIsReadAndVerifiedHere) {
  FakeAuditServer s;
  Ran r = RunAudit({"audit", "verify"}, s);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "OK: 12 records verified (seq 1 to 12), signed through seq 10; 2 not yet signed\n");
  std::vector<std::string> want = {
      "/apis/gpucloud/v1/audit/digests",
      "/apis/gpucloud/v1/audit/records?limit=5000",
      "/apis/gpucloud/v1/audit/key",
  };
  EXPECT_EQ(s.targets, want);
  s.log.records[6][s.log.records[6].find("alice")] = 'A';  // a byte of record 7
  Ran bad = RunAudit({"audit", "verify"}, s);
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "FAILED: record 7: record 7 was modified: its hash does not match\n");
}

// A server that answers fewer records than asked for: pages until the newest digest.
TEST(AuditVerify, ShortPagesAreReadOnUpToTheNewestDigest) {
  FakeAuditServer s;
  s.page = 4;
  Ran r = RunAudit({"audit", "verify"}, s);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "OK: 12 records verified (seq 1 to 12), signed through seq 10; 2 not yet signed\n");
  std::vector<std::string> want = {
      "/apis/gpucloud/v1/audit/digests",
      "/apis/gpucloud/v1/audit/records?limit=5000",
      "/apis/gpucloud/v1/audit/records?afterSeq=4&limit=5000",
      "/apis/gpucloud/v1/audit/records?afterSeq=8&limit=5000",
      "/apis/gpucloud/v1/audit/key",
  };
  EXPECT_EQ(s.targets, want);
}

TEST(AuditQuery, PathTableAndJsonLines) {
  EXPECT_EQ(AuditRecordsPath({}), "audit/records");
  EXPECT_EQ(AuditRecordsPath({.user = "alice",
                              .action = "jobs:*",
                              .namespace_ = "team-a",
                              .since = "2025-12-01T20:00:00+01:00",
                              .limit = 10}),
            "audit/records?user=alice&action=jobs%3A%2A&namespace=team-a&since=2025-12-01T20%3A00"
            "%3A00%2B01%3A00&limit=10");
  FakeAuditServer s;
  s.log = Log(3, 0);
  Ran table = RunAudit({"audit", "query", "--user", "alice", "--limit", "3"}, s);
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(s.targets.back(), "/apis/gpucloud/v1/audit/records?user=alice&limit=3");
  EXPECT_EQ(table.out,
            "TIME                        USER             ACTION               RESOURCE          "
            "                   DECISION CODE\n"
            "2025-12-01T14:40:01.008000Z alice            jobs:Create          "
            "gpucloud:job/team-a/train-1          allow    201\n"
            "2025-12-01T14:40:02.008000Z bob              jobs:Create          "
            "gpucloud:job/team-a/train-2          allow    201\n"
            "2025-12-01T14:40:03.008000Z alice            jobs:Create          "
            "gpucloud:job/team-a/train-3          deny     403\n");
  const std::string stored = Log::Lines(s.log.records);  // before this query's own record
  Ran json = RunAudit({"audit", "query", "-o", "json"}, s);
  EXPECT_EQ(json.code, 0);
  EXPECT_EQ(json.out, stored);  // the stored lines, byte for byte
  EXPECT_EQ(RunAudit({"audit", "query", "--limit", "0"}, s).code, kExitUsage);
  EXPECT_EQ(SplitJsonLines("a\r\n\nb"), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace gpucloud::cli
