#include "core/object_meta.h"

#include "core/text.h"

namespace gpucloud {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// Name part of a label key or a label value: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
bool IsQualifiedNamePart(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateDnsLabel(std::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError("must not be empty");
  if (value.size() > 63) {
    return absl::InvalidArgumentError(Cat("must be at most 63 characters, got ", value.size()));
  }
  bool ok = IsLowerAlnum(value.front()) && IsLowerAlnum(value.back());
  for (char c : value) ok = ok && (IsLowerAlnum(c) || c == '-');
  if (!ok) {
    return absl::InvalidArgumentError(Cat(
        "must consist of lower-case letters, digits and '-', and start and end with a letter or "
        "digit, got \"",
        value, "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelKey(std::string_view key) {
  std::string_view name = key;
  if (size_t slash = key.find('/'); slash != std::string_view::npos) {
    if (!IsDnsSubdomain(key.substr(0, slash))) {
      return absl::InvalidArgumentError(
          Cat("label key prefix must be a DNS subdomain, got \"", key, "\""));
    }
    name = key.substr(slash + 1);
  }
  if (!IsQualifiedNamePart(name)) {
    return absl::InvalidArgumentError(Cat(
        "label key must be at most 63 characters of letters, digits, '-', '_' and '.', starting "
        "and ending with a letter or digit, got \"",
        key, "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelValue(std::string_view value) {
  if (value.empty() || IsQualifiedNamePart(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(
      "label value must be at most 63 characters of letters, digits, '-', '_' and '.', starting "
      "and ending with a letter or digit, got \"",
      value, "\""));
}

absl::Status ValidateSecretKey(std::string_view key) {
  const bool chars = !key.empty() && key.size() <= 253 &&
                     key.find_first_not_of(
                         "-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789") == std::string_view::npos;
  if (!chars || key == "." || key == "..") {
    return absl::InvalidArgumentError(
        Cat("a key must be 1 to 253 of [-._a-zA-Z0-9], not . or .., got \"", key, "\""));
  }
  return absl::OkStatus();
}

}  // namespace gpucloud
