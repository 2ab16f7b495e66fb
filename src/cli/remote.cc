#include "cli/remote.h"

#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "core/object_meta.h"
#include "core/text.h"

namespace gpucloud::cli {

// The message of a Kubernetes Status answer, or the body.
std::string StatusMessage(const api::HttpResponse& r) {
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  return r.body;
}

// A client from the config; on failure says why on `err` and returns nullopt.
std::optional<api::Client> Connect(const std::string& config_flag, std::ostream& err) {
  absl::StatusOr<api::ClientConfig> c = api::LoadClientConfig(api::DefaultConfigPath(config_flag));
  if (!c.ok()) {
    err << "gpuctl: " << c.status().message() << "\n";
    return std::nullopt;
  }
  return api::Client(*c);
}

CallFn ClientCall(const api::Client& client) {
  auto shared = std::make_shared<api::Client>(client);
  return [shared](std::string_view method, const std::string& target, const std::string& body) {
    return shared->Call(method, target, body);
  };
}

std::optional<api::HttpResponse> SendRequest(const CallFn& call, std::string_view method,
                                             const std::string& path, const std::string& body,
                                             std::ostream& err, const std::string& what) {
  absl::StatusOr<api::HttpResponse> r = call(method, path, body);
  std::string prefix = what.empty() ? "gpuctl: " : Cat("gpuctl: ", what, ": ");
  if (!r.ok()) {
    err << prefix << r.status().message() << "\n";
    return std::nullopt;
  }
  if (r->status < 200 || r->status > 299) {
    err << prefix << StatusMessage(*r) << "\n";
    return std::nullopt;
  }
  return *r;
}

std::optional<api::HttpResponse> Send(const api::Client& client, std::string_view method,
                                      const std::string& path, const std::string& body,
                                      std::ostream& err, const std::string& what) {
  return SendRequest([&client](std::string_view m, const std::string& t,
                               const std::string& b) { return client.Call(m, t, b); },
                     method, path, body, err, what);
}

bool NamesAreLabels(const std::vector<std::pair<std::string_view, std::string>>& names,
                    std::ostream& err) {
  for (const auto& [what, value] : names) {
    if (absl::Status s = ValidateDnsLabel(value); !s.ok()) {
      std::string shown;
      for (unsigned char c : value) {
        shown += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, c);
      }
      err << "gpuctl: " << what << " \"" << shown << "\" is not a valid name: a DNS label ("
          << "lower-case letters, digits and '-', starting and ending with a letter or digit, at "
             "most 63 characters)\n";
      return false;
    }
  }
  return true;
}

}  // namespace gpucloud::cli
