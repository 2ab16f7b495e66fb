#include "cli/gpuctl.h"

#include <CLI/CLI.hpp>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/time/clock.h"
#include "api/client.h"
#include "api/paths.h"
#include "cli/audit_commands.h"
#include "cli/cluster_commands.h"
#include "cli/completion.h"
#include "cli/cost_command.h"
#include "cli/explain.h"
#include "cli/iam_commands.h"
#include "cli/interactive_commands.h"
#include "cli/manifest_files.h"
#include "cli/object_commands.h"
#include "cli/remote.h"
#include "cli/resources.h"
#include "cli/secret_commands.h"
#include "cli/usage.h"
#include "core/gpu_catalog.h"
#include "core/job_array.h"
#include "core/object_meta.h"
#include "core/parse.h"
#include "core/text.h"
#include "manifest/json_yaml.h"

namespace gpucloud::cli {
namespace {

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

struct RunOptions {
  std::string name, ns = std::string(kDefaultNamespace), queue, type, image, workdir;
  std::string array;  // --array: Slurm's indices, "0-999%50"; empty: one job
  int gpus = 1, replicas = 1;
  bool dry_run = false;
  bool what_if = false;  // --what-if: the scheduler's answer, nothing submitted
  // -i/-t: an interactive job (docs/interactive.md) whose task waits while the command runs in a
  // terminal through exec; the job is deleted when the command ends unless --keep.
  bool stdin = false, tty = false, keep = false;
  std::string idle_timeout = "1h";
  std::vector<std::string> command;
};

// The task of `gpuctl run -it`: it holds the job's GPUs while the user's command runs through
// exec (any image with a POSIX shell).
const std::vector<std::string> kHoldCommand = {"sh", "-c", "while :; do sleep 3600; done"};

// --what-if: the job as a server dry run with whatIf=true (docs/server.md, "What if"), and the
// scheduler's answer in a line.
int WhatIf(const api::Client& client, const manifest::Object& object, std::ostream& out,
           std::ostream& err) {
  std::optional<api::HttpResponse> r =
      Send(client, "POST", api::ObjectPath(object, /*collection=*/true) + "?dryRun=All&whatIf=true",
           manifest::ToYaml(object), err);
  if (!r) return kExitInvalid;
  nlohmann::json answer = nlohmann::json::parse(r->body, nullptr, false);
  const nlohmann::json w =
      answer.is_object()
          ? answer.value("status", nlohmann::json::object()).value("whatIf", nlohmann::json())
          : nlohmann::json();
  if (!w.is_object()) {
    err << "gpuctl run: the server gave no what-if answer\n";
    return kExitInvalid;
  }
  const std::string outcome = w.value("outcome", "");
  if (outcome == "Bind") {
    std::vector<std::string> nodes = w.value("nodes", std::vector<std::string>{});
    out << "would start now, on " << Join(nodes, ", ") << "\n";
  } else if (outcome == "Reject") {
    out << "would never start on this cluster: " << w.value("reason", "") << "\n";
  } else {
    out << "would wait: " << w.value("reason", "");
    if (w.contains("expectedStartMs") && w["expectedStartMs"].is_number_integer()) {
      out << " (expected to start about "
          << absl::FormatTime("%Y-%m-%d %H:%M %Z",
                              absl::FromUnixMillis(w["expectedStartMs"].get<int64_t>()),
                              absl::LocalTimeZone())
          << ")";
    }
    out << "\n";
  }
  return kExitOk;
}

// `gpuctl run -it`: waits for the job, runs the command in a terminal in it, then deletes the
// job (unless --keep). The command's exit code.
int RunInteractive(const api::Client& client, const RunOptions& o, const std::string& name,
                   std::ostream& err) {
  err << "job " << o.ns << "/" << name << " created (interactive)\n";
  int code = kExitInvalid;
  if (absl::Status s = AwaitRunning(client, o.ns, name, 600, err); !s.ok()) {
    err << "gpuctl run: " << s.message() << "\n";
  } else {
    code = ExecInteractive(client, o.ns, name, o.command, err);
  }
  if (o.keep) {
    err << "job " << o.ns << "/" << name << " kept: gpuctl exec -it " << name
        << " -- sh; gpuctl delete job " << name << "\n";
  } else if (Send(client, "DELETE", api::JobPath(o.ns, name), "", err)) {
    err << "job " << o.ns << "/" << name << " deleted\n";
  }
  return code;
}

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
  const bool interactive = o.stdin || o.tty;
  if (interactive && (o.replicas != 1 || !o.array.empty() || o.what_if)) {
    err << "gpuctl run: -i/-t runs one replica, without --array or --what-if\n";
    return kExitUsage;
  }
  nlohmann::ordered_json task = {{"name", "main"},
                                 {"replicas", o.replicas},
                                 {"command", interactive ? kHoldCommand : o.command}};
  if (!o.image.empty()) task["image"] = o.image;
  // Where the command runs: by default where gpuctl runs, so that `gpuctl run -- python
  // train.py` finds train.py (on a cluster, a path on the shared file system).
  // None by default: this machine's directory means nothing on the node (the node's --workdir
  // or the task's sandbox applies, or the image's own).
  if (!o.workdir.empty()) task["workingDir"] = o.workdir;
  nlohmann::ordered_json gpu = {{"count", o.gpus}};
  if (!o.type.empty()) gpu["type"] = o.type;
  if (o.gpus > 0) task["resources"] = {{"gpu", gpu}};
  nlohmann::ordered_json spec = {{"tasks", nlohmann::ordered_json::array({task})}};
  if (interactive) spec["interactive"] = {{"idleTimeout", o.idle_timeout}};
  if (!o.queue.empty()) spec["queue"] = o.queue;
  if (!o.array.empty()) {
    absl::StatusOr<JobArraySpec> a = ParseArrayIndices(o.array);
    if (!a.ok()) {
      err << "gpuctl run: --array: " << a.status().message() << "\n";
      return kExitUsage;
    }
    spec["array"] = {{"indices", FormatArrayIndices(a->indices)}};
    if (a->parallelism > 0) spec["array"]["parallelism"] = a->parallelism;
  }
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
  if (client && o.what_if) return WhatIf(*client, object, out, err);
  if (!client || !Send(*client, "POST", api::ObjectPath(object, /*collection=*/true),
                       manifest::ToYaml(object), err)) {
    return kExitInvalid;
  }
  if (interactive) return RunInteractive(*client, o, name, err);
  out << (o.array.empty() ? "job " : "job array ") << o.ns << "/" << name
      << " created: " << manifest::Summarize(object) << "\n";
  return kExitOk;
}

}  // namespace

int RunGpuctl(int argc, const char* const* argv, std::istream& in, std::ostream& out,
              std::ostream& err) {
  CLI::App app{"gpuctl: the gpucloud command-line tool", "gpuctl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", Cat("gpuctl ", kClientVersion));

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

  std::string config, ns = std::string(kDefaultNamespace);
  app.add_option("--config", config,
                 "client config (default $GPUCLOUD_CONFIG, ~/.gpucloud/config)");
  // get, delete, apply, diff.
  ObjectCommands objects(app);
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
  run->add_option("--workdir", run_opts.workdir,
                  "working directory of the task (default: the node's, or the image's)");
  run->add_option("--array", run_opts.array,
                  "a job array, one job NAME-INDEX per index: 0-999, 1,3,5-7, 0-15:4, and "
                  "%P for at most P at once (0-999%50)");
  run->add_flag("--dry-run", run_opts.dry_run, "print the Job instead of submitting it");
  run->add_flag("--what-if", run_opts.what_if,
                "ask the scheduler whether the job would start now (where, or why not), "
                "submitting nothing");
  run->add_flag("-i,--stdin", run_opts.stdin, "interactive: the command reads this terminal");
  run->add_flag("-t,--tty", run_opts.tty,
                "interactive: the command runs in a terminal (-it: a shell on a GPU)");
  run->add_flag("--keep", run_opts.keep, "with -it: keep the job when the command ends");
  run->add_option("--idle-timeout", run_opts.idle_timeout,
                  "with -it: stop the job after this long unused (default 1h)");
  run->add_option("command", run_opts.command, "the command, after --");
  std::vector<std::string> describe_args;
  CLI::App* describe =
      app.add_subcommand("describe",
                         "Show one job, node or secret in full, or the cluster's "
                         "figures: describe job|node|secret NAME, describe cluster");
  describe->add_option("args", describe_args, "RESOURCE NAME")->required()->expected(1, 2);
  describe->add_option("-n,--namespace", ns, "Namespace (jobs, secrets)");
  LogsOptions logs_opts;
  CLI::App* logs = app.add_subcommand("logs", "Print a job's output: logs JOB [--rank R] [-f]");
  logs->add_option("job", logs_opts.job, "JOB")->required();
  logs->add_option("-n,--namespace", ns, "Namespace");
  logs->add_option("--rank", logs_opts.rank, "which task replica (default 0)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--attempt", logs_opts.attempt, "which attempt (default: the current one)")
      ->check(CLI::PositiveNumber);
  logs->add_flag("-f,--follow", logs_opts.follow, "keep printing until the job ends");
  logs->add_option("--tail", logs_opts.tail, "only the last N lines (-1: all)")
      ->check(CLI::Range(-1, 100000000));
  logs->add_option("--since", logs_opts.since, "only lines newer than this (30s, 5m, 2h)");
  logs->add_flag("--timestamps", logs_opts.timestamps, "each line with its time");
  logs->add_flag("-p,--previous", logs_opts.previous, "the attempt before the current one");
  bool version_client = false;
  CLI::App* version = app.add_subcommand("version", "The client's version and the server's");
  version->add_flag("--client", version_client, "the client's only (no server needed)");
  std::string events_job, cancel_job, node_name;
  CLI::App* events = app.add_subcommand("events", "What happened to a job and why: events JOB");
  events->add_option("job", events_job, "JOB")->required();
  events->add_option("-n,--namespace", ns, "Namespace");
  CLI::App* cancel =
      app.add_subcommand("cancel", "Stop a job's tasks and keep the job: cancel JOB");
  cancel->add_option("job", cancel_job, "JOB")->required();
  cancel->add_option("-n,--namespace", ns, "Namespace");
  std::vector<CLI::App*> node_verbs;
  for (const char* verb : {"cordon", "uncordon", "drain"}) {
    CLI::App* v = app.add_subcommand(
        verb, std::string(verb) == "cordon" ? "Stop placing jobs on a node"
              : std::string(verb) == "uncordon"
                  ? "Place jobs on a node again"
                  : "Cordon a node and move its jobs elsewhere (from checkpoints)");
    v->add_option("node", node_name, "NODE")->required();
    node_verbs.push_back(v);
  }
  std::string drain_timeout;
  node_verbs[2]->add_option("--timeout", drain_timeout,
                            "then wait until the node's jobs have moved, at most this long "
                            "(60s, 5m; default: return at once)");
  std::string completion_shell;
  CLI::App* completion = app.add_subcommand(
      "completion", "A shell completion script: source <(gpuctl completion bash)");
  completion->add_option("shell", completion_shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  int reclaim_in = 120;
  std::string reclaim_pool;
  CLI::App* reclaim = app.add_subcommand(
      "reclaim",
      "A spot reclamation notice: the node (or every node of --pool) goes away in --in seconds "
      "(default 120)");
  CLI::Option* reclaim_node = reclaim->add_option("node", node_name, "NODE");
  reclaim->add_option("--pool", reclaim_pool, "every node of this pool")->excludes(reclaim_node);
  reclaim->add_option("--in", reclaim_in, "seconds until the node is reclaimed")
      ->check(CLI::Range(1, 86400));
  node_verbs.push_back(reclaim);
  CLI::App* images = app.add_subcommand("images", "Container images on the nodes: images pull");
  CLI::App* images_pull = images->add_subcommand(
      "pull",
      "Every node of --pool pulls IMAGE now, ahead of its tasks (a large image then does "
      "not delay a gang's start)");
  std::string pull_pool, pull_image;
  images_pull->add_option("--pool", pull_pool, "the node pool")->required();
  images_pull->add_option("image", pull_image, "IMAGE")->required();
  images->require_subcommand(1);
  CLI::App* top = app.add_subcommand(
      "top", "GPU use: top [nodes] (allocated, free, utilization, memory) or top jobs");
  top->add_subcommand("nodes", "Per node: GPUs allocated, out, free, utilization, memory, jobs")
      ->alias("node");
  CLI::App* top_jobs =
      top->add_subcommand("jobs", "Per job: GPUs held, their utilization and memory")->alias("job");
  std::string top_ns;
  top_jobs->add_option("-n,--namespace", top_ns, "Namespace (default: every one; admins)");
  top->require_subcommand(0, 1);
  CLI::App* cost = app.add_subcommand(
      "cost",
      "What jobs cost, used and emitted (dollars at their nodes' pools' prices, GPU-hours, "
      "energy, CO2e) in a time window, by namespace, queue, job, billing class or pool");
  CostFlags cost_flags;
  cost->add_option("--by", cost_flags.by, "namespace (default), queue, job, class or pool");
  cost->add_option("--since", cost_flags.since,
                   "From: 30d, 12h (back from now), 2026-12-01 or an RFC 3339 time (default: "
                   "the beginning)");
  cost->add_option("--until", cost_flags.until, "To, in the same forms (default: now)");
  cost->add_option("-n,--namespace", cost_flags.ns, "Namespace (default: every one; admins)");
  cost->add_option("-o,--output", cost_flags.output, "table (default), json or csv");
  CLI::App* tco = cost->add_subcommand(
      "tco",
      "The window's measured usage priced four ways: on-demand, reserved + on-demand, reserved + "
      "spot, owned hardware; which is cheapest and by how much");
  TcoFlags tco_flags;
  tco->add_option("--since", tco_flags.since, "From (default 30d: the last 30 days)");
  tco->add_option("--until", tco_flags.until, "To (default now)");
  tco->add_option("-n,--namespace", tco_flags.ns, "Namespace (default: every one; admins)");
  tco->add_option("--years", tco_flags.options.amortization_years,
                  "Owned hardware: years its purchase is spread over (default 4)")
      ->check(CLI::Range(0.5, 20.0));
  tco->add_option("--ops-usd-per-gpu-year", tco_flags.options.ops_per_gpu_year,
                  "Owned hardware: space, support and people per GPU a year (default 3000)")
      ->check(CLI::NonNegativeNumber);
  tco->add_option("--usd-per-kwh", tco_flags.options.usd_per_kwh,
                  "Owned hardware: the price of electricity (default 0.10)")
      ->check(CLI::NonNegativeNumber);
  tco->add_option("--pue", tco_flags.options.pue,
                  "Owned hardware: the data centre's PUE (default 1.5)")
      ->check(CLI::Range(1.0, 3.0));
  tco->add_option("-o,--output", tco_flags.output, "table (default) or json");
  cost->require_subcommand(0, 1);
  CLI::App* budget = app.add_subcommand(
      "budget",
      "A namespace's monthly budget: shows it, or sets it (--monthly-usd, --alert-at, "
      "--on-exceeded) or clears it (admins)");
  BudgetFlags budget_flags;
  budget->add_option("namespace", budget_flags.ns, "The namespace")->required();
  budget->add_option("--monthly-usd", budget_flags.monthly_usd,
                     "What its jobs may cost a month (UTC calendar month), e.g. 5000");
  budget->add_option("--alert-at", budget_flags.alert_at,
                     "Alert thresholds in percent, ascending (default 50,80,100)");
  budget->add_option("--on-exceeded", budget_flags.on_exceeded,
                     "wait (default: new jobs wait) or stop (running jobs stop and requeue too)");
  budget->add_option("--currency", budget_flags.currency,
                     "Must be the server's currency (default: the server's)");
  budget->add_flag("--clear", budget_flags.clear, "Remove the budget");
  // Identity, policies and the audit log (issue 14): create, revoke, attach, detach, whoami,
  // auth can-i, policy simulate; audit verify, audit query.
  IamCommands iam(app);
  AuditCommands audit(app);
  SecretCommands secrets(*app.get_subcommand("create"));  // create secret generic|docker-registry
  ExplainCommand explain(app);           // explain RESOURCE[.FIELD]: the schema, offline
  InteractiveCommands interactive(app);  // exec, port-forward, cp

  if (std::optional<int> code = RefuseUnknownCommand(app, argc, argv, err)) return *code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  // The names the command puts into a path: (what the usage calls it, the value).
  std::vector<std::pair<std::string_view, std::string>> named;
  const bool namespaced =
      describe->parsed() || logs->parsed() || events->parsed() || cancel->parsed();
  if (namespaced) named.emplace_back("namespace", ns);
  if (describe->parsed() && describe_args.size() > 1) named.emplace_back("NAME", describe_args[1]);
  if (logs->parsed()) named.emplace_back("JOB", logs_opts.job);
  if (events->parsed()) named.emplace_back("JOB", events_job);
  if (cancel->parsed()) named.emplace_back("JOB", cancel_job);
  for (CLI::App* v : node_verbs) {
    if (v->parsed() && !node_name.empty()) named.emplace_back("NODE", node_name);
  }
  if (reclaim->parsed() && !reclaim_pool.empty()) named.emplace_back("--pool", reclaim_pool);
  if (images_pull->parsed()) named.emplace_back("--pool", pull_pool);
  if (top_jobs->parsed() && !top_ns.empty()) named.emplace_back("namespace", top_ns);
  if (!NamesAreLabels(named, err)) return kExitUsage;
  auto with_client = [&](auto&& f) {
    std::optional<api::Client> client = Connect(config, err);
    if (!client) return kExitInvalid;
    return f(*client);
  };
  if (describe->parsed()) {
    if (FindResourceType(describe_args[0]) == nullptr && describe_args[0] != "cluster") {
      err << "gpuctl: "
          << UnknownMessage("resource type", describe_args[0], "gpuctl describe",
                            {"job", "node", "secret", "service", "cluster"})
          << "\n";
      return kExitUsage;
    }
    if (describe_args.size() == 1 && describe_args[0] != "cluster") {
      err << "gpuctl describe: " << describe_args[0] << " needs a NAME\n";
      return kExitUsage;
    }
    describe_args.resize(2);
    return with_client([&](api::Client& c) {
      return Describe(c, describe_args[0], describe_args[1], ns, out, err);
    });
  }
  if (logs->parsed()) {
    logs_opts.ns = ns;
    if (absl::StatusOr<std::string> target = LogsTarget(logs_opts); !target.ok()) {
      err << "gpuctl logs: " << target.status().message() << "\n";
      return kExitUsage;
    }
    return with_client([&](api::Client& c) { return Logs(c, logs_opts, out, err); });
  }
  if (version->parsed()) {
    return Version(version_client ? std::nullopt : Connect(config, err), version_client, out, err);
  }
  if (events->parsed())
    return with_client([&](api::Client& c) { return Events(c, events_job, ns, out, err); });
  if (cancel->parsed())
    return with_client([&](api::Client& c) { return Cancel(c, cancel_job, ns, out, err); });
  if (images_pull->parsed()) {
    return with_client(
        [&](api::Client& c) { return PrePullPool(c, pull_pool, pull_image, out, err); });
  }
  if (reclaim->parsed() && !reclaim_pool.empty()) {
    return with_client(
        [&](api::Client& c) { return ReclaimPool(c, reclaim_pool, reclaim_in, out, err); });
  }
  if (reclaim->parsed() && node_name.empty()) {
    err << "gpuctl reclaim: give a NODE or --pool POOL\n";
    return kExitUsage;
  }
  if (completion->parsed()) {
    absl::StatusOr<std::string> script = CompletionScript(app, completion_shell);
    if (!script.ok()) return kExitUsage;
    out << *script;
    return kExitOk;
  }
  absl::Duration drain_wait = absl::ZeroDuration();
  if (!drain_timeout.empty() &&
      !absl::ParseDuration(
          absl::c_all_of(drain_timeout, [](char c) { return c >= '0' && c <= '9'; })
              ? drain_timeout + "s"
              : drain_timeout,
          &drain_wait)) {
    err << "gpuctl drain: --timeout \"" << drain_timeout << "\" is not a duration (60s, 5m)\n";
    return kExitUsage;
  }
  for (CLI::App* v : node_verbs) {
    if (v->parsed()) {
      return with_client([&](api::Client& c) {
        int code = NodeVerb(c, v->get_name(), node_name, out, err, reclaim_in);
        if (code != kExitOk || drain_wait <= absl::ZeroDuration() || v != node_verbs[2]) {
          return code;
        }
        SystemClock clock;
        return WaitForDrain(ClientCall(c), node_name, drain_wait, clock, absl::SleepFor, out, err);
      });
    }
  }
  if (budget->parsed()) {
    return with_client([&](api::Client& c) { return RunBudget(c, budget_flags, out, err); });
  }
  if (tco->parsed()) {
    return with_client([&](api::Client& c) { return RunCostTco(c, tco_flags, out, err); });
  }
  if (cost->parsed()) {
    return with_client([&](api::Client& c) { return RunCost(c, cost_flags, out, err); });
  }
  if (top->parsed()) {
    return with_client([&](api::Client& c) {
      return top_jobs->parsed() ? TopJobs(c, top_ns, out, err) : TopNodes(c, out, err);
    });
  }
  auto connect = [&]() -> std::optional<CallFn> {
    std::optional<api::Client> client = Connect(config, err);
    if (!client) return std::nullopt;
    return ClientCall(*client);
  };
  if (secrets.parsed()) return secrets.Run(connect, out, err);
  if (interactive.parsed()) return interactive.Run(config, out, err);
  if (iam.parsed()) return iam.Run(connect, out, err);
  if (audit.parsed()) return audit.Run(connect, out, err);
  if (explain.parsed()) return explain.Run(out, err);
  if (validate->parsed()) return Validate(validate_files, in, out, err);
  if (convert->parsed()) return Convert(convert_files, format, in, out, err);
  if (catalog->parsed()) return Catalog(out);
  if (objects.parsed()) return objects.Run(config, in, out, err);
  if (run->parsed()) return RunJob(run_opts, config, out, err);
  return kExitUsage;
}

}  // namespace gpucloud::cli
