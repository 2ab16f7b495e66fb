// Small string helpers on std::string_view. (Debian's Abseil is built without std::string_view
// support, so absl::StrCat and friends do not accept it; formatting goes through fmt.)
// Stateless; thread-safe.
#ifndef GPUCLOUD_CORE_TEXT_H_
#define GPUCLOUD_CORE_TEXT_H_

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpucloud {

std::string ToLower(std::string_view s);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
// Splits on any of `separators`, dropping empty pieces.
std::vector<std::string> SplitAny(std::string_view s, std::string_view separators);
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
// Offset of the first byte that is not part of valid UTF-8 (overlong forms, surrogates and code
// points above U+10FFFF count as invalid), or std::string_view::npos.
size_t FirstInvalidUtf8(std::string_view s);

// "1 GPU", "4 GPUs".
std::string Plural(int64_t n, std::string_view one, std::string_view many);

// Concatenates the printed forms of its arguments: Cat("got ", 3) == "got 3".
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

}  // namespace gpucloud

#ifndef ABSL_USES_STD_STRING_VIEW
// Lets fmt (and so Cat) print absl::string_view, e.g. absl::Status::message().
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
#endif

#endif  // GPUCLOUD_CORE_TEXT_H_
