// The daemons' log: one record per line with a UTC timestamp, a level, the component that wrote
// it ("server", "agent"), a message and key=value fields, through spdlog, to stderr by default.
//
//   log::Info("server", "node is Ready", {{"node", name}});
//   text: 2026-12-02T01:02:03.456Z INFO  server: node is Ready node=n1
//   json: {"ts":"2026-12-02T01:02:03.456Z","level":"info","component":"server",
//          "msg":"node is Ready","node":"n1"}
//
// In text, a value with a space, a quote, '=' or a control character is quoted and escaped
// (logfmt), and control characters in the message are escaped, so a record is always one line.
// In json, a field whose key is ts, level, component or msg is written as "field.KEY".
// Invalid UTF-8 is replaced (U+FFFD) in json. Messages have no trailing period.
//
// Configure once at daemon start (before threads start; the default is info, text, stderr).
// Logging is thread-safe: records from several threads never interleave within a line, and
// Configure may run concurrently with logging (a record goes to the old or the new sink).
#ifndef GPUCLOUD_CORE_LOG_H_
#define GPUCLOUD_CORE_LOG_H_

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpucloud::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// One key=value field. The value is copied; integers are written as json numbers.
struct Field {
  Field(std::string_view k, const char* v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, absl::string_view v) : key(k), value(v.data(), v.size()) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), number(true) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Field(std::string_view k, T v)
      : key(k), value(std::to_string(v)), number(true) {}

  std::string_view key;
  std::string value;
  bool number = false;  // a json literal (number or boolean), unquoted in json
};
using Fields = std::initializer_list<Field>;

struct Options {
  Level level = Level::kInfo;
  Format format = Format::kText;
  // Where records go; nullptr: stderr. Must outlive the next Configure (tests).
  std::ostream* out = nullptr;
};

// Replaces the configuration of the process's log.
void Configure(const Options& options);

// Whether a record of `level` would be written.
bool Enabled(Level level);

// Writes one record when `level` is enabled.
void Write(Level level, std::string_view component, std::string_view msg, Fields fields = {});

inline void Trace(std::string_view c, std::string_view m, Fields f = {}) {
  Write(Level::kTrace, c, m, f);
}
inline void Debug(std::string_view c, std::string_view m, Fields f = {}) {
  Write(Level::kDebug, c, m, f);
}
inline void Info(std::string_view c, std::string_view m, Fields f = {}) {
  Write(Level::kInfo, c, m, f);
}
inline void Warn(std::string_view c, std::string_view m, Fields f = {}) {
  Write(Level::kWarn, c, m, f);
}
inline void Error(std::string_view c, std::string_view m, Fields f = {}) {
  Write(Level::kError, c, m, f);
}

// One record as a line (without the newline) in `format`. Pure; for Write and for tests.
std::string FormatRecord(Format format, absl::Time time, Level level, std::string_view component,
                         std::string_view msg, Fields fields);

// "trace", "debug", "info", "warn", "error".
std::string_view LevelName(Level level);

// The values of --log-level and --log-format; InvalidArgument naming the flag and the choices
// otherwise.
absl::StatusOr<Level> ParseLevel(std::string_view text);
absl::StatusOr<Format> ParseFormat(std::string_view text);
absl::StatusOr<Options> OptionsFromFlags(std::string_view level, std::string_view format);

}  // namespace gpucloud::log

#endif  // GPUCLOUD_CORE_LOG_H_
