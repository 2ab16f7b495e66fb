#include "cli/gpuctl.h"

#include <CLI/CLI.hpp>
#include <istream>
#include <ostream>

#include "cli/manifest_files.h"
#include "core/gpu_catalog.h"
#include "core/parse.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

void PrintDiagnostics(const LoadedManifests& loaded, std::ostream& err) {
  for (const manifest::Diagnostic& d : loaded.warnings) err << d.ToString() << "\n";
  for (const manifest::Diagnostic& d : loaded.errors) err << d.ToString() << "\n";
}

int Validate(const std::vector<std::string>& files, std::istream& in, std::ostream& out,
             std::ostream& err) {
  LoadedManifests loaded = LoadManifests(files, in);
  PrintDiagnostics(loaded, err);
  for (const LoadedManifests::File& file : loaded.files) {
    if (!file.valid) {
      out << file.name << ": invalid\n";
      continue;
    }
    size_t n = file.objects.size();
    out << file.name << ": valid (" << n << (n == 1 ? " object" : " objects") << ")\n";
    for (size_t index : file.objects) {
      const manifest::Manifest& m = loaded.manifests[index];
      std::string from;
      if (m.source_api_version != manifest::kApiVersion) {
        from = Cat(" [from ", m.source_api_version, " ", m.source_kind, "]");
      }
      out << "  " << manifest::Summarize(m.object) << from << "\n";
    }
  }
  if (!loaded.errors.empty()) {
    err << loaded.errors.size() << (loaded.errors.size() == 1 ? " error" : " errors") << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

int Convert(const std::vector<std::string>& files, const std::string& format, std::istream& in,
            std::ostream& out, std::ostream& err) {
  LoadedManifests loaded = LoadManifests(files, in);
  PrintDiagnostics(loaded, err);
  if (!loaded.errors.empty()) return kExitInvalid;  // print nothing rather than part
  if (format == "json") {
    if (loaded.manifests.size() == 1) {
      out << manifest::ToJson(loaded.manifests[0].object);
      return kExitOk;
    }
    // Several objects: a Kubernetes-style List, which gpuctl reads back.
    out << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
    for (size_t i = 0; i < loaded.manifests.size(); ++i) {
      std::string json = manifest::ToJson(loaded.manifests[i].object);
      json.pop_back();  // trailing newline
      std::string indented = "    ";
      for (char c : json) {
        indented += c;
        if (c == '\n') indented += "    ";
      }
      out << indented << (i + 1 < loaded.manifests.size() ? ",\n" : "\n");
    }
    out << "  ]\n}\n";
    return kExitOk;
  }
  for (size_t i = 0; i < loaded.manifests.size(); ++i) {
    if (i > 0) out << "---\n";
    out << manifest::ToYaml(loaded.manifests[i].object);
  }
  return kExitOk;
}

// The GPU catalog as a table: what users may name in manifests.
int Catalog(std::ostream& out) {
  out << fmt::format("{:<12} {:>8} {:<7} {:>4} {:>6} {:>8}  {}\n", "TYPE", "MEMORY", "ARCH", "CC",
                     "SPEED", "$/GPU-H", "MIG PROFILES");
  for (const GpuType& t : GpuCatalog::Default().types()) {
    std::vector<std::string> profiles;
    for (const MigProfile& p : t.mig_profiles) profiles.push_back(p.name);
    out << fmt::format("{:<12} {:>8} {:<7} {:>4} {:>6} {:>8}  {}\n", t.name, FormatMemory(t.memory),
                       GpuArchName(t.arch),
                       Cat(t.compute_capability / 10, ".", t.compute_capability % 10),
                       FormatMilli(t.relative_speed_milli), FormatPrice(t.on_demand_price_per_hour),
                       profiles.empty() ? "-" : Join(profiles, " "));
  }
  return kExitOk;
}

}  // namespace

int RunGpuctl(int argc, const char* const* argv, std::istream& in, std::ostream& out,
              std::ostream& err) {
  CLI::App app{"gpuctl: the gpucloud command-line tool", "gpuctl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuctl 0.1.0");

  std::vector<std::string> validate_files;
  CLI::App* validate =
      app.add_subcommand("validate", "Check manifests offline and print what each object asks for");
  validate->add_option("-f,--filename", validate_files, "Manifest file, directory, or - for stdin")
      ->required();

  std::vector<std::string> convert_files;
  std::string format = "yaml";
  CLI::App* convert =
      app.add_subcommand("convert", "Print manifests in the normalized gpucloud/v1 form");
  convert->add_option("-f,--filename", convert_files, "Manifest file, directory, or - for stdin")
      ->required();
  convert->add_option("-o,--output", format, "Output format")
      ->check(CLI::IsMember({"yaml", "json"}));

  CLI::App* catalog = app.add_subcommand(
      "catalog", "List the GPU types, their MIG profiles, relative speed and default price");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (validate->parsed()) return Validate(validate_files, in, out, err);
  if (convert->parsed()) return Convert(convert_files, format, in, out, err);
  if (catalog->parsed()) return Catalog(out);
  return kExitUsage;
}

}  // namespace gpucloud::cli
