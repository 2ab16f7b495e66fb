#include "cli/secret_commands.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "cli/cluster_commands.h"
#include "cli/gpuctl.h"
#include "cli/resources.h"
#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/json_yaml.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// The length of the UTF-8 sequence at s[i], or 0 when it is not valid UTF-8 (as Go's
// utf8.DecodeRuneInString: overlong forms, surrogates and code points past U+10FFFF are not).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
  if (b > 0xF4 || n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  const unsigned char second = byte(i + 1);
  if (b == 0xE0 && second < 0xA0) return 0;  // overlong
  if (b == 0xED && second > 0x9F) return 0;  // a surrogate
  if (b == 0xF0 && second < 0x90) return 0;  // overlong
  if (b == 0xF4 && second > 0x8F) return 0;  // past U+10FFFF
  return n;
}

// A JSON string as Go's encoding/json writes it (escapeHTML on, as json.Marshal).
std::string GoJsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            out += fmt::format("\\u{:04x}", c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    const std::string_view rune = s.substr(i, n);
    if (rune == "\xE2\x80\xA8" || rune == "\xE2\x80\xA9") {
      out += rune == "\xE2\x80\xA8" ? "\\u2028" : "\\u2029";
    } else {
      out += rune;
    }
    i += n;
  }
  return out + "\"";
}

// Splits "KEY=REST" at the first '='; nullopt without one.
std::optional<std::pair<std::string, std::string>> SplitAtEquals(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) return std::nullopt;
  return std::make_pair(arg.substr(0, eq), arg.substr(eq + 1));
}

absl::Status CheckKey(std::string_view flag, const std::string& key) {
  if (ValidateSecretKey(key).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(flag, ": \"", key,
                                        "\" is not a valid key: a key is 1 to 253 of "
                                        "[-._a-zA-Z0-9], not . or .."));
}

// Adds `key` to `values` once: InvalidArgument naming both flags when it is there already.
absl::Status AddValue(std::string_view flag, const std::string& key, std::string value,
                      std::map<std::string, std::pair<std::string, std::string>>& values) {
  if (absl::Status s = CheckKey(flag, key); !s.ok()) return s;
  auto [it, added] = values.try_emplace(key, std::string(flag), std::move(value));
  if (!added) {
    return absl::InvalidArgumentError(
        Cat("key \"", key, "\" is given twice (", it->second.first, " and ", flag, ")"));
  }
  return absl::OkStatus();
}

OrderedJson SecretObject(const std::string& name, const std::string& ns, const std::string& type) {
  return {{"apiVersion", "gpucloud/v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"type", type}};
}

const Json& FieldOf(const Json& j, const char* key) {
  static const Json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}
std::string StrOf(const Json& j, const char* key, const std::string& otherwise = "") {
  const Json& v = FieldOf(j, key);
  return v.is_string() ? v.get<std::string>() : otherwise;
}

// "5m" since an RFC 3339 time; "<unknown>" when it is not one (as kubectl).
std::string AgeOf(const std::string& rfc3339, int64_t now_ms) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error)) return "<unknown>";
  return HumanDuration((now_ms - absl::ToUnixMillis(t)) / 1000);
}

const ResourceType& SecretType() { return *FindResourceType("secrets"); }

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(Cat(path, " is a directory: name each file"));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(Cat("cannot read ", path, ": ", std::strerror(errno)));
  std::string bytes(kMaxSecretFileBytes + 1, '\0');  // one past the limit: a huge file is refused
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (f.bad()) return absl::DataLossError(Cat("cannot read ", path, ": ", std::strerror(errno)));
  bytes.resize(static_cast<size_t>(f.gcount()));
  if (bytes.size() > kMaxSecretFileBytes) {
    return absl::InvalidArgumentError(
        Cat(path, " is larger than ", kMaxSecretFileBytes, " bytes, the most a Secret holds"));
  }
  return bytes;
}

absl::StatusOr<nlohmann::ordered_json> GenericSecretBody(const GenericSecretOptions& o,
                                                         const ReadFileFn& read) {
  // key -> (the flag that gave it, the value)
  std::map<std::string, std::pair<std::string, std::string>> values;
  for (size_t i = 0; i < o.literals.size(); ++i) {
    std::optional<std::pair<std::string, std::string>> kv = SplitAtEquals(o.literals[i]);
    if (!kv || kv->first.empty()) {  // the argument may be the value itself: never shown
      return absl::InvalidArgumentError(
          Cat("--from-literal #", i + 1,
              kv ? " has no KEY before '='" : " is not KEY=VALUE: it has no '='"));
    }
    if (absl::Status s = AddValue("--from-literal", kv->first, kv->second, values); !s.ok()) {
      return s;
    }
  }
  for (const std::string& arg : o.files) {
    std::optional<std::pair<std::string, std::string>> kv = SplitAtEquals(arg);
    std::string key, path = kv ? kv->second : arg;
    if (kv && kv->first.empty()) {
      return absl::InvalidArgumentError(Cat("--from-file=", arg, ": no KEY before '='"));
    }
    if (path.empty()) return absl::InvalidArgumentError(Cat("--from-file=", arg, ": no PATH"));
    key = kv ? kv->first : std::filesystem::path(path).filename().string();
    if (!kv) {
      if (absl::Status s = CheckKey("--from-file", key); !s.ok()) {
        return absl::InvalidArgumentError(
            Cat(s.message(), "; name it with --from-file=KEY=", path));
      }
    }
    absl::StatusOr<std::string> bytes = read(path);
    if (!bytes.ok())
      return absl::InvalidArgumentError(Cat("--from-file: ", bytes.status().message()));
    if (absl::Status s = AddValue("--from-file", key, *std::move(bytes), values); !s.ok()) return s;
  }
  OrderedJson body = SecretObject(o.name, o.ns, o.type.empty() ? "Opaque" : o.type);
  OrderedJson data = OrderedJson::object();
  for (const auto& [key, flag_and_value] : values) {
    data[key] = absl::Base64Escape(flag_and_value.second);
  }
  body["data"] = std::move(data);
  return body;
}

std::string DockerConfigJson(const std::string& server, const std::string& username,
                             const std::string& password, const std::string& email) {
  std::vector<std::string> fields;
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) fields.push_back(Cat("\"", name, "\":", GoJsonString(value)));
  };
  add("username", username);
  add("password", password);
  add("email", email);
  add("auth", absl::Base64Escape(Cat(username, ":", password)));
  return Cat("{\"auths\":{", GoJsonString(server), ":{", Join(fields, ","), "}}}");
}

absl::StatusOr<nlohmann::ordered_json> DockerRegistrySecretBody(const DockerRegistryOptions& o) {
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"--docker-server", &o.server},
        {"--docker-username", &o.username},
        {"--docker-password", &o.password}}) {
    if (value->empty()) return absl::InvalidArgumentError(Cat(flag, " is required"));
  }
  OrderedJson body = SecretObject(o.name, o.ns, std::string(kSecretTypeDockerConfigJson));
  body["data"] = {
      {std::string(kDockerConfigJsonKey),
       absl::Base64Escape(DockerConfigJson(o.server, o.username, o.password, o.email))}};
  return body;
}

void PrintSecretsTable(const std::vector<nlohmann::json>& secrets, bool with_namespace,
                       int64_t now_ms, std::ostream& out) {
  // kubectl's tabwriter: each column as wide as its widest cell, then three spaces.
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAME", "TYPE", "DATA", "AGE"});
  if (with_namespace) rows[0].insert(rows[0].begin(), "NAMESPACE");
  for (const Json& s : secrets) {
    const Json& meta = FieldOf(s, "metadata");
    const Json& data = FieldOf(FieldOf(s, "status"), "data");
    std::vector<std::string> row = {StrOf(meta, "name", "?"), StrOf(s, "type", "Opaque"),
                                    std::to_string(data.is_object() ? data.size() : 0),
                                    AgeOf(StrOf(meta, "creationTimestamp"), now_ms)};
    if (with_namespace) row.insert(row.begin(), StrOf(meta, "namespace"));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c + 1 < row.size(); ++c)
      line += fmt::format("{:<{}}", row[c], widths[c] + 3);
    out << line << row.back() << "\n";
  }
}

void PrintSecretDescription(const nlohmann::json& secret, std::ostream& out) {
  const Json& meta = FieldOf(secret, "metadata");
  out << "Name:         " << StrOf(meta, "name") << "\n"
      << "Namespace:    " << StrOf(meta, "namespace") << "\n";
  const Json& labels = FieldOf(meta, "labels");
  if (!labels.is_object() || labels.empty()) {
    out << "Labels:       <none>\n";
  } else {
    bool first = true;
    for (const auto& [k, v] : labels.items()) {
      out << (first ? "Labels:       " : "              ") << k << "="
          << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
      first = false;
    }
  }
  out << "\nType:  " << StrOf(secret, "type", "Opaque") << "\n\nData\n====\n";
  const Json& data = FieldOf(FieldOf(secret, "status"), "data");
  if (!data.is_object()) return;
  for (const auto& [key, info] : data.items()) {
    const Json& bytes = FieldOf(info, "bytes");
    out << key << ":  " << (bytes.is_number_integer() ? bytes.get<int64_t>() : 0) << " bytes\n";
  }
}

int DescribeSecret(const CallFn& call, const std::string& ns, const std::string& name,
                   std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r =
      SendRequest(call, "GET", Cat(SecretType().Collection(ns), "/", name), "", err);
  if (!r) return kExitInvalid;
  Json secret = Json::parse(r->body, nullptr, false);
  if (!secret.is_object()) {
    err << "gpuctl: the server's answer is not a Secret\n";
    return kExitInvalid;
  }
  PrintSecretDescription(secret, out);
  return kExitOk;
}

struct SecretCommands::Flags {
  CLI::App *generic = nullptr, *docker = nullptr;
  GenericSecretOptions generic_options{.ns = std::string(kDefaultNamespace)};
  DockerRegistryOptions docker_options{.ns = std::string(kDefaultNamespace)};
  bool dry_run = false;
};

SecretCommands::SecretCommands(CLI::App& create) : flags_(std::make_shared<Flags>()) {
  Flags& f = *flags_;
  CLI::App* secret = create.add_subcommand(
      "secret", "A Secret jobs can read: create secret generic|docker-registry NAME");
  secret->require_subcommand(1);
  GenericSecretOptions& g = f.generic_options;
  f.generic = secret->add_subcommand(
      "generic",
      "create secret generic NAME [--from-literal=KEY=VALUE]... [--from-file=[KEY=]PATH]...");
  f.generic->add_option("name", g.name, "NAME")->required();
  f.generic->add_option("-n,--namespace", g.ns, "namespace");
  f.generic->add_option("--from-literal", g.literals, "KEY=VALUE: a value given here (repeatable)")
      ->allow_extra_args(false);
  f.generic
      ->add_option("--from-file", g.files,
                   "[KEY=]PATH: a file's bytes, under KEY or the file's name (repeatable)")
      ->allow_extra_args(false);
  f.generic->add_option("--type", g.type, "the Secret's type (default Opaque)");
  f.generic->add_flag("--dry-run", f.dry_run, "print the Secret instead of creating it");
  DockerRegistryOptions& d = f.docker_options;
  f.docker = secret->add_subcommand(
      "docker-registry",
      "An image pull secret: create secret docker-registry NAME --docker-server=HOST[:PORT] "
      "--docker-username=U --docker-password=P");
  f.docker->add_option("name", d.name, "NAME")->required();
  f.docker->add_option("-n,--namespace", d.ns, "namespace");
  f.docker->add_option("--docker-server", d.server,
                       "the registry, HOST[:PORT] (default https://index.docker.io/v1/)");
  f.docker->add_option("--docker-username", d.username, "the user name")->required();
  f.docker->add_option("--docker-password", d.password, "the password or token")->required();
  f.docker->add_option("--docker-email", d.email, "an email address (optional)");
  f.docker->add_flag("--dry-run", f.dry_run, "print the Secret instead of creating it");
}

bool SecretCommands::parsed() const {
  return flags_->generic->parsed() || flags_->docker->parsed();
}

int SecretCommands::Run(const std::function<std::optional<CallFn>()>& connect, std::ostream& out,
                        std::ostream& err) {
  const Flags& f = *flags_;
  const bool generic = f.generic->parsed();
  const std::string& name = generic ? f.generic_options.name : f.docker_options.name;
  const std::string& ns = generic ? f.generic_options.ns : f.docker_options.ns;
  if (!NamesAreLabels({{"namespace", ns}, {"NAME", name}}, err)) return kExitUsage;
  const char* context =
      generic ? "gpuctl create secret generic" : "gpuctl create secret docker-registry";
  absl::StatusOr<OrderedJson> body = generic ? GenericSecretBody(f.generic_options, ReadSecretFile)
                                             : DockerRegistrySecretBody(f.docker_options);
  if (!body.ok()) {
    err << context << ": " << body.status().message() << "\n";
    return kExitInvalid;
  }
  if (f.dry_run) {
    absl::StatusOr<std::string> yaml = manifest::JsonToYaml(body->dump());
    out << (yaml.ok() ? *yaml : body->dump(2) + "\n");
    return kExitOk;
  }
  std::optional<CallFn> call = connect();
  if (!call) return kExitInvalid;
  const std::string what = Cat("secret/", name);
  if (!SendRequest(*call, "POST", SecretType().Collection(ns), body->dump(), err, what)) {
    return kExitInvalid;
  }
  out << what << " created\n";
  return kExitOk;
}

}  // namespace gpucloud::cli
