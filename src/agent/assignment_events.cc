#include "agent/assignment_events.h"

#include <nlohmann/json.hpp>

namespace gpucloud::agent {

int64_t ParseRevision(std::string_view text) {
  if (text.empty() || text.size() > 18) return 0;
  int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

AssignmentEvent ParseAssignmentEvent(std::string_view line) {
  using Json = nlohmann::json;
  AssignmentEvent out;
  Json e = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!e.is_object()) return out;
  auto type = e.find("type");
  auto object = e.find("object");
  if (type == e.end() || !type->is_string() || object == e.end() || !object->is_object())
    return out;
  if (auto meta = object->find("metadata"); meta != object->end() && meta->is_object()) {
    if (auto rv = meta->find("resourceVersion"); rv != meta->end() && rv->is_string()) {
      out.revision = ParseRevision(rv->get_ref<const std::string&>());
    }
    if (auto name = meta->find("name"); name != meta->end() && name->is_string()) {
      out.name = name->get<std::string>();
    }
  }
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "BOOKMARK") {
    out.type = AssignmentEvent::Type::kBookmark;
  } else if (t == "DELETED") {
    out.type = out.name.empty() ? AssignmentEvent::Type::kIgnored : AssignmentEvent::Type::kDeleted;
  } else if (t == "ADDED" || t == "MODIFIED") {
    out.type = AssignmentEvent::Type::kPut;
    absl::StatusOr<api::Assignment> a = api::AssignmentFromJson(object->dump());
    if (a.ok()) {
      out.assignment = std::move(*a);
    } else {
      out.error = std::string(a.status().message());
    }
  }
  return out;
}

}  // namespace gpucloud::agent
