#include "core/parse.h"

#include <limits>
#include <utility>

#include "core/text.h"

namespace gpucloud {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses an unsigned decimal "123" or "1.25" and scales it by 10^scale exactly.
// `what` names the kind of value in error messages.
absl::StatusOr<int64_t> ParseScaledDecimal(std::string_view text, int scale,
                                           std::string_view what) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return absl::InvalidArgumentError(Cat("empty ", what));
  if (s.front() == '-') {
    return absl::InvalidArgumentError(Cat(what, " must not be negative, got ", text));
  }
  int64_t value = 0;
  size_t i = 0;
  auto push_digit = [&](char c) -> bool {
    if (value > (kMax - (c - '0')) / 10) return false;
    value = value * 10 + (c - '0');
    return true;
  };
  bool any_digit = false;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    any_digit = true;
    if (!push_digit(s[i])) return absl::InvalidArgumentError(Cat(what, " too large: ", text));
  }
  int decimals = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && IsDigit(s[i]); ++i) {
      any_digit = true;
      if (decimals == scale) {
        if (s[i] != '0') {
          return absl::InvalidArgumentError(
              Cat(what, " has more than ", scale, " decimals: ", text));
        }
        continue;
      }
      ++decimals;
      if (!push_digit(s[i])) return absl::InvalidArgumentError(Cat(what, " too large: ", text));
    }
  }
  if (i != s.size() || !any_digit) {
    return absl::InvalidArgumentError(Cat("not a valid ", what, ": \"", text, "\""));
  }
  for (; decimals < scale; ++decimals) {
    if (value > kMax / 10) return absl::InvalidArgumentError(Cat(what, " too large: ", text));
    value *= 10;
  }
  return value;
}

std::string FormatScaled(int64_t value, int scale, int min_decimals) {
  int64_t unit = 1;
  for (int i = 0; i < scale; ++i) unit *= 10;
  std::string out = Cat(value / unit);
  int64_t frac = value % unit;
  if (frac == 0 && min_decimals == 0) return out;
  std::string digits = std::to_string(frac);
  digits.insert(0, static_cast<size_t>(scale) - digits.size(), '0');
  while (static_cast<int>(digits.size()) > min_decimals && digits.back() == '0') digits.pop_back();
  return Cat(out, ".", digits);
}

}  // namespace

absl::StatusOr<int64_t> ParseMilli(std::string_view text) {
  if (!text.empty() && text.back() == 'm') {
    text.remove_suffix(1);
    return ParseScaledDecimal(text, 0, "quantity");
  }
  return ParseScaledDecimal(text, 3, "quantity");
}

absl::StatusOr<MilliCpu> ParseCpu(std::string_view text) {
  absl::StatusOr<int64_t> milli = ParseMilli(text);
  if (!milli.ok()) return milli.status();
  return MilliCpu(*milli);
}

absl::StatusOr<MiB> ParseMemory(std::string_view text) {
  static constexpr std::pair<std::string_view, int64_t> kSuffixes[] = {
      {"Ki", int64_t{1} << 10}, {"Mi", int64_t{1} << 20},
      {"Gi", int64_t{1} << 30}, {"Ti", int64_t{1} << 40},
      {"Pi", int64_t{1} << 50}, {"k", 1'000},
      {"M", 1'000'000},         {"G", 1'000'000'000},
      {"T", 1'000'000'000'000}, {"P", 1'000'000'000'000'000}};
  int64_t multiplier = 1;
  std::string_view number = text;
  for (const auto& [suffix, mult] : kSuffixes) {
    if (number.size() > suffix.size() && number.substr(number.size() - suffix.size()) == suffix) {
      number.remove_suffix(suffix.size());
      multiplier = mult;
      break;
    }
  }
  // Three decimals are enough for any sensible memory figure ("1.5Gi").
  absl::StatusOr<int64_t> milli = ParseScaledDecimal(number, 3, "memory quantity");
  if (!milli.ok()) {
    return absl::InvalidArgumentError(
        Cat("not a valid memory quantity: \"", text, "\" (use e.g. 512Mi, 16Gi or 80G)"));
  }
  // bytes = milli * multiplier / 1000, computed in 128 bits to avoid overflow.
  __int128 bytes_x1000 = static_cast<__int128>(*milli) * multiplier;
  __int128 mib_x1000 = (bytes_x1000 + (int64_t{1} << 20) - 1) >> 20;  // ceil division
  __int128 mib = (mib_x1000 + 999) / 1000;
  if (mib > kMax) return absl::InvalidArgumentError(Cat("memory quantity too large: ", text));
  return MiB(static_cast<int64_t>(mib));
}

absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  bool all_digits = true;
  for (char c : text) all_digits = all_digits && IsDigit(c);
  if (all_digits) return ParseScaledDecimal(text, 0, "duration");
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start || i == text.size()) {
      return absl::InvalidArgumentError(
          Cat("not a valid duration: \"", text, "\" (use e.g. 90s, 10m, 1h30m, 2d)"));
    }
    absl::StatusOr<int64_t> n = ParseScaledDecimal(text.substr(start, i - start), 0, "duration");
    if (!n.ok()) return n.status();
    int64_t unit = 0;
    switch (text[i]) {
      case 'd':
        unit = 86400;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'm':
        unit = 60;
        break;
      case 's':
        unit = 1;
        break;
      default:
        return absl::InvalidArgumentError(
            Cat("not a valid duration: \"", text, "\" (use e.g. 90s, 10m, 1h30m, 2d)"));
    }
    ++i;
    if (*n > (kMax - total) / unit)
      return absl::InvalidArgumentError(Cat("duration too large: ", text));
    total += *n * unit;
  }
  return total;
}

absl::StatusOr<MicroUsd> ParsePrice(std::string_view text) {
  absl::StatusOr<int64_t> micro = ParseScaledDecimal(text, 6, "price");
  if (!micro.ok()) return micro.status();
  return MicroUsd(*micro);
}

absl::StatusOr<int> ParseCudaVersion(std::string_view text) {
  size_t dot = text.find('.');
  auto bad = [&] {
    return absl::InvalidArgumentError(
        Cat("not a valid CUDA version: \"", text, "\" (use MAJOR.MINOR, e.g. 12.4)"));
  };
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return bad();
  int major = 0;
  int minor = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == dot) continue;
    if (!IsDigit(text[i])) return bad();
    int& part = i < dot ? major : minor;
    part = part * 10 + (text[i] - '0');
    if (part > 99) return bad();
  }
  return major * 1000 + minor * 10;
}

std::string FormatMilli(int64_t milli) {
  if (milli < 0) return Cat("-", FormatScaled(-milli, 3, 0));
  return FormatScaled(milli, 3, 0);
}

std::string FormatMemory(MiB mib) {
  int64_t v = mib.raw();
  if (v != 0 && v % (1024 * 1024) == 0) return Cat(v / (1024 * 1024), "Ti");
  if (v != 0 && v % 1024 == 0) return Cat(v / 1024, "Gi");
  return Cat(v, "Mi");
}

std::string FormatDuration(int64_t seconds) {
  if (seconds == 0) return "0s";
  std::string out;
  static constexpr std::pair<int64_t, char> kUnits[] = {
      {86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
  for (const auto& [unit, c] : kUnits) {
    if (seconds >= unit) {
      out += Cat(seconds / unit, c);
      seconds %= unit;
    }
  }
  return out;
}

std::string FormatPrice(MicroUsd price) { return FormatScaled(price.raw(), 6, 2); }

std::string FormatCudaVersion(int version) {
  return Cat(version / 1000, ".", (version % 1000) / 10);
}

absl::StatusOr<HostPort> ParseHostPort(std::string_view flag, std::string_view text) {
  size_t colon = text.rfind(':');
  int port = -1;
  if (colon != std::string_view::npos && colon + 1 < text.size() && text.size() - colon <= 6) {
    port = 0;
    for (char c : text.substr(colon + 1)) {
      if (c < '0' || c > '9') {
        port = -1;
        break;
      }
      port = port * 10 + (c - '0');
    }
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(Cat(flag, ": \"", text, "\" is not HOST:PORT"));
  }
  return HostPort{std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
}

}  // namespace gpucloud
