// gpuctl's audit-log commands (issue 14; docs/audit.md has the record format):
//   audit verify [--file EXPORT.jsonl --digests D.jsonl --key K.pem]
//       checks the hash chain and the signed digests with server/audit_chain.h's VerifyChain:
//       of an export on disk, or else of the server's log (GET audit/digests, then
//       audit/records paged with afterSeq up to the newest digest and beyond, then audit/key),
//       verified here and not by the server. Prints OK with counts (exit 0) or the first bad
//       record and what is wrong (exit 1).
//   audit query [--user U] [--action A] [-n NS] [--since T] [--until T] [--limit N] [-o json]
//       GET audit/records: a table (time, user, action, resource, decision, code), or the
//       records as JSON lines, as stored.
// The parsing and formatting functions are pure; AuditCommands is thread-compatible (it holds
// the flags CLI11 writes).
#ifndef GPUCLOUD_CLI_AUDIT_COMMANDS_H_
#define GPUCLOUD_CLI_AUDIT_COMMANDS_H_

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/iam_commands.h"
#include "server/audit_chain.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

// The non-empty lines of a JSON-lines text (a trailing '\r' dropped).
std::vector<std::string> SplitJsonLines(std::string_view text);

// The report of VerifyChain as gpuctl prints it: "OK: ..." with counts, or
// "FAILED: record N: what".
std::string FormatVerifyReport(const server::VerifyReport& report);

// The local check of `gpuctl audit verify`: records and digests as JSON lines, the key as PEM
// (a public key, certificate or private key). Writes the report to `out`; exit 0 or 1.
int VerifyAuditTexts(const std::string& records, const std::string& digests,
                     const std::string& key_pem, std::ostream& out, std::ostream& err);

struct AuditQuery {
  std::string user, action, namespace_, since, until;
  int64_t limit = 0;      // 0: the server's default
  int64_t after_seq = 0;  // 0: from the start
};
// "audit/records?user=alice&action=jobs%3ACreate" (percent-encoded, empty fields left out),
// relative to kApiRoot.
std::string AuditRecordsPath(const AuditQuery& q);
// The table of `audit query`: TIME, USER, ACTION, RESOURCE, DECISION, CODE, one row a record
// (a line that is not JSON is shown as such, not skipped).
void PrintAuditTable(const std::vector<std::string>& lines, std::ostream& out);

// Declares `audit verify` and `audit query` on `app` and runs the one parsed. The object must
// outlive app.parse(): CLI11 writes the flags into it.
class AuditCommands {
 public:
  explicit AuditCommands(CLI::App& app);
  AuditCommands(const AuditCommands&) = delete;
  AuditCommands& operator=(const AuditCommands&) = delete;

  bool parsed() const;
  // `connect` is called only when the server is needed (nullopt: it has said why on `err`).
  int Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
          std::ostream& err);

 private:
  struct Flags;
  std::shared_ptr<Flags> flags_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_AUDIT_COMMANDS_H_
