#include "cli/usage.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/gpuctl.h"
#include "cli/remote.h"
#include "cli/resources.h"
#include "core/text.h"

namespace gpucloud::cli {

std::optional<int> RefuseUnknownCommand(const CLI::App& app, int argc, const char* const* argv,
                                        std::ostream& err) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") return std::nullopt;
    if (arg.starts_with("-")) {
      // An option of gpuctl itself that takes a value in the next argument (--config FILE).
      if (arg.find('=') == std::string_view::npos) {
        const CLI::Option* o = app.get_option_no_throw(std::string(arg));
        if (o != nullptr && o->get_type_size() != 0) ++i;
      }
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(std::string(arg))) return std::nullopt;
      names.push_back(sub->get_name());
    }
    err << "gpuctl: " << UnknownMessage("command", arg, "gpuctl", names) << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

int Version(const std::optional<api::Client>& client, bool client_only, std::ostream& out,
            std::ostream& err) {
  out << "Client Version: " << kClientVersion << "\n";
  if (client_only) return kExitOk;
  if (!client) return kExitInvalid;  // Connect said why
  std::optional<api::HttpResponse> r = Send(*client, "GET", "/version", "", err, "server version");
  if (!r) return kExitInvalid;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("gitVersion") || !j["gitVersion"].is_string()) {
    err << "gpuctl: server version: the answer of /version has no gitVersion\n";
    return kExitInvalid;
  }
  out << "Server Version: " << j["gitVersion"].get<std::string>() << "\n";
  return kExitOk;
}

}  // namespace gpucloud::cli
