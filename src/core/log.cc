#include "core/log.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "core/text.h"

namespace gpucloud::log {
namespace {

// The process's log: the level (read first, so a filtered record costs one load) and the
// spdlog logger that writes the formatted lines (its sink serialises them).
struct State {
  std::atomic<Level> level{Level::kInfo};
  std::atomic<Format> format{Format::kText};
  std::atomic<std::shared_ptr<spdlog::logger>> logger;
};

std::shared_ptr<spdlog::logger> NewLogger(std::ostream* out) {
  spdlog::sink_ptr sink;
  if (out == nullptr) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out, /*force_flush=*/true);
  }
  // The line is formatted here (FormatRecord); spdlog adds only the newline.
  sink->set_formatter(
      std::make_unique<spdlog::pattern_formatter>("%v", spdlog::pattern_time_type::utc, "\n"));
  auto logger = std::make_shared<spdlog::logger>("gpucloud", std::move(sink));
  logger->set_level(spdlog::level::trace);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

// Never destroyed: threads may log while the process exits.
State& GlobalState() {
  static State* state = [] {
    auto* s = new State;
    s->logger.store(NewLogger(nullptr));
    return s;
  }();
  return *state;
}

spdlog::level::level_enum SpdlogLevel(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// The level as text shows it: upper case, padded to five columns.
std::string_view TextLevel(Level level) {
  switch (level) {
    case Level::kTrace:
      return "TRACE";
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO ";
    case Level::kWarn:
      return "WARN ";
    case Level::kError:
      return "ERROR";
  }
  return "INFO ";
}

// Control characters as escapes, so that a record stays on one line; `quote` escapes '"' and
// '\\' too (inside a quoted value).
void AppendEscaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else if (quote && (c == '"' || c == '\\')) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
}

// A logfmt value: bare when it has no space, quote, '=', backslash or control character.
void AppendValue(std::string& out, std::string_view v) {
  bool bare = !v.empty();
  for (char c : v) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '"' || c == '=' || c == '\\') bare = false;
  }
  if (bare) {
    out += v;
    return;
  }
  out += '"';
  AppendEscaped(out, v, /*quote=*/true);
  out += '"';
}

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool Reserved(std::string_view key) {
  return key == "ts" || key == "level" || key == "component" || key == "msg";
}

}  // namespace

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kTrace:
      return "trace";
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

std::string FormatRecord(Format format, absl::Time time, Level level, std::string_view component,
                         std::string_view msg, Fields fields) {
  std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  std::string out;
  if (format == Format::kText) {
    out = Cat(ts, " ", TextLevel(level), " ", component, ": ");
    AppendEscaped(out, msg, /*quote=*/false);
    for (const Field& f : fields) {
      out += Cat(" ", f.key, "=");
      AppendValue(out, f.value);
    }
    return out;
  }
  out = Cat("{\"ts\":", JsonString(ts), ",\"level\":", JsonString(LevelName(level)),
            ",\"component\":", JsonString(component), ",\"msg\":", JsonString(msg));
  for (const Field& f : fields) {
    out += Cat(",", JsonString(Reserved(f.key) ? Cat("field.", f.key) : std::string(f.key)), ":",
               f.number ? f.value : JsonString(f.value));
  }
  out += "}";
  return out;
}

void Configure(const Options& options) {
  State& s = GlobalState();
  s.logger.store(NewLogger(options.out));
  s.format.store(options.format);
  s.level.store(options.level);
}

bool Enabled(Level level) { return level >= GlobalState().level.load(std::memory_order_relaxed); }

void Write(Level level, std::string_view component, std::string_view msg, Fields fields) {
  if (!Enabled(level)) return;
  State& s = GlobalState();
  std::string line = FormatRecord(s.format.load(), absl::Now(), level, component, msg, fields);
  s.logger.load()->log(SpdlogLevel(level), spdlog::string_view_t(line.data(), line.size()));
}

absl::StatusOr<Level> ParseLevel(std::string_view text) {
  for (Level l : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    if (text == LevelName(l)) return l;
  }
  return absl::InvalidArgumentError(
      Cat("--log-level: \"", text, "\" is not one of trace, debug, info, warn, error"));
}

absl::StatusOr<Format> ParseFormat(std::string_view text) {
  if (text == "text") return Format::kText;
  if (text == "json") return Format::kJson;
  return absl::InvalidArgumentError(Cat("--log-format: \"", text, "\" is not one of text, json"));
}

absl::StatusOr<Options> OptionsFromFlags(std::string_view level, std::string_view format) {
  absl::StatusOr<Level> l = ParseLevel(level);
  if (!l.ok()) return l.status();
  absl::StatusOr<Format> f = ParseFormat(format);
  if (!f.ok()) return f.status();
  return Options{.level = *l, .format = *f};
}

}  // namespace gpucloud::log
