#include "cli/cluster_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/job_status.h"
#include "api/paths.h"
#include "cli/gpuctl.h"
#include "cli/remote.h"
#include "cli/resources.h"
#include "cli/secret_commands.h"
#include "cli/service_commands.h"
#include "cli/top_format.h"
#include "core/text.h"

namespace gpucloud::cli {
namespace {

using Json = nlohmann::json;

const Json& Field(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string Str(const Json& j, const char* key, const std::string& fallback = "") {
  const Json& v = Field(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

int64_t Int(const Json& j, const char* key) {
  const Json& v = Field(j, key);
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

// The last line of `describe cluster`: whose figures these are and how old (a standby serves what
// the leader last published; a server from before asOfMs says neither).
std::string SummaryTime(const Json& c, int64_t now_ms) {
  if (!c.contains("asOfMs")) return "(since the server started)";
  const int64_t as_of = Int(c, "asOfMs");
  if (as_of == 0) return "(no figures yet: no leader has published any)";
  const int64_t age_s = (now_ms - as_of) / 1000;
  return age_s >= 5 ? Cat("(since the leading server began to lead; as of ", age_s, " s ago)")
                    : std::string("(since the leading server began to lead)");
}

std::string NodeState(const Json& node) {
  const Json& st = Field(node, "status");
  const Json& spec = Field(node, "spec");
  std::string s =
      Field(st, "ready").is_boolean() && Field(st, "ready").get<bool>() ? "Ready" : "NotReady";
  if (Field(spec, "draining").is_boolean() && Field(spec, "draining").get<bool>()) {
    s += ",Draining";
  } else if (Field(spec, "unschedulable").is_boolean() &&
             Field(spec, "unschedulable").get<bool>()) {
    s += ",SchedulingDisabled";
  }
  return s;
}

// "4xH100-80GB" and the like.
std::string GpuSummary(const Json& node) {
  std::map<std::string, int> by_type;
  for (const Json& g : Field(Field(node, "status"), "gpus")) ++by_type[Str(g, "type", "?")];
  std::vector<std::string> parts;
  for (const auto& [t, n] : by_type) parts.push_back(Cat(n, "x", t));
  return parts.empty() ? "-" : Join(parts, ",");
}

// GPUs held per node by jobs that hold some (from the jobs' placements).
struct NodeUse {
  std::map<std::string, std::set<int>> gpus;             // node -> GPU indexes held
  std::map<std::string, std::vector<std::string>> jobs;  // node -> "ns/job"
};

// The job's status through the API's type; nullopt for a status that does not decode, with the
// field it names in `error` (when given).
std::optional<api::JobStatus> StatusOf(const Json& job, std::string* error = nullptr) {
  absl::StatusOr<api::JobStatus> s = api::JobStatusOf(job);
  if (s.ok()) return *std::move(s);
  if (error != nullptr) *error = std::string(s.status().message());
  return std::nullopt;
}

std::string JobKey(const Json& job) {
  return Cat(Str(Field(job, "metadata"), "namespace"), "/", Str(Field(job, "metadata"), "name"));
}

NodeUse UseOf(const std::vector<Json>& jobs) {
  NodeUse use;
  for (const Json& job : jobs) {
    std::optional<api::JobStatus> st = StatusOf(job);
    if (!st || !st->HoldsGpus()) continue;  // one that does not decode: its placement is unknown
    std::string key = JobKey(job);
    for (const api::PlacedReplica& r : st->placement) {
      for (const api::PlacedGpu& g : r.gpus) use.gpus[r.node].insert(g.index);
      auto& list = use.jobs[r.node];
      if (list.empty() || list.back() != key) list.push_back(key);
    }
  }
  return use;
}

std::optional<Json> GetJson(const api::Client& client, const std::string& path, std::ostream& err,
                            const std::string& what = "") {
  std::optional<api::HttpResponse> r = Send(client, "GET", path, "", err, what);
  if (!r) return std::nullopt;
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    err << "gpuctl: the server's answer is not JSON\n";
    return std::nullopt;
  }
  return j;
}

std::vector<Json> Items(const Json& list) {
  std::vector<Json> out;
  for (const Json& i : Field(list, "items")) out.push_back(i);
  return out;
}

double Num(const Json& j, const char* key) {
  const Json& v = Field(j, key);
  return v.is_number() ? v.get<double>() : 0.0;
}

// `s`, or "-" when it is empty.
std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// GPU time in the unit that shows it: "42.0 GPU-s", "12.5 GPU-min", "3.20 GPU-h".
std::string GpuTime(double gpu_seconds) {
  if (gpu_seconds < 120) return fmt::format("{:.1f} GPU-s", gpu_seconds);
  if (gpu_seconds < 7200) return fmt::format("{:.1f} GPU-min", gpu_seconds / 60);
  return fmt::format("{:.2f} GPU-h", gpu_seconds / 3600);
}

// "allocated 1.20 GPU-h, productive 1.10, lost 0.05; goodput 91.7%", the current attempt
// included (its running time counted as productive until something interrupts it).
std::string GpuTimeLine(const api::JobStatus& st) {
  double allocated = st.gpu_seconds.allocated, productive = st.gpu_seconds.productive,
         lost = st.gpu_seconds.lost;
  if (api::IsActive(st.phase)) {
    int64_t now = absl::ToUnixMillis(absl::Now());
    if (st.scheduled_ms > 0)
      allocated += st.gpus * std::max<int64_t>(0, now - st.scheduled_ms) / 1000.0;
    if (st.attempt_started_ms > 0) {
      productive += st.gpus * std::max<int64_t>(0, now - st.attempt_started_ms) / 1000.0;
    }
  }
  if (allocated <= 0) return "-";
  return fmt::format("allocated {}, productive {}, lost {}; goodput {:.1f}%", GpuTime(allocated),
                     GpuTime(productive), GpuTime(lost), 100.0 * productive / allocated);
}

// "$12.34 (on-demand $10.00, spot $2.34); $3.49/hour now", the current attempt included; "-"
// when nothing was priced.
std::string CostLine(const api::JobStatus& st) {
  std::map<std::string, double> cost = api::CostSoFar(st, absl::ToUnixMillis(absl::Now()));
  double rate = 0;
  for (const auto& [billing, r] : st.usd_per_hour) rate += r;
  if (cost.empty()) return "-";
  double total = 0;
  std::vector<std::string> parts;
  for (const auto& [billing, v] : cost) {
    total += v;
    parts.push_back(fmt::format("{} ${:.2f}", billing, v));
  }
  std::string line = fmt::format("${:.2f} ({})", total, Join(parts, ", "));
  if (api::IsActive(st.phase) && rate > 0) line += fmt::format("; ${:.2f}/hour now", rate);
  return line;
}

// "2.40 kWh GPU energy, 0.96 kg CO2e" over the attempts that ended and the current one as last
// written; "-" when none was measured.
std::string EnergyLine(const api::JobStatus& st) {
  const double joules = st.energy_j + st.attempt_energy_j;
  if (joules <= 0) return "-";
  const double grams = st.co2e_g + st.attempt_energy_j / 3.6e6 * st.co2e_g_per_kwh;
  std::string line = fmt::format("{:.2f} kWh GPU energy", joules / 3.6e6);
  if (grams > 0) line += fmt::format(", {:.2f} kg CO2e", grams / 1000.0);
  return line;
}

// "2023-11-14T22:13:20Z (5m ago)" for an RFC 3339 time; the text as it is when it is not one.
std::string TimestampAndAge(const std::string& rfc3339, int64_t now_ms) {
  absl::Time t;
  std::string parse_error;
  if (!absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &parse_error)) return rfc3339;
  return Cat(rfc3339, " (", HumanAge(absl::ToUnixMillis(t), now_ms), ")");
}

}  // namespace

void PrintJobsTable(const std::vector<Json>& jobs, bool with_namespace, std::ostream& out,
                    bool wide) {
  if (with_namespace) out << fmt::format("{:<16} ", "NAMESPACE");
  out << fmt::format("{:<24} {:<11} {:>7}  {:<20} ", "NAME", "PHASE", "ATTEMPT", "NODES");
  if (wide) out << fmt::format("{:<16} {:>5}  ", "QUEUE", "GPUS");
  out << "MESSAGE\n";
  for (const Json& j : jobs) {
    std::string error;
    std::optional<api::JobStatus> decoded = StatusOf(j, &error);
    const api::JobStatus st = decoded.value_or(api::JobStatus{});
    std::set<std::string> nodes;
    for (const api::PlacedReplica& r : st.placement) nodes.insert(r.node);
    std::vector<std::string> node_list(nodes.begin(), nodes.end());
    // A status that does not decode shows as "?", with the field it got wrong.
    std::string message = decoded ? st.message : error;
    if (message.size() > 70) message = message.substr(0, 67) + "...";
    if (with_namespace) out << fmt::format("{:<16} ", Str(Field(j, "metadata"), "namespace"));
    out << fmt::format("{:<24} {:<11} {:>7}  {:<20} ", Str(Field(j, "metadata"), "name"),
                       decoded ? api::PhaseName(st.phase) : "?", st.attempt,
                       node_list.empty() ? "-" : Join(node_list, ","));
    if (wide) {
      out << fmt::format("{:<16} {:>5}  ", Str(Field(j, "spec"), "queue", "default"),
                         fmt::format("{:g}", st.gpus));
    }
    out << message << "\n";
  }
}

void PrintNodesTable(const std::vector<Json>& nodes, std::ostream& out, bool wide) {
  out << fmt::format("{:<20} {:<28} {:<18} {:>6} {:>9}  ", "NAME", "STATUS", "GPUS", "CPU",
                     "MEMORY");
  if (wide) out << fmt::format("{:<16} {:<10} ", "POOL", "DRIVER");
  out << "ADDRESS\n";
  for (const Json& n : nodes) {
    const Json& st = Field(n, "status");
    out << fmt::format("{:<20} {:<28} {:<18} {:>6} {:>8}G  ", Str(Field(n, "metadata"), "name"),
                       NodeState(n), GpuSummary(n), Int(st, "cpuMilli") / 1000,
                       Int(st, "memoryMiB") / 1024);
    if (wide) {
      out << fmt::format("{:<16} {:<10} ", Str(Field(n, "spec"), "pool", "-"),
                         Str(st, "driverVersion", "-"));
    }
    out << Str(st, "address") << "\n";
  }
}

int Describe(const api::Client& client, const std::string& resource, const std::string& name,
             const std::string& ns, std::ostream& out, std::ostream& err) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  if (resource == "job" || resource == "jobs") {
    std::optional<Json> job = GetJson(client, api::JobPath(ns, name), err);
    if (!job) return kExitInvalid;
    std::string error;
    std::optional<api::JobStatus> decoded = StatusOf(*job, &error);
    if (!decoded) {
      err << "gpuctl: job " << ns << "/" << name << ": " << error << "\n";
      return kExitInvalid;
    }
    const api::JobStatus& st = *decoded;
    const Json& meta = Field(*job, "metadata");
    out << "Name:          " << Str(meta, "name") << "\n"
        << "Namespace:     " << Str(meta, "namespace") << "\n"
        << "UID:           " << Str(meta, "uid") << "\n"
        << "Created:       " << TimestampAndAge(Str(meta, "creationTimestamp"), now) << "\n"
        << "Queue:         " << Str(Field(*job, "spec"), "queue", "default") << "\n"
        << "Phase:         " << api::PhaseName(st.phase) << "\n"
        << "Reason:        " << OrDash(st.reason) << "\n"
        << "Message:       " << OrDash(st.message) << "\n"
        << "Attempt:       " << st.attempt << " (restarts after failures " << st.restarts
        << ", after interruptions " << st.interruptions << ")\n"
        << "Checkpoints:   " << OrDash(st.checkpoint_dir)
        << (st.last_checkpoint_ms > 0
                ? Cat("  (newest seen ", HumanAge(st.last_checkpoint_ms, now), ")")
                : "")
        << "\n"
        << "GPU time:      " << GpuTimeLine(st) << "\n"
        << "Cost:          " << CostLine(st) << "\n"
        << "Energy:        " << EnergyLine(st) << "\n"
        << "Recoveries:    " << st.recoveries
        << (st.recoveries > 0
                ? Cat(" (the last back to running in ", st.last_recovery_ms / 1000.0, " s)")
                : "")
        << "\n"
        << "Submitted:     " << HumanAge(st.submitted_ms, now)
        << "  first started: " << HumanAge(st.started_ms, now)
        << "  this attempt scheduled: " << HumanAge(st.scheduled_ms, now)
        << "  finished: " << HumanAge(st.finished_ms, now) << "\n";
    if (!st.placement.empty()) {
      out << "Tasks:\n";
      out << fmt::format("  {:<6} {:<12} {:<16} {:<12} {}\n", "RANK", "TASK", "NODE", "GPUS",
                         "STATE");
      for (const api::PlacedReplica& r : st.placement) {
        std::vector<std::string> gpus;
        for (const api::PlacedGpu& g : r.gpus) gpus.push_back(std::to_string(g.index));
        auto state = st.tasks.find(r.name);
        out << fmt::format("  {:<6} {:<12} {:<16} {:<12} {}\n", r.rank, r.task, r.node,
                           gpus.empty() ? "-" : Join(gpus, ","),
                           state == st.tasks.end() ? "-" : state->second);
      }
    }
    out << "Events:\n";
    return Events(client, name, ns, out, err);
  }
  if (resource == "secret" || resource == "secrets") {
    return DescribeSecret(ClientCall(client), ns, name, out, err);
  }
  if (const ResourceType* t = FindResourceType(resource); t && t->plural == "inferenceservices") {
    std::optional<Json> svc = GetJson(client, Cat(t->Collection(ns), "/", name), err);
    if (!svc) return kExitInvalid;
    DescribeService(*svc, out);
    return 0;
  }
  if (resource == "node" || resource == "nodes") {
    std::optional<Json> node = GetJson(client, api::NodePath(name), err);
    if (!node) return kExitInvalid;
    const Json& st = Field(*node, "status");
    out << "Name:          " << Str(Field(*node, "metadata"), "name") << "\n"
        << "Status:        " << NodeState(*node) << " (" << Str(st, "readyReason") << ": "
        << Str(st, "readyMessage") << ")\n"
        << "Address:       " << Str(st, "address") << "  Hostname: " << Str(st, "hostname") << "\n"
        << "Pool:          " << Str(Field(*node, "spec"), "pool", "-") << "\n"
        << "Driver:        " << Str(st, "driverVersion", "-")
        << "  CUDA: " << Int(st, "cudaVersion") << "  Backend: " << Str(st, "backend") << "\n"
        << "Capacity:      " << Int(st, "cpuMilli") / 1000 << " CPUs, "
        << Int(st, "memoryMiB") / 1024 << " GiB, " << GpuSummary(*node) << "\n";
    std::optional<Json> jobs = GetJson(client, api::AllJobsPath(), err, "jobs (admins only)");
    NodeUse use = jobs ? UseOf(Items(*jobs)) : NodeUse{};
    out << "GPUs:\n";
    out << fmt::format("  {:<5} {:<14} {:<44} {:<8} {}\n", "INDEX", "TYPE", "UUID", "HEALTHY",
                       "USED");
    for (const Json& g : Field(st, "gpus")) {
      bool used = use.gpus[name].contains(static_cast<int>(Int(g, "index")));
      out << fmt::format(
          "  {:<5} {:<14} {:<44} {:<8} {}\n", Int(g, "index"), Str(g, "type"), Str(g, "uuid"),
          Field(g, "healthy").is_boolean() && !Field(g, "healthy").get<bool>() ? "no" : "yes",
          used ? "yes" : "-");
    }
    const Json& topo = Field(st, "gpuTopology");
    if (topo.is_array() && !topo.empty()) {
      out << "GPU topology:  (nvidia-smi topo -m)\n" << fmt::format("  {:<6}", "");
      for (size_t j = 0; j < topo.size(); ++j) out << fmt::format(" {:<6}", Cat("GPU", j));
      out << "\n";
      for (size_t i = 0; i < topo.size(); ++i) {
        out << fmt::format("  {:<6}", Cat("GPU", i));
        for (const Json& cell : topo[i])
          out << fmt::format(" {:<6}", cell.is_string() ? cell.get<std::string>() : "?");
        out << "\n";
      }
    }
    out << "Jobs:          " << (use.jobs[name].empty() ? "-" : Join(use.jobs[name], ", ")) << "\n";
    return kExitOk;
  }
  if (resource == "cluster") {
    std::optional<Json> c = GetJson(client, api::ClusterPath(), err);
    if (!c) return kExitInvalid;
    const Json& nodes = Field(*c, "nodes");
    const Json& jobs = Field(*c, "jobGpuSeconds");
    const Json& rec = Field(*c, "recoveries");
    const Json& secs = Field(*c, "gpuSeconds");
    out << "Nodes:         " << Int(nodes, "ready") << " Ready, " << Int(nodes, "notReady")
        << " NotReady\n";
    out << "GPUs:         ";
    for (auto it = Field(*c, "gpus").begin(); it != Field(*c, "gpus").end(); ++it) {
      out << fmt::format(" {} {:g} of {}", it.key(), Num(it.value(), "allocated"),
                         Int(it.value(), "total"));
    }
    out << (Field(*c, "gpus").empty() ? " -" : " allocated") << "\n";
    out << fmt::format("Availability:  {:.4f}% of {} registered (GPU on a Ready node, healthy)\n",
                       100 * Num(*c, "availability"), GpuTime(Num(secs, "registered")));
    out << fmt::format("Job GPU time:  allocated {}, productive {}, lost {}; goodput {:.1f}%\n",
                       GpuTime(Num(jobs, "allocated")), GpuTime(Num(jobs, "productive")),
                       GpuTime(Num(jobs, "lost")), 100 * Num(jobs, "goodput"));
    out << fmt::format("Recoveries:    {} (mean {:.1f} s, max {:.1f} s to running again)\n",
                       Int(rec, "count"), Num(rec, "meanSeconds"), Num(rec, "maxSeconds"));
    out << SummaryTime(*c, absl::ToUnixMillis(absl::Now())) << "\n";
    return kExitOk;
  }
  err << "gpuctl describe: RESOURCE is job, node, secret or cluster\n";
  return kExitUsage;
}

absl::StatusOr<std::string> LogsTarget(const LogsOptions& o) {
  std::string path = api::JobSubresourcePath(o.ns, o.job, Cat("logs?rank=", o.rank));
  if (o.attempt > 0) path += Cat("&attempt=", o.attempt);
  if (o.tail >= 0) path += Cat("&tailLines=", o.tail);
  if (!o.since.empty()) {
    absl::Duration d;
    if (!absl::ParseDuration(o.since, &d) || d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          Cat("--since \"", o.since, "\" is not a positive duration (like 30s, 5m or 2h)"));
    }
    path += Cat("&sinceSeconds=", absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
  }
  if (o.timestamps) path += "&timestamps=true";
  if (o.previous) path += "&previous=true";
  if (o.follow) path += "&follow=true";
  return path;
}

int Logs(const api::Client& client, const LogsOptions& o, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> path = LogsTarget(o);
  if (!path.ok()) {
    err << "gpuctl logs: " << path.status().message() << "\n";
    return kExitUsage;
  }
  if (!o.follow) {
    std::optional<api::HttpResponse> r = Send(client, "GET", *path, "", err);
    if (!r) return kExitInvalid;
    out << r->body;
    return kExitOk;
  }
  absl::StatusOr<api::HttpResponse> r = client.Stream(*path, [&](const std::string& line) {
    out << line << "\n";
    out.flush();
  });
  if (!r.ok() || r->status != 200) {
    err << "gpuctl: " << (r.ok() ? StatusMessage(*r) : std::string(r.status().message())) << "\n";
    return kExitInvalid;
  }
  return kExitOk;
}

int Events(const api::Client& client, const std::string& job, const std::string& ns,
           std::ostream& out, std::ostream& err) {
  std::optional<Json> list = GetJson(client, api::JobSubresourcePath(ns, job, "events"), err);
  if (!list) return kExitInvalid;
  out << fmt::format("  {:<24} {:<8} {:<14} {}\n", "TIME", "TYPE", "REASON", "MESSAGE");
  for (const Json& e : Field(*list, "items")) {
    out << fmt::format("  {:<24} {:<8} {:<14} {}\n", Str(e, "timestamp"), Str(e, "type"),
                       Str(e, "reason"), Str(e, "message"));
  }
  return kExitOk;
}

int Cancel(const api::Client& client, const std::string& job, const std::string& ns,
           std::ostream& out, std::ostream& err) {
  std::optional<api::HttpResponse> r =
      Send(client, "POST", api::JobSubresourcePath(ns, job, "cancel"), "", err);
  if (!r) return kExitInvalid;
  out << StatusMessage(*r) << "\n";
  return kExitOk;
}

int NodeVerb(const api::Client& client, const std::string& verb, const std::string& node,
             std::ostream& out, std::ostream& err, int seconds) {
  std::string path = api::NodeVerbPath(node, verb);
  if (verb == "reclaim") path += Cat("?seconds=", seconds);
  if (!Send(client, "POST", path, "", err)) return kExitInvalid;
  out << "node " << node
      << (verb == "cordon"     ? " cordoned"
          : verb == "uncordon" ? " uncordoned"
          : verb == "drain"
              ? " draining"
              : Cat(" is reclaimed in ", seconds, " s: its jobs checkpoint and requeue"))
      << "\n";
  return kExitOk;
}

namespace {

// POSTs an operator's verb ("reclaim?seconds=60") on every node of a pool; the names of the
// nodes it reached ("a, b"), or nullopt (the error said on `err`).
std::optional<std::string> PostPoolVerb(const api::Client& client, const std::string& pool,
                                        const std::string& verb, std::ostream& err) {
  std::optional<api::HttpResponse> r = Send(client, "POST", api::PoolPath(pool, verb), "", err);
  if (!r) return std::nullopt;
  Json j = Json::parse(r->body, nullptr, false);
  std::vector<std::string> nodes;
  for (const Json& n : Field(j, "nodes"))
    nodes.push_back(n.is_string() ? n.get<std::string>() : "?");
  return Join(nodes, ", ");
}

}  // namespace

int ReclaimPool(const api::Client& client, const std::string& pool, int seconds, std::ostream& out,
                std::ostream& err) {
  std::optional<std::string> nodes =
      PostPoolVerb(client, pool, Cat("reclaim?seconds=", seconds), err);
  if (!nodes) return kExitInvalid;
  out << "pool " << pool << " (" << *nodes << ") is reclaimed in " << seconds
      << " s: its jobs checkpoint and requeue\n";
  return kExitOk;
}

int PrePullPool(const api::Client& client, const std::string& pool, const std::string& image,
                std::ostream& out, std::ostream& err) {
  std::optional<std::string> nodes = PostPoolVerb(client, pool, "prepull?image=" + image, err);
  if (!nodes) return kExitInvalid;
  out << "pool " << pool << " (" << *nodes << ") pulls " << image
      << " ahead of its tasks (its agents log when they have it)\n";
  return kExitOk;
}

GpuCounts CountGpus(const Json& node, const std::set<int>& held) {
  GpuCounts c;
  const Json& gpus = Field(Field(node, "status"), "gpus");
  if (!gpus.is_array()) return c;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const Json& g = gpus[i];
    int index = Field(g, "index").is_number_integer() ? Field(g, "index").get<int>() : int(i);
    ++c.total;
    if (held.contains(index)) {
      ++c.used;
    } else if ((Field(g, "healthy").is_boolean() && !Field(g, "healthy").get<bool>()) ||
               (Field(g, "atRisk").is_boolean() && Field(g, "atRisk").get<bool>())) {
      ++c.out;
    } else {
      ++c.free;
    }
  }
  return c;
}

int TopNodes(const api::Client& client, std::ostream& out, std::ostream& err) {
  std::optional<Json> nodes = GetJson(client, api::NodesPath(), err);
  if (!nodes) return kExitInvalid;
  std::optional<Json> jobs = GetJson(client, api::AllJobsPath(), err, "jobs (admins only)");
  if (!jobs) return kExitInvalid;
  NodeUse use = UseOf(Items(*jobs));
  std::vector<TopNodeRow> rows;
  for (const Json& n : Items(*nodes)) {
    std::string name = Str(Field(n, "metadata"), "name");
    rows.push_back(
        {name, NodeState(n), CountGpus(n, use.gpus[name]), TopUsageOf(n), use.jobs[name]});
  }
  out << FormatTopNodes(rows);
  return kExitOk;
}

int TopJobs(const api::Client& client, const std::string& ns, std::ostream& out,
            std::ostream& err) {
  std::optional<Json> jobs = ns.empty() ? GetJson(client, api::AllJobsPath(), err,
                                                  "jobs of every namespace (admins only; -n NS)")
                                        : GetJson(client, api::JobsPath(ns), err);
  if (!jobs) return kExitInvalid;
  std::vector<TopJobRow> rows;
  for (const Json& job : Items(*jobs)) {
    std::optional<api::JobStatus> st = StatusOf(job);
    if (!st || !st->HoldsGpus()) continue;
    TopJobRow row{JobKey(job), 0, TopUsageOf(st->gpu_usage), {}};
    for (const api::PlacedReplica& r : st->placement) {
      row.gpus += static_cast<int>(r.gpus.size());
      if (std::find(row.nodes.begin(), row.nodes.end(), r.node) == row.nodes.end())
        row.nodes.push_back(r.node);
    }
    rows.push_back(std::move(row));
  }
  out << FormatTopJobs(rows);
  return kExitOk;
}

std::string HumanDuration(int64_t seconds) {
  seconds = std::max<int64_t>(0, seconds);
  if (seconds < 60) return Cat(seconds, "s");
  int64_t minutes = seconds / 60;
  if (minutes < 60) {
    return minutes < 10 && seconds % 60 ? Cat(minutes, "m", seconds % 60, "s") : Cat(minutes, "m");
  }
  int64_t hours = minutes / 60;
  if (hours < 24) return minutes % 60 ? Cat(hours, "h", minutes % 60, "m") : Cat(hours, "h");
  return hours % 24 ? Cat(hours / 24, "d", hours % 24, "h") : Cat(hours / 24, "d");
}

std::string HumanAge(int64_t then_ms, int64_t now_ms) {
  if (then_ms <= 0) return "-";
  return HumanDuration((now_ms - then_ms) / 1000) + " ago";
}

int WaitForDrain(const CallFn& call, const std::string& node, absl::Duration timeout,
                 const Clock& clock, const std::function<void(absl::Duration)>& sleep,
                 std::ostream& out, std::ostream& err) {
  const int64_t deadline = clock.NowMillis() + absl::ToInt64Milliseconds(timeout);
  while (true) {
    std::optional<api::HttpResponse> r =
        SendRequest(call, "GET", api::AllJobsPath(), "", err, "jobs (admins only)");
    if (!r) return kExitInvalid;
    Json list = Json::parse(r->body, nullptr, false);
    std::vector<std::string> left = UseOf(Items(list)).jobs[node];
    if (left.empty()) {
      out << "node " << node << " drained\n";
      return kExitOk;
    }
    if (clock.NowMillis() >= deadline) {
      err << "gpuctl drain: node " << node << " still runs " << Join(left, ", ") << " after "
          << absl::FormatDuration(timeout) << "\n";
      return kExitInvalid;
    }
    sleep(absl::Seconds(1));
  }
}

}  // namespace gpucloud::cli
