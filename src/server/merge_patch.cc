#include "server/merge_patch.h"

namespace gpucloud::server {

nlohmann::ordered_json MergePatch(const nlohmann::ordered_json& target,
                                  const nlohmann::ordered_json& patch) {
  if (!patch.is_object()) return patch;
  nlohmann::ordered_json out = target.is_object() ? target : nlohmann::ordered_json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      out.erase(key);
    } else {
      auto it = out.find(key);
      out[key] = MergePatch(it == out.end() ? nlohmann::ordered_json() : *it, value);
    }
  }
  return out;
}

}  // namespace gpucloud::server
