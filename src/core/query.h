// The one reader of request targets ("/path?k=v&k2") for every daemon's HTTP server: the path
// and the query parameters, percent-decoded (RFC 3986), and query integers read strictly (a
// value that is not a number is an error for the caller to answer 400 naming the parameter,
// never 0). Stateless functions; thread-safe.
#ifndef GPUCLOUD_CORE_QUERY_H_
#define GPUCLOUD_CORE_QUERY_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace gpucloud {

// "%41" -> "A"; a '%' not followed by two hex digits is kept as it is. In a query parameter
// ('in_path' false) '+' is a space, as HTML forms write it. In a path ('in_path' true) '+' is
// itself and "%2F" stays as it is: a decoded '/' would make one segment two (a job named
// "a%2Fevents" would read job a's events); a name holding it is then not a DNS label.
std::string PercentDecode(std::string_view s, bool in_path = false);

struct RequestTarget {
  std::string path;  // percent-decoded as a path
  // Names and values percent-decoded; a name without '=' has the value ""; of a name given
  // twice, the last value.
  std::map<std::string, std::string> query;
};
RequestTarget ParseRequestTarget(std::string_view target);

// A query parameter's value as a non-negative decimal integer of at most 18 digits and at most
// `max`; nullopt for anything else ("", "abc", "-1", "+1", "1e3", 19 digits or more, or over
// `max`). Never wraps: 4294967297 is not 1.
std::optional<int64_t> ParseQueryInt(std::string_view value,
                                     int64_t max = std::numeric_limits<int64_t>::max());

}  // namespace gpucloud

#endif  // GPUCLOUD_CORE_QUERY_H_
