#include "sim/command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/parse.h"
#include "core/tco.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "sim/cluster.h"
#include "sim/recording.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpucloud::sim {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 1;
constexpr int kExitUsage = 2;
constexpr int kExitDiverged = 3;  // a recording replayed differently from the server

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(Cat(path, ": cannot open"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool IsFile(const std::string& s) {
  return s.ends_with(".yaml") || s.ends_with(".yml") || s.ends_with(".json") ||
         s.find('/') != std::string::npos;
}

absl::StatusOr<std::vector<manifest::Manifest>> ReadManifests(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  manifest::ParseResult r = manifest::ParseManifests(*text, path);
  if (!r.ok()) {
    std::string all;
    for (const manifest::Diagnostic& d : r.errors) all += (all.empty() ? "" : "\n") + d.ToString();
    return absl::InvalidArgumentError(all);
  }
  return std::move(r.manifests);
}

struct Policy {
  std::string name;
  SchedulerConfig config;
  std::map<std::string, QueueSpec> queues;
};

// A built-in name, or a file with one SchedulerConfiguration (and any Queues).
absl::StatusOr<Policy> LoadPolicy(const std::string& arg) {
  Policy p;
  if (!IsFile(arg)) {
    absl::StatusOr<SchedulerConfig> c = BuiltinPolicy(arg);
    if (!c.ok()) return c.status();
    p.name = arg;
    p.config = *c;
    return p;
  }
  absl::StatusOr<std::vector<manifest::Manifest>> ms = ReadManifests(arg);
  if (!ms.ok()) return ms.status();
  int configs = 0;
  for (const manifest::Manifest& m : *ms) {
    if (const auto* c = std::get_if<SchedulerConfiguration>(&m.object)) {
      p.name = c->metadata.name;
      p.config = c->spec;
      ++configs;
    } else if (const auto* q = std::get_if<Queue>(&m.object)) {
      p.queues[q->metadata.name] = q->spec;
    } else {
      return absl::InvalidArgumentError(Cat(arg, ": document ", m.document, " is a ",
                                            manifest::KindOf(m.object),
                                            "; a policy file holds a SchedulerConfiguration and "
                                            "Queues"));
    }
  }
  if (configs != 1) {
    return absl::InvalidArgumentError(
        Cat(arg, ": needs exactly one SchedulerConfiguration, found ", configs));
  }
  return p;
}

// The services of --service files, each with the load curve of the --service-load at its
// position (one curve per service, in the order the files hold them).
absl::StatusOr<std::vector<SimService>> LoadServices(const std::vector<std::string>& files,
                                                     const std::vector<std::string>& curves,
                                                     double latency_ms, int64_t startup_s) {
  std::vector<SimService> out;
  for (const std::string& file : files) {
    absl::StatusOr<std::vector<manifest::Manifest>> ms = ReadManifests(file);
    if (!ms.ok()) return ms.status();
    for (const manifest::Manifest& m : *ms) {
      const auto* svc = std::get_if<InferenceService>(&m.object);
      if (svc == nullptr) {
        return absl::InvalidArgumentError(Cat("--service: ", file, ": document ", m.document,
                                              " is a ", manifest::KindOf(m.object),
                                              ", not an InferenceService"));
      }
      out.push_back({.service = *svc, .latency_s = latency_ms / 1000, .startup_s = startup_s});
    }
  }
  if (out.size() != curves.size()) {
    return absl::InvalidArgumentError(Cat("--service-load: ", curves.size(), " curves for ",
                                          out.size(), " services (one per service, in order)"));
  }
  for (size_t i = 0; i < curves.size(); ++i) {
    absl::StatusOr<std::string> text = ReadFile(curves[i]);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<LoadPoint>> load = ParseLoadCurve(*text);
    if (!load.ok()) {
      return absl::InvalidArgumentError(
          Cat("--service-load: ", curves[i], ": ", load.status().message()));
    }
    out[i].load = std::move(*load);
  }
  return out;
}

// A run's GPU use as core/tco.h's usage over the run: each job's GPUs from its first start to
// its end (or the run's), of the one type it asks for, else the cluster's first node's.
TcoReport TcoOfRun(const Trace& trace, const SimCluster& cluster, const SimResult& run) {
  const std::string fallback =
      cluster.nodes.empty() || cluster.nodes[0].gpus.empty() ? "" : cluster.nodes[0].gpus[0].type;
  std::vector<TcoUsage> usage;
  for (size_t i = 0; i < run.jobs.size() && i < trace.jobs.size(); ++i) {
    const JobOutcome& j = run.jobs[i];
    if (!j.first_start_s) continue;
    const std::vector<std::string>& types = trace.jobs[i].gpu_types;
    usage.push_back({types.size() == 1 ? types[0] : fallback, *j.first_start_s * 1000,
                     j.end_s.value_or(run.end_s) * 1000, j.gpus.raw() / 1000.0, j.spot_tolerant,
                     0});
  }
  TcoOptions o;
  o.until_ms = run.end_s * 1000;
  return ComputeTco(usage, o);
}

// With `autoscale`, a preset's pools grow from no node (provider "sim").
absl::StatusOr<SimCluster> LoadCluster(const std::string& arg, bool autoscale) {
  if (!IsFile(arg)) {
    absl::StatusOr<SimCluster> c = ClusterFromPreset(arg);
    if (!c.ok() || !autoscale) return c;
    std::vector<NodePool> pools = c->pools;
    for (NodePool& p : pools) {
      p.spec.min_nodes = 0;
      p.spec.provider = "sim";
    }
    return ClusterFromPools(c->name, std::move(pools));
  }
  absl::StatusOr<std::vector<manifest::Manifest>> ms = ReadManifests(arg);
  if (!ms.ok()) return ms.status();
  std::vector<NodePool> pools;
  for (const manifest::Manifest& m : *ms) {
    const NodePool* pool = std::get_if<NodePool>(&m.object);
    if (pool == nullptr) {
      return absl::InvalidArgumentError(Cat(arg, ": document ", m.document, " is a ",
                                            manifest::KindOf(m.object),
                                            "; a cluster file holds NodePools"));
    }
    pools.push_back(*pool);
  }
  if (pools.empty()) return absl::InvalidArgumentError(Cat(arg, ": no NodePool in the file"));
  return ClusterFromPools(std::filesystem::path(arg).stem().string(), std::move(pools));
}

absl::Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return absl::InternalError(Cat(path.string(), ": cannot write"));
  return absl::OkStatus();
}

// `gpucloud sim --trace RECORDING [--policy P] [--out DIR]`: replays a server's recording; with
// no policy, checks that every pass decides as the server did (exit 3 when not).
int RunReplay(const std::string& file, const std::string& text,
              const std::vector<std::string>& policies, const std::string& out_dir,
              std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& s) {
    err << "gpucloud sim: " << s.message() << "\n";
    return kExitInvalid;
  };
  if (policies.size() > 1) {
    err << "gpucloud sim: a recording replays with one --policy (a what-if) or none (a check)\n";
    return kExitUsage;
  }
  ReplayOptions options;
  std::string policy_name = "the recorded configuration";
  if (!policies.empty()) {
    absl::StatusOr<Policy> p = LoadPolicy(policies[0]);
    if (!p.ok()) return fail(p.status());
    options.policy = p->config;
    policy_name = p->name;
  }
  absl::StatusOr<ReplayResult> r = Replay(text, options);
  if (!r.ok()) return fail(absl::InvalidArgumentError(Cat(file, ": ", r.status().message())));
  out << fmt::format(
      "replayed {}: {} passes, {} jobs, {} node changes; the server decided {} times ({} binds, "
      "{} preemptions, {} rejections, {} waits)\n",
      file, r->passes, r->jobs, r->node_changes, r->decisions, r->binds, r->preemptions,
      r->rejections, r->waits);
  if (r->torn_lines > 0) {
    out << r->torn_lines << " line(s) cut short by a crash of the server skipped\n";
  }
  if (r->holding_conflicts > 0) {
    out << r->holding_conflicts << " recorded holdings did not fit the recorded nodes\n";
  }
  if (r->first) {
    out << fmt::format("{}: {} of {} passes decide differently\n", policy_name, r->differing_passes,
                       r->passes)
        << DescribeDivergence(*r->first) << "\n";
  } else {
    out << policy_name << ": the same decisions in the same order as the server\n";
  }
  if (!out_dir.empty()) {
    nlohmann::json j{{"recording", file},
                     {"policy", policy_name},
                     {"passes", r->passes},
                     {"jobs", r->jobs},
                     {"decisions", r->decisions},
                     {"binds", r->binds},
                     {"preemptions", r->preemptions},
                     {"rejections", r->rejections},
                     {"waits", r->waits},
                     {"differingPasses", r->differing_passes}};
    if (r->first) j["firstDifference"] = DescribeDivergence(*r->first);
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) return fail(absl::InternalError(Cat(out_dir, ": ", ec.message())));
    if (absl::Status s =
            WriteFile(std::filesystem::path(out_dir) / "replay.json", j.dump(2) + "\n");
        !s.ok()) {
      return fail(s);
    }
  }
  return r->first && !options.policy ? kExitDiverged : kExitOk;
}

}  // namespace

absl::StatusOr<SchedulerConfig> BuiltinPolicy(std::string_view name) {
  SchedulerConfig c;
  if (name == "default") return c;
  if (name == "fifo" || name == "sjf" || name == "las" || name == "dlas") {
    c.ordering = *ParseQueueOrdering(name);
    return c;
  }
  if (name == "best-fit") {  // the defaults without scoring: each preset differs in one thing
    c.scores.clear();
    return c;
  }
  if (name == "fgd") {
    c.scores = {{"BinPack", 1, {}}, {"Fragmentation", 2, {}}};
    return c;
  }
  return absl::NotFoundError(
      Cat("unknown policy \"", name, "\" (built in: ", kPolicyNames, "; or a .yaml file)"));
}

int RunSim(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"gpucloud sim: replay a GPU cluster trace through the production scheduler"};
  std::string trace_file, format = "auto", tasks_file, cluster_arg, queues_file, out_dir;
  std::vector<std::string> policies, compare;
  std::string until, repair = "1h", checkpoint = "30m";
  uint64_t seed = 1;
  std::string mtbf = "0", slowdown;
  bool no_oracle = false;
  std::string predict = "off";
  FailurePredictionOptions prediction;
  app.add_option("--trace", trace_file,
                 "trace file (CSV), or a server's scheduler recording (--record-scheduler) to "
                 "replay and check")
      ->required();
  app.add_option("--format", format, "auto, tiresias, philly, helios, pai or csv");
  app.add_option("--tasks", tasks_file, "PAI task table (format pai)");
  app.add_option("--cluster", cluster_arg,
                 "preset (tiresias, pollux, philly, pai) or NodePool YAML (traces only: a "
                 "recording brings its nodes)");
  app.add_option("--policy", policies, "policy name or SchedulerConfiguration YAML (repeatable)");
  app.add_option("--compare", compare, "several policies side by side");
  app.add_option("--queues", queues_file, "YAML with Queue objects (guarantees, weights)");
  app.add_option("--until", until, "stop the simulated clock at this time (e.g. 7d)");
  app.add_option("--seed", seed, "seed for random failures");
  app.add_option("--mtbf-hours", mtbf,
                 "mean time between failures per node in hours (0: none), or per GPU type: "
                 "H100-80GB=500,V100-16GB=2000 (other types: none)");
  app.add_option("--slowdown", slowdown,
                 "slowdown of multi-node jobs under one leaf, one spine, across spines "
                 "(default 1.1,1.3,1.5)");
  app.add_option("--repair", repair, "time to repair a failed node");
  app.add_option("--checkpoint-interval", checkpoint, "how often jobs checkpoint");
  app.add_option("--predict-failures", predict,
                 "failure prediction with injected precursors (needs --mtbf-hours): observe (the "
                 "model only watches), act (predictive drain), both (two runs per policy)")
      ->check(CLI::IsMember({"off", "observe", "act", "both"}));
  app.add_option("--precursor-share", prediction.precursor_share,
                 "share of failures preceded by precursors (default 0.7)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--precursor-lead-hours", prediction.lead_hours,
                 "precursors start this long before a failure (x U[0.5,1.5]; default 24)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--noise-per-gpu-day", prediction.noise_per_gpu_day,
                 "benign health signals per GPU and day (default 0.5)")
      ->check(CLI::Range(0.0, 1e6));
  bool autoscale = false;
  std::string boot = "5m", boot_timeout = "10m", scale_down_after = "10m", max_usd,
              boot_failure = "0";
  ElasticOptions elastic;
  bool tco = false;
  app.add_flag("--tco", tco,
               "also price each run's GPU use four ways (on-demand, reserved + on-demand, "
               "reserved + spot for --spot-share's jobs, owned hardware) at the catalog's list "
               "prices: tco.json and a table");
  app.add_flag("--autoscale", autoscale,
               "autoscale node pools with the production autoscaler: presets grow from no node "
               "up to their size; NodePools whose provider is not static grow from minNodes to "
               "maxNodes");
  app.add_option("--boot-time", boot, "median time a new machine takes to boot (default 5m)");
  app.add_option("--boot-failure", boot_failure,
                 "probability that a new machine never comes up, below 1 (default 0), or per "
                 "pool: h100-spot=0.5,a100=0.1 (other pools: 0)");
  app.add_option("--boot-timeout", boot_timeout,
                 "a request not up by then is cancelled and its pool backs off (default 10m)");
  app.add_option("--scale-down-after", scale_down_after,
                 "idle time before a node is removed (default 10m)");
  app.add_option("--spot-share", elastic.spot_share,
                 "share of the trace's jobs that accept spot capacity (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--spot-reclaims-per-hour", elastic.spot_reclaims_per_hour,
                 "how often the cloud takes a spot machine back, per machine-hour, each with a "
                 "two-minute notice (default 0)")
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--max-gpus", elastic.autoscaler.max_gpus,
                 "most GPUs the cluster may grow to (default: no maximum)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  app.add_option("--max-usd-per-hour", max_usd,
                 "most dollars per hour the cluster's machines may cost (default: no maximum)");
  app.add_flag("--no-oracle-estimates", no_oracle,
               "do not give jobs their real duration as runtime estimate");
  std::vector<std::string> service_files, service_loads;
  double service_latency_ms = 100;
  std::string service_startup = "30s", service_tick = "10s";
  app.add_option("--service", service_files,
                 "YAML with InferenceServices to replay beside the trace (repeatable)");
  app.add_option("--service-load", service_loads,
                 "a service's load curve, CSV time,rps (one per service, in order; repeatable)");
  app.add_option("--service-latency-ms", service_latency_ms,
                 "a request's time at a replica, for the requests in flight (default 100)")
      ->check(CLI::Range(0.001, 1e7));
  app.add_option("--service-startup", service_startup,
                 "from a replica's start to its first answer (default 30s)");
  app.add_option("--service-tick", service_tick,
                 "how often the services' autoscaler decides in the replay (default 10s)");
  app.add_option("--out", out_dir, "output directory (required for traces)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  policies.insert(policies.end(), compare.begin(), compare.end());

  auto fail = [&](const absl::Status& s) {
    err << "gpucloud sim: " << s.message() << "\n";
    return kExitInvalid;
  };
  SimOptions base;
  base.seed = seed;
  auto number = [](std::string_view text) -> std::optional<double> {
    std::string t(text);
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !(v >= 0) || v > 1e9) return std::nullopt;
    return v;
  };
  if (mtbf.find('=') == std::string::npos) {
    std::optional<double> v = number(mtbf);
    if (!v)
      return fail(absl::InvalidArgumentError(Cat("--mtbf-hours: \"", mtbf, "\" is not hours")));
    base.mtbf_hours = *v;
  } else {
    for (const std::string& part : SplitAny(mtbf, ",")) {
      size_t eq = part.find('=');
      std::vector<const GpuType*> types =
          GpuCatalog::Default().Resolve(part.substr(0, std::min(eq, part.size())));
      std::optional<double> v =
          eq == std::string::npos ? std::nullopt : number(part.substr(eq + 1));
      if (types.empty() || !v) {
        return fail(absl::InvalidArgumentError(
            Cat("--mtbf-hours: \"", part, "\" is not GPU-TYPE=HOURS (e.g. H100-80GB=500)")));
      }
      for (const GpuType* t : types) base.mtbf_hours_by_type[t->name] = *v;
    }
  }
  if (!slowdown.empty()) {
    std::vector<std::string> parts = SplitAny(slowdown, ",");
    std::vector<double> v;
    for (const std::string& p : parts) {
      std::optional<double> x = number(p);
      if (x && *x >= 1) v.push_back(*x);
    }
    if (v.size() != 3 || parts.size() != 3) {
      return fail(absl::InvalidArgumentError(
          Cat("--slowdown: \"", slowdown, "\" is not three factors >= 1 such as 1.1,1.3,1.5")));
    }
    base.placement = {v[0], v[1], v[2]};
  }
  base.oracle_estimates = !no_oracle;
  struct Duration {
    const char* flag;
    const std::string& text;
    int64_t* into;
  };
  int64_t until_s = -1;
  for (Duration d : {Duration{"--repair", repair, &base.repair_s},
                     Duration{"--checkpoint-interval", checkpoint, &base.checkpoint_interval_s},
                     Duration{"--until", until, &until_s}}) {
    if (d.text.empty()) continue;
    absl::StatusOr<int64_t> v = ParseDurationSeconds(d.text);
    if (!v.ok()) return fail(absl::InvalidArgumentError(Cat(d.flag, ": ", v.status().message())));
    *d.into = *v;
  }
  if (until_s >= 0) base.until_s = until_s;
  int64_t startup_s = 0;
  for (Duration d : {Duration{"--service-startup", service_startup, &startup_s},
                     Duration{"--service-tick", service_tick, &base.service_tick_s}}) {
    absl::StatusOr<int64_t> v = ParseDurationSeconds(d.text);
    if (!v.ok()) return fail(absl::InvalidArgumentError(Cat(d.flag, ": ", v.status().message())));
    *d.into = *v;
  }
  if (base.service_tick_s <= 0) {
    return fail(absl::InvalidArgumentError("--service-tick: must be longer than 0s"));
  }
  absl::StatusOr<std::vector<SimService>> services =
      LoadServices(service_files, service_loads, service_latency_ms, startup_s);
  if (!services.ok()) return fail(services.status());
  base.services = std::move(*services);
  elastic.enabled = autoscale;
  for (const std::string& part : SplitAny(boot_failure, ",")) {
    size_t eq = part.find('=');
    std::optional<double> v = number(eq == std::string::npos ? part : part.substr(eq + 1));
    if (!v || *v >= 1 || (eq != std::string::npos && eq == 0)) {
      return fail(absl::InvalidArgumentError(
          Cat("--boot-failure: \"", part, "\" is not a probability below 1 or POOL=PROBABILITY")));
    }
    if (eq == std::string::npos) {
      elastic.boot_failure = *v;
    } else {
      elastic.boot_failure_by_pool[part.substr(0, eq)] = *v;
    }
  }
  for (Duration d : {Duration{"--boot-time", boot, &elastic.boot_s},
                     Duration{"--boot-timeout", boot_timeout, &elastic.autoscaler.boot_timeout_ms},
                     Duration{"--scale-down-after", scale_down_after,
                              &elastic.autoscaler.scale_down_after_ms}}) {
    absl::StatusOr<int64_t> v = ParseDurationSeconds(d.text);
    if (!v.ok()) return fail(absl::InvalidArgumentError(Cat(d.flag, ": ", v.status().message())));
    if (*v <= 0) return fail(absl::InvalidArgumentError(Cat(d.flag, ": must be longer than 0s")));
    *d.into = *v;
  }
  elastic.autoscaler.boot_timeout_ms *= 1000;
  elastic.autoscaler.scale_down_after_ms *= 1000;
  if (!max_usd.empty()) {
    absl::StatusOr<MicroUsd> v = ParsePrice(max_usd);
    if (!v.ok()) {
      return fail(absl::InvalidArgumentError(Cat("--max-usd-per-hour: ", v.status().message())));
    }
    elastic.autoscaler.max_usd_per_hour = *v;
  }
  if (autoscale && predict != "off") {
    return fail(
        absl::InvalidArgumentError("--autoscale: does not combine with --predict-failures yet"));
  }
  base.elastic = elastic;
  std::vector<PredictionMode> modes = {PredictionMode::kOff};
  if (predict == "observe") modes = {PredictionMode::kObserve};
  if (predict == "act") modes = {PredictionMode::kAct};
  if (predict == "both") modes = {PredictionMode::kObserve, PredictionMode::kAct};
  if (predict != "off" && base.mtbf_hours <= 0 && base.mtbf_hours_by_type.empty()) {
    return fail(
        absl::InvalidArgumentError("--predict-failures: needs failures to predict (--mtbf-hours)"));
  }
  base.prediction = prediction;

  absl::StatusOr<std::string> trace_text = ReadFile(trace_file);
  if (!trace_text.ok()) return fail(trace_text.status());
  if (IsRecording(std::string_view(*trace_text).substr(0, trace_text->find('\n')))) {
    return RunReplay(trace_file, *trace_text, policies, out_dir, out, err);
  }
  for (auto [flag, value] : {std::pair{"--cluster", &cluster_arg}, {"--out", &out_dir}}) {
    if (value->empty()) {
      err << "gpucloud sim: " << flag << " is required to replay a trace\n";
      return kExitUsage;
    }
  }
  std::string tasks_text;
  if (!tasks_file.empty()) {
    absl::StatusOr<std::string> t = ReadFile(tasks_file);
    if (!t.ok()) return fail(t.status());
    tasks_text = std::move(*t);
  }
  absl::StatusOr<Trace> trace = ReadTrace(*trace_text, format, tasks_text);
  if (!trace.ok())
    return fail(absl::InvalidArgumentError(Cat(trace_file, ": ", trace.status().message())));
  if (!trace->skipped.empty()) {
    err << "gpucloud sim: " << trace_file << ": skipped " << trace->skipped.size() << " of "
        << trace->rows << " rows (first: line " << trace->skipped[0].line << ": "
        << trace->skipped[0].reason
        << "); report.json counts them by reason and lists the first 20\n";
  }
  absl::StatusOr<SimCluster> cluster = LoadCluster(cluster_arg, autoscale);
  if (!cluster.ok()) return fail(cluster.status());
  std::map<std::string, QueueSpec> queues;
  if (!queues_file.empty()) {
    absl::StatusOr<std::vector<manifest::Manifest>> ms = ReadManifests(queues_file);
    if (!ms.ok()) return fail(ms.status());
    for (const manifest::Manifest& m : *ms) {
      const Queue* q = std::get_if<Queue>(&m.object);
      if (q == nullptr) {
        return fail(absl::InvalidArgumentError(
            Cat(queues_file, ": document ", m.document, " is not a Queue")));
      }
      queues[q->metadata.name] = q->spec;
    }
  }

  if (policies.empty()) policies.push_back("default");
  ReportInput report;
  report.trace_file = std::filesystem::path(trace_file).filename().string();
  report.trace = &*trace;
  report.cluster = &*cluster;
  for (const std::string& arg : policies) {
    for (PredictionMode mode : modes) {
      absl::StatusOr<Policy> policy = LoadPolicy(arg);
      if (!policy.ok()) return fail(policy.status());
      SimOptions o = base;
      o.prediction.mode = mode;
      o.policy_name = policy->name + (mode == PredictionMode::kObserve ? "+observe"
                                      : mode == PredictionMode::kAct   ? "+predictive-drain"
                                                                       : "");
      o.policy = policy->config;
      o.queues = queues;
      for (const auto& [name, spec] : policy->queues) o.queues[name] = spec;
      auto started = std::chrono::steady_clock::now();
      o.progress = [&](int64_t done, int64_t total, int64_t sim_s) {
        double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        err << fmt::format(
            "sim[{}]: {}/{} jobs done, {:.1f} days simulated, {:.1f} s, {:.0f} jobs/s\n",
            o.policy_name, done, total, sim_s / 86400.0, wall, wall > 0 ? done / wall : 0.0);
      };
      absl::StatusOr<SimResult> r = Simulate(*trace, *cluster, o);
      if (!r.ok()) return fail(r.status());
      report.runs.push_back(std::move(*r));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return fail(absl::InternalError(Cat(out_dir, ": ", ec.message())));
  std::filesystem::path dir(out_dir);
  for (const auto& [name, text] :
       {std::pair<const char*, std::string>{"report.json", ReportJson(report)},
        {"report.html", ReportHtml(report)},
        {"jobs.csv", JobsCsv(report)}}) {
    if (absl::Status s = WriteFile(dir / name, text); !s.ok()) return fail(s);
  }
  out << SummaryTable(report);
  if (tco) {
    nlohmann::json all = nlohmann::json::array();
    for (const SimResult& run : report.runs) {
      TcoReport t = TcoOfRun(*trace, *cluster, run);
      out << "tco (" << run.policy_name << "):\n" << FormatTco(t);
      nlohmann::json j = {{"policy", run.policy_name},
                          {"gpuHours", t.gpu_hours},
                          {"cheapest", t.scenarios[t.cheapest].name},
                          {"scenarios", nlohmann::json::array()}};
      for (const TcoScenario& s : t.scenarios) {
        j["scenarios"].push_back({{"name", s.name}, {"usd", s.usd}, {"how", s.how}});
      }
      all.push_back(std::move(j));
    }
    if (absl::Status s = WriteFile(dir / "tco.json", all.dump(2) + "\n"); !s.ok()) return fail(s);
  }
  out << "report: " << (dir / "report.html").string() << ", " << (dir / "report.json").string()
      << "\n";
  return kExitOk;
}

}  // namespace gpucloud::sim
