// gpuctl explain RESOURCE[.FIELD.PATH] [--recursive]: a kind's or a field's type, description
// and fields, from the schema compiled into gpuctl (manifest/schema.h), so it works offline,
// and printed as `kubectl explain` prints them from the server's OpenAPI (GROUP, KIND, VERSION,
// FIELD <type>, DESCRIPTION, FIELDS with -required- and enums; fields in name order).
// RESOURCE is a kind, resource, singular or short name ("jobs", "Job", "np"); the path steps
// into lists and maps ("job.spec.tasks.resources.gpu"). An unknown resource or field is an
// error naming it (exit 1). ExplainCommand is thread-compatible (it holds the flags CLI11
// writes); Explain is pure and reentrant.
#ifndef GPUCLOUD_CLI_EXPLAIN_H_
#define GPUCLOUD_CLI_EXPLAIN_H_

#include <iosfwd>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace gpucloud::cli {

// The text for `target`; NotFound naming the unknown resource type or field.
absl::StatusOr<std::string> Explain(std::string_view target, bool recursive);

// Registers `explain` on `app`.
class ExplainCommand {
 public:
  explicit ExplainCommand(CLI::App& app);
  bool parsed() const;
  // Prints the explanation on `out` (kExitOk) or the error on `err` (kExitInvalid).
  int Run(std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* command_;
  std::string target_;
  bool recursive_ = false;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_EXPLAIN_H_
