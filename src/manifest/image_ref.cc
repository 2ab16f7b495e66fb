#include "manifest/image_ref.h"

#include <regex>

namespace gpucloud::manifest {
namespace {

constexpr size_t kMaxNameLength = 255;

bool Matches(const std::string& s, const std::regex& re) { return std::regex_match(s, re); }

absl::Status CheckDomain(const std::string& domain) {
  static const std::regex kHost(
      "([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])(\\.([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*"
      "[A-Za-z0-9]))*");
  static const std::regex kIpv6("\\[[0-9A-Fa-f:.]+\\]");
  std::string host = domain;
  size_t colon = domain.rfind(':');
  if (colon != std::string::npos && domain.find(']', colon) == std::string::npos) {
    std::string port = domain.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError("the registry's port must be a number");
    }
    host = domain.substr(0, colon);
  }
  if (!Matches(host, kHost) && !Matches(host, kIpv6)) {
    return absl::InvalidArgumentError("the registry must be a host name or address");
  }
  return absl::OkStatus();
}

absl::Status CheckPath(const std::string& path) {
  static const std::regex kComponent("[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*");
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string c = path.substr(start, slash == std::string::npos ? slash : slash - start);
    if (c.empty()) return absl::InvalidArgumentError("empty path component");
    if (!Matches(c, kComponent)) {
      for (char ch : c) {
        if (ch >= 'A' && ch <= 'Z') {
          return absl::InvalidArgumentError("repository must be lowercase");
        }
      }
      return absl::InvalidArgumentError(
          "path components are lowercase letters and digits, separated by '.', '_', '__' or '-'");
    }
    if (slash == std::string::npos) return absl::OkStatus();
    start = slash + 1;
  }
}

absl::Status CheckDigest(const std::string& digest) {
  static const std::regex kDigest(
      "[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}");
  static const std::regex kSha256("sha256:[0-9a-f]{64}");
  if (!Matches(digest, kDigest)) {
    return absl::InvalidArgumentError("the digest must be algorithm:hex, such as sha256:<64 hex>");
  }
  if (digest.starts_with("sha256:") && !Matches(digest, kSha256)) {
    return absl::InvalidArgumentError("a sha256 digest is 64 lowercase hex digits");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImageReference> ParseImageReference(std::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("must not be empty");
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError("must not contain spaces or control characters");
    }
  }
  ImageReference ref;
  std::string rest(text);
  if (size_t at = rest.find('@'); at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest.resize(at);
    if (absl::Status s = CheckDigest(ref.digest); !s.ok()) return s;
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = rest.substr(colon + 1);
    rest.resize(colon);
    static const std::regex kTag("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    if (!Matches(ref.tag, kTag)) {
      return absl::InvalidArgumentError(
          "the tag must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or "
          "'-'");
    }
  }
  if (rest.empty()) return absl::InvalidArgumentError("the repository name is empty");
  if (rest.size() > kMaxNameLength) {
    return absl::InvalidArgumentError("the repository name is longer than 255 characters");
  }
  size_t first = rest.find('/');
  if (first != std::string::npos) {
    std::string head = rest.substr(0, first);
    if (head.find_first_of(".:") != std::string::npos || head == "localhost") {
      ref.domain = head;
      rest = rest.substr(first + 1);
      if (absl::Status s = CheckDomain(ref.domain); !s.ok()) return s;
    }
  }
  if (absl::Status s = CheckPath(rest); !s.ok()) return s;
  ref.path = std::move(rest);
  return ref;
}

}  // namespace gpucloud::manifest
