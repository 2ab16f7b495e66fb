#include "manifest/json_yaml.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace gpucloud::manifest {
namespace {

using Json = nlohmann::ordered_json;

// True when a plain (unquoted) `s` would be read back as something other than this string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* kWords[] = {"true", "True", "TRUE", "false", "False", "FALSE", "null",
                                 "Null", "NULL", "~",    "yes",   "Yes",   "no",    "No",
                                 "on",   "On",   "off",  "Off",   ".inf",  ".nan",  "-.inf"};
  for (const char* w : kWords) {
    if (s == w) return true;
  }
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end != nullptr && *end == '\0') return true;  // a number, in any of its spellings
  return s.starts_with("0x") || s.starts_with("0o");
}

void Emit(const Json& j, YAML::Emitter& out) {
  switch (j.type()) {
    case Json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, v] : j.items()) {
        out << YAML::Key;
        if (NeedsQuotes(k)) out << YAML::DoubleQuoted;
        out << k << YAML::Value;
        Emit(v, out);
      }
      out << YAML::EndMap;
      return;
    case Json::value_t::array:
      out << YAML::BeginSeq;
      for (const Json& v : j) Emit(v, out);
      out << YAML::EndSeq;
      return;
    case Json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case Json::value_t::null:
      out << YAML::Null;
      return;
    default:  // numbers and booleans: JSON's own spelling is YAML's too
      out << j.dump();
      return;
  }
}

Json FromYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = FromYaml(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& v : n) out.push_back(FromYaml(v));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!" || !NeedsQuotes(s) || s.empty()) return s;  // quoted, or plain text
      if (s == "true" || s == "false") return s == "true";
      if (s == "null" || s == "~") return nullptr;
      Json number = Json::parse(s, nullptr, false);
      return number.is_number() ? number : Json(s);
    }
    default:
      return nullptr;
  }
}

}  // namespace

absl::StatusOr<std::string> JsonToYaml(std::string_view json) {
  Json j = Json::parse(json, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not JSON");
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(j, out);
  return Cat(out.c_str(), "\n");
}

absl::StatusOr<std::string> YamlToJson(std::string_view yaml) {
  try {
    return FromYaml(YAML::Load(std::string(yaml))).dump();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

}  // namespace gpucloud::manifest
