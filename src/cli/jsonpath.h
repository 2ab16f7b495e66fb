// kubectl's `-o jsonpath=TEMPLATE`, a small but real subset of it: literal text, field paths
// (`{.metadata.name}`, `{.metadata.labels['team']}`, `$` or `@` first), `[N]` and `[*]` on
// arrays (and `[*]` on objects: their values), string literals (`{"\n"}`, with \n \t \\ \"),
// and `{range PATH}...{end}`, inside which paths start at each element. Several values of
// one path are joined by spaces, as kubectl does; a missing field prints nothing
// (kubectl's default --allow-missing-template-keys). Filters (`[?()]`), slices, unions and
// recursive descent (`..`) are refused at Parse, naming what is not supported.
// A parsed JsonPath is immutable and may be shared between threads.
#ifndef GPUCLOUD_CLI_JSONPATH_H_
#define GPUCLOUD_CLI_JSONPATH_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::cli {

class JsonPath {
 public:
  // InvalidArgument naming the offending part of `text`.
  static absl::StatusOr<JsonPath> Parse(std::string_view text);
  std::string Execute(const nlohmann::json& data) const;

  struct Step {
    enum class Kind { kField, kIndex, kAll } kind;
    std::string field;
    long index = 0;
  };
  struct Node {
    enum class Kind { kText, kPath, kRange } kind;
    std::string text;         // kText
    std::vector<Step> steps;  // kPath, kRange
    std::vector<Node> body;   // kRange
  };

 private:
  std::vector<Node> nodes_;
};

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_JSONPATH_H_
