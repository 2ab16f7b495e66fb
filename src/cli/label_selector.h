// A label selector as `-l` takes it, in the server's syntax (server/rest.cc's labelSelector):
// comma-separated terms "k=v" (or "k==v"), "k!=v", "k" (has the label) and "!k" (lacks it), all
// of which must hold. For selecting on the client where a collection takes no labelSelector
// (secrets), and for apply's objects and prune's candidates. Value type; pure functions.
#ifndef GPUCLOUD_CLI_LABEL_SELECTOR_H_
#define GPUCLOUD_CLI_LABEL_SELECTOR_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::cli {

class LabelSelector {
 public:
  // InvalidArgument naming the bad term ("label selector: bad term \"=x\""); a term's key must
  // be a label key and its value a label value. "" selects everything.
  static absl::StatusOr<LabelSelector> Parse(std::string_view text);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    enum class Op { kEq, kNe, kExists, kAbsent };
    std::string key, value;
    Op op = Op::kEq;
  };
  std::vector<Term> terms_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_LABEL_SELECTOR_H_
