#include "core/query.h"

#include "core/text.h"

namespace gpucloud {
namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PercentDecode(std::string_view s, bool in_path) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      char c = static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      if (in_path && c == '/') {
        out += s.substr(i, 3);
      } else {
        out += c;
      }
      i += 2;
    } else {
      out += s[i] == '+' && !in_path ? ' ' : s[i];
    }
  }
  return out;
}

RequestTarget ParseRequestTarget(std::string_view target) {
  RequestTarget out;
  size_t q = target.find('?');
  out.path = PercentDecode(target.substr(0, q), /*in_path=*/true);
  if (q == std::string_view::npos) return out;
  for (const std::string& pair : SplitAny(target.substr(q + 1), "&")) {
    size_t eq = pair.find('=');
    out.query[PercentDecode(std::string_view(pair).substr(0, eq))] =
        eq == std::string::npos ? "" : PercentDecode(std::string_view(pair).substr(eq + 1));
  }
  return out;
}

std::optional<int64_t> ParseQueryInt(std::string_view value, int64_t max) {
  if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != value.npos) {
    return std::nullopt;
  }
  int64_t n = 0;
  for (char c : value) n = n * 10 + (c - '0');
  if (n > max) return std::nullopt;
  return n;
}

}  // namespace gpucloud
