#include "server/rest_paging.h"

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"

namespace gpucloud::server {

std::string EncodeContinue(const ContinueToken& token) {
  nlohmann::json j{{"p", token.prefix}, {"rv", token.revision}, {"k", token.after_key}};
  return absl::WebSafeBase64Escape(j.dump());
}

std::optional<ContinueToken> DecodeContinue(std::string_view text) {
  std::string raw;
  if (text.empty() ||
      !absl::WebSafeBase64Unescape(absl::string_view(text.data(), text.size()), &raw))
    return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j["p"].is_string() || !j["rv"].is_number_integer() ||
      !j["k"].is_string() || j["rv"].get<int64_t>() < 0) {
    return std::nullopt;
  }
  return ContinueToken{j["p"].get<std::string>(), j["rv"].get<int64_t>(),
                       j["k"].get<std::string>()};
}

}  // namespace gpucloud::server
