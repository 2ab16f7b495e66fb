#include "cli/gpuctl.h"

#include <CLI/CLI.hpp>
#include <istream>
#include <random>
#include <ostream>

#include <nlohmann/json.hpp>

#include "api/client.h"
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

// The answer when the request went through with a 2xx status; otherwise says why on `err`
// (prefixed with `what` when given) and returns nullopt.
std::optional<api::HttpResponse> Send(const api::Client& client, std::string_view method,
                                      const std::string& path, const std::string& body,
                                      std::ostream& err, const std::string& what = "") {
  absl::StatusOr<api::HttpResponse> r = client.Call(method, path, body);
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

int Apply(const std::vector<std::string>& files, const std::string& config, std::istream& in,
          std::ostream& out, std::ostream& err) {
  LoadedManifests loaded = LoadManifests(files, in);
  PrintDiagnostics(loaded, err);
  if (!loaded.errors.empty()) return kExitInvalid;
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return kExitInvalid;
  int code = kExitOk;
  for (const manifest::Manifest& m : loaded.manifests) {
    std::string path = api::ObjectPath(m.object);
    std::string what = Cat(ToLower(manifest::KindOf(m.object)), " ",
                           manifest::MetaOf(m.object).namespace_.empty()
                               ? ""
                               : manifest::MetaOf(m.object).namespace_ + "/",
                           manifest::MetaOf(m.object).name);
    if (path.empty()) {
      err << "gpuctl: " << what << ": the server does not take this kind yet\n";
      code = kExitInvalid;
      continue;
    }
    std::optional<api::HttpResponse> r =
        Send(*client, "PUT", path, manifest::ToYaml(m.object), err, what);
    if (!r) {
      code = kExitInvalid;
      continue;
    }
    out << what << (r->status == 201 ? " created\n" : " configured\n");
  }
  return code;
}

int Get(const std::vector<std::string>& args, const std::string& ns, const std::string& format,
        int watch_seconds, const std::string& config, std::ostream& out, std::ostream& err) {
  std::string path = api::CollectionPath(args[0], ns);
  if (path.empty()) {
    err << "gpuctl: unknown resource \"" << args[0] << "\" (known: jobs, queues, nodepools)\n";
    return kExitUsage;
  }
  if (args.size() > 1) path += "/" + args[1];
  std::optional<api::Client> client = Connect(config, err);
  if (!client) return kExitInvalid;
  std::optional<api::HttpResponse> r = Send(*client, "GET", path, "", err);
  if (!r) return kExitInvalid;
  if (format == "json") {
    out << r->body;
    return kExitOk;
  }
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  std::vector<nlohmann::json> items;
  if (j.contains("items")) {
    for (const auto& item : j["items"]) items.push_back(item);
  } else {
    items.push_back(j);
  }
  if (format == "yaml") {
    for (const nlohmann::json& item : items) {
      manifest::ParseResult p = manifest::ParseManifests(item.dump(), "server");
      if (p.ok() && p.manifests.size() == 1) out << "---\n" << manifest::ToYaml(p.manifests[0].object);
    }
    return kExitOk;
  }
  out << fmt::format("{:<24} {:>8}  {}\n", "NAME", "REVISION", "SUMMARY");
  for (const nlohmann::json& item : items) {
    manifest::ParseResult p = manifest::ParseManifests(item.dump(), "server");
    std::string summary = p.ok() && p.manifests.size() == 1 ? manifest::Summarize(p.manifests[0].object)
                                                             : std::string("?");
    out << fmt::format("{:<24} {:>8}  {}\n", item["metadata"].value("name", "?"),
                       item["metadata"].value("resourceVersion", "?"), summary);
  }
  if (watch_seconds < 0) return kExitOk;
  // Then every change after the list, as it happens.
  out.flush();
  std::string rv = j["metadata"].value("resourceVersion", "0");
  std::string target = Cat(path, "?watch=true&resourceVersion=", rv);
  if (watch_seconds > 0) target += Cat("&timeoutSeconds=", watch_seconds);
  absl::StatusOr<api::HttpResponse> w = client->Stream(target, [&](const std::string& line) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("object")) return;
    const nlohmann::json& meta = e["object"]["metadata"];
    out << fmt::format("{:<24} {:>8}  {}\n", meta.value("name", "?"),
                       meta.value("resourceVersion", "?"), e.value("type", "?"));
    out.flush();
  });
  if (!w.ok() || w->status != 200) {
    err << "gpuctl: " << (w.ok() ? StatusMessage(*w) : std::string(w.status().message())) << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

int Delete(const std::vector<std::string>& args, const std::string& ns, const std::string& config,
           std::ostream& out, std::ostream& err) {
  std::string path = api::CollectionPath(args[0], ns);
  if (path.empty() || args.size() != 2) {
    err << "gpuctl: delete RESOURCE NAME (resources: jobs, queues, nodepools)\n";
    return kExitUsage;
  }
  std::optional<api::Client> client = Connect(config, err);
  if (!client || !Send(*client, "DELETE", path + "/" + args[1], "", err)) return kExitInvalid;
  out << args[0] << " " << args[1] << " deleted\n";
  return kExitOk;
}

struct RunOptions {
  std::string name, ns = std::string(kDefaultNamespace), queue, type, image;
  int gpus = 1, replicas = 1;
  bool dry_run = false;
  std::vector<std::string> command;
};

// `gpuctl run`: a Job from flags, validated like any manifest, then applied.
int RunJob(const RunOptions& o, const std::string& config, std::ostream& out, std::ostream& err) {
  if (o.command.empty()) {
    err << "gpuctl run: give the command after --, e.g. gpuctl run --gpus 4 -- python train.py\n";
    return kExitUsage;
  }
  std::string name = o.name;
  if (name.empty()) {
    std::random_device rd;
    name = fmt::format("run-{:06x}", rd() & 0xffffff);
  }
  nlohmann::ordered_json task = {{"name", "main"}, {"replicas", o.replicas}, {"command", o.command}};
  if (!o.image.empty()) task["image"] = o.image;
  nlohmann::ordered_json gpu = {{"count", o.gpus}};
  if (!o.type.empty()) gpu["type"] = o.type;
  if (o.gpus > 0) task["resources"] = {{"gpu", gpu}};
  nlohmann::ordered_json spec = {{"tasks", nlohmann::ordered_json::array({task})}};
  if (!o.queue.empty()) spec["queue"] = o.queue;
  nlohmann::ordered_json job = {{"apiVersion", "gpucloud/v1"},
                                {"kind", "Job"},
                                {"metadata", {{"name", name}, {"namespace", o.ns}}},
                                {"spec", spec}};
  manifest::ParseResult parsed = manifest::ParseManifests(job.dump(), "gpuctl run");
  if (!parsed.ok()) {
    // Name the flags rather than JSON positions the user never wrote.
    for (const manifest::Diagnostic& d : parsed.errors) err << "gpuctl run: " << d.message << "\n";
    return kExitInvalid;
  }
  const manifest::Object& object = parsed.manifests[0].object;
  if (o.dry_run) {
    out << manifest::ToYaml(object);
    return kExitOk;
  }
  std::optional<api::Client> client = Connect(config, err);
  if (!client || !Send(*client, "POST", api::ObjectPath(object, /*collection=*/true),
                       manifest::ToYaml(object), err)) {
    return kExitInvalid;
  }
  out << "job " << o.ns << "/" << name << " created: " << manifest::Summarize(object) << "\n";
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

  std::string config, ns = std::string(kDefaultNamespace), get_format = "table";
  app.add_option("--config", config, "client config (default $GPUCLOUD_CONFIG, ~/.gpucloud/config)");
  std::vector<std::string> apply_files, get_args, delete_args;
  CLI::App* apply = app.add_subcommand("apply", "Create or update objects on the server");
  apply->add_option("-f,--filename", apply_files, "Manifest file, directory, or - for stdin")
      ->required();
  CLI::App* get = app.add_subcommand("get", "List or show objects: get jobs|queues|nodepools [NAME]");
  get->add_option("args", get_args, "RESOURCE [NAME]")->required()->expected(1, 2);
  get->add_option("-n,--namespace", ns, "Namespace (jobs)");
  get->add_option("-o,--output", get_format, "table, json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  bool get_watch = false;
  int watch_timeout = 0;
  get->add_flag("-w,--watch", get_watch, "after the list, print every change as it happens");
  get->add_option("--watch-timeout", watch_timeout, "stop watching after this many seconds")
      ->check(CLI::Range(1, 86400));
  RunOptions run_opts;
  CLI::App* run = app.add_subcommand("run", "Submit a job from one line: run --gpus 4 -- CMD ARGS");
  run->add_option("--gpus", run_opts.gpus, "GPUs per replica (0: none)")->check(CLI::Range(0, 64));
  run->add_option("--type", run_opts.type, "GPU type, e.g. h100 or A100-80GB");
  run->add_option("--replicas", run_opts.replicas, "replicas, started together")
      ->check(CLI::Range(1, 1024));
  run->add_option("--name", run_opts.name, "job name (default: run-XXXXXX)");
  run->add_option("-n,--namespace", run_opts.ns, "namespace");
  run->add_option("--queue", run_opts.queue, "queue");
  run->add_option("--image", run_opts.image, "container image");
  run->add_flag("--dry-run", run_opts.dry_run, "print the Job instead of submitting it");
  run->add_option("command", run_opts.command, "the command, after --");
  CLI::App* del = app.add_subcommand("delete", "Delete an object: delete RESOURCE NAME");
  del->add_option("args", delete_args, "RESOURCE NAME")->required()->expected(2);
  del->add_option("-n,--namespace", ns, "Namespace (jobs)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (validate->parsed()) return Validate(validate_files, in, out, err);
  if (convert->parsed()) return Convert(convert_files, format, in, out, err);
  if (catalog->parsed()) return Catalog(out);
  if (apply->parsed()) return Apply(apply_files, config, in, out, err);
  if (get->parsed()) {
    if (get_watch && (get_args.size() > 1 || get_format != "table")) {
      err << "gpuctl get -w: watches a whole collection, as a table\n";
      return kExitUsage;
    }
    return Get(get_args, ns, get_format, get_watch ? watch_timeout : -1, config, out, err);
  }
  if (del->parsed()) return Delete(delete_args, ns, config, out, err);
  if (run->parsed()) return RunJob(run_opts, config, out, err);
  return kExitUsage;
}

}  // namespace gpucloud::cli
