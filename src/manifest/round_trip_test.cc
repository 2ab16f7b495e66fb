// Printing and parsing round-trip: parse -> print -> parse gives the same object, for every
// example and for randomized specs, in YAML and in JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/clock.h"
#include "core/parse.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

std::string Errors(const ParseResult& r) {
  std::string out;
  for (const Diagnostic& d : r.errors) out += d.ToString() + "\n";
  return out;
}

// Prints `o` in `format`, parses it back, and checks the object is unchanged.
void ExpectRoundTrip(const Object& o, bool json) {
  std::string text = json ? ToJson(o) : ToYaml(o);
  ParseResult r = ParseManifests(text, json ? "rt.json" : "rt.yaml");
  ASSERT_TRUE(r.ok()) << Errors(r) << text;
  ASSERT_EQ(r.manifests.size(), 1u) << text;
  EXPECT_TRUE(r.manifests[0].object == o) << text;
  // Printing is a fixed point: the normalized form prints the same again.
  EXPECT_EQ(json ? ToJson(r.manifests[0].object) : ToYaml(r.manifests[0].object), text);
  if (json) {  // the controller's reading of a stored document gives the same object
    ParseResult stored = ParseStoredManifest(nlohmann::ordered_json::parse(text), "store");
    ASSERT_TRUE(stored.ok()) << Errors(stored) << text;
    ASSERT_EQ(stored.manifests.size(), 1u) << text;
    EXPECT_TRUE(stored.manifests[0].object == o) << text;
  }
}

TEST(RoundTrip, EveryExample) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::string(GPUCLOUD_SOURCE_DIR) + "/examples")) {
    if (!entry.is_regular_file()) continue;
    std::string ext = entry.path().extension().string();
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
    // examples/agent holds the agent's own configs (simulated GPUs), examples/grafana
    // dashboards: not manifests.
    std::string dir = entry.path().parent_path().filename().string();
    if (dir == "agent" || dir == "grafana") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    ParseResult r = ParseManifests(ss.str(), entry.path().string());
    ASSERT_TRUE(r.ok()) << Errors(r);
    for (const Manifest& m : r.manifests) {
      SCOPED_TRACE(entry.path().string());
      ExpectRoundTrip(m.object, /*json=*/false);
      ExpectRoundTrip(m.object, /*json=*/true);
    }
  }
}

// What `kubectl get -o yaml` prints (quantities as strings) reads as the same object as the
// numbers, and that object round-trips.
TEST(RoundTrip, QuotedQuantities) {
  auto parse = [](const std::string& gpu, const std::string& cpu) {
    ParseResult r = ParseManifests(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        "  containers:\n  - name: c\n    command: [python3]\n"
        "    resources:\n      limits: {nvidia.com/gpu: " +
            gpu + ", cpu: " + cpu + ", memory: \"1Gi\"}\n",
        "q.yaml");
    EXPECT_TRUE(r.ok()) << Errors(r);
    return r.ok() ? r.manifests[0].object : Object{};
  };
  Object quoted = parse("\"4\"", "\"250m\"");
  EXPECT_TRUE(quoted == parse("4", "0.25"));
  EXPECT_EQ(std::get<Job>(quoted).spec.tasks[0].resources.gpu.count, 4);
  ExpectRoundTrip(quoted, /*json=*/false);
  ExpectRoundTrip(quoted, /*json=*/true);
}

// Random but valid specs, built from the catalog so MIG profiles and types agree.
class SpecGenerator {
 public:
  explicit SpecGenerator(uint64_t seed) : rng_(seed) {}

  Object Next() {
    switch (rng_.Uniform(10)) {
      case 0:
        return RandomQueue();
      case 1:
        return RandomPool();
      case 2:
        return RandomSchedulerConfiguration();
      default:
        return RandomJob();
    }
  }

 private:
  std::string Name(std::string_view prefix) {
    return std::string(prefix) + std::to_string(rng_.Uniform(1000));
  }

  Object RandomSchedulerConfiguration() {
    SchedulerConfiguration c;
    c.metadata.name = Name("profile");
    c.metadata.namespace_.clear();
    SchedulerConfig& s = c.spec;
    s.ordering = static_cast<QueueOrdering>(rng_.Uniform(3));
    s.backfill = rng_.OneIn(2);
    s.estimate_start_times = rng_.OneIn(2);
    s.fair_share = rng_.OneIn(2);
    s.fair_share_window_s = 60 * (1 + static_cast<int64_t>(rng_.Uniform(100000)));
    s.preemption = rng_.OneIn(2);
    s.preemption_grace_s = static_cast<int64_t>(rng_.Uniform(600));
    if (rng_.OneIn(3)) s.filters = {"NodeHealth", "GpuType"};
    s.scores.clear();
    if (rng_.OneIn(2)) s.scores.push_back({"BinPack", static_cast<int32_t>(rng_.Uniform(10)), {}});
    if (rng_.OneIn(2)) {
      ScorePluginConfig f{"Fragmentation", 1 + static_cast<int32_t>(rng_.Uniform(5)), {}};
      for (uint64_t i = rng_.Uniform(4); i > 0; --i) {
        f.workload.push_back({MilliGpu(1 + static_cast<int64_t>(rng_.Uniform(16000))),
                              static_cast<double>(1 + rng_.Uniform(100000)) / 1000});
      }
      s.scores.push_back(std::move(f));
    }
    s.namespace_budget.max_waiting = static_cast<int32_t>(rng_.Uniform(5000));
    s.namespace_budget.max_searches = static_cast<int32_t>(rng_.Uniform(500));
    return c;
  }

  // Strings that need quoting in YAML, and some that do not.
  std::string Text() {
    static const char* kTexts[] = {"train.py", "--lr=0.1", "true",  "123",    "1.5", "",     "null",
                                   "a b",      "x: y",     "#hash", "- dash", "~",   "0x1F", "é"};
    return kTexts[rng_.Uniform(std::size(kTexts))];
  }

  const GpuType& RandomType(bool mig) {
    const auto& types = GpuCatalog::Default().types();
    while (true) {
      const GpuType& t = types[rng_.Uniform(types.size())];
      if (!mig || t.mig_capable()) return t;
    }
  }

  GpuRequest RandomGpu() {
    GpuRequest g;
    switch (rng_.Uniform(4)) {
      case 0:
        return g;
      case 1:
        g.mode = GpuMode::kWhole;
        g.count = static_cast<int32_t>(rng_.Range(1, 8));
        if (rng_.OneIn(2)) g.types = {RandomType(false).name};
        return g;
      case 2: {
        const GpuType& t = RandomType(true);
        g.mode = GpuMode::kMig;
        g.count = static_cast<int32_t>(rng_.Range(1, 3));
        g.mig_profile = t.mig_profiles[rng_.Uniform(t.mig_profiles.size())].name;
        g.types = {t.name};
        return g;
      }
      default: {
        const GpuType& t = RandomType(false);
        g.mode = GpuMode::kShared;
        g.fraction = MilliGpu(rng_.Range(1, 1000));
        if (rng_.OneIn(2)) g.memory = MiB(rng_.Range(1, t.memory.raw()));
        g.sharing = rng_.OneIn(2) ? GpuSharing::kMps : GpuSharing::kTimeSlicing;
        g.types = {t.name};
        return g;
      }
    }
  }

  Object RandomJob() {
    Job j;
    j.metadata.name = Name("job-");
    j.metadata.namespace_ = Name("team-");
    if (rng_.OneIn(2)) j.metadata.labels["app"] = Name("v");
    if (rng_.OneIn(3)) j.metadata.annotations["note"] = Text();
    int tasks = static_cast<int>(rng_.Range(1, 3));
    for (int i = 0; i < tasks; ++i) {
      TaskSpec t;
      t.name = "task" + std::to_string(i);
      t.replicas = static_cast<int32_t>(rng_.Range(1, 16));
      if (rng_.OneIn(2)) t.image = "registry/img:" + std::to_string(rng_.Uniform(10));
      if (rng_.OneIn(3)) t.image = "registry.local:5000/team/img@sha256:" + std::string(64, 'a');
      t.image_pull_policy = static_cast<PullPolicy>(rng_.Uniform(4));
      if (rng_.OneIn(2)) t.security_context.run_as_user = rng_.Range(1, kMaxPosixId);
      if (rng_.OneIn(2)) t.security_context.run_as_group = rng_.Range(0, kMaxPosixId);
      if (rng_.OneIn(2)) t.security_context.run_as_non_root = true;
      for (int k = static_cast<int>(rng_.Uniform(3)); k > 0; --k) t.command.push_back(Text());
      for (int k = static_cast<int>(rng_.Uniform(3)); k > 0; --k) t.args.push_back(Text());
      for (int k = static_cast<int>(rng_.Uniform(3)); k > 0; --k) {
        t.env.push_back({"VAR" + std::to_string(k), Text()});
      }
      if (rng_.OneIn(3)) t.working_dir = "/work";
      t.resources.gpu = RandomGpu();
      t.resources.cpu = MilliCpu(rng_.Range(0, 64'000));
      t.resources.memory = MiB(rng_.Range(0, 1 << 20));
      j.spec.tasks.push_back(std::move(t));
    }
    j.spec.min_available = static_cast<int32_t>(rng_.Range(1, j.spec.TotalReplicas()));
    j.spec.queue = Name("q");
    j.spec.priority = static_cast<int32_t>(rng_.Range(-kMaxPriority, kMaxPriority));
    j.spec.billing = static_cast<BillingClass>(rng_.Uniform(3));
    if (rng_.OneIn(2)) j.spec.node_selector["zone"] = Name("z");
    if (rng_.OneIn(3)) {
      j.spec.tolerations.push_back(
          {.key = "gpucloud.io/spot", .exists = true, .effect = "NoSchedule"});
    }
    if (rng_.OneIn(2))
      j.spec.min_cuda_version = static_cast<int>(rng_.Range(11, 12) * 1000 + rng_.Range(0, 9) * 10);
    if (rng_.OneIn(2)) {
      bool local = rng_.OneIn(2);
      j.spec.checkpoint = {"/ckpt/" + j.metadata.name, rng_.Range(0, 7200), local,
                           local && rng_.OneIn(2)};
    }
    j.spec.restart = {static_cast<int32_t>(rng_.Range(0, 10)), rng_.Range(0, 600)};
    if (rng_.OneIn(2)) j.spec.runtime_estimate_seconds = rng_.Range(0, 86400 * 3);
    if (rng_.OneIn(3)) j.spec.ssh = SshKeysSpec{rng_.OneIn(2) ? "/root/.ssh" : "/home/mpi/.ssh"};
    return j;
  }

  Object RandomQueue() {
    Queue q;
    q.metadata.name = Name("queue-");
    q.metadata.namespace_.clear();
    q.spec.weight = static_cast<int32_t>(rng_.Range(1, 100));
    q.spec.may_borrow = rng_.OneIn(2);
    q.spec.may_lend = rng_.OneIn(2);
    q.spec.ordering = static_cast<QueueOrdering>(rng_.Uniform(3));
    if (rng_.OneIn(2)) {
      GpuQuota quota{.gpu_type = RandomType(false).name,
                     .guaranteed = MilliGpu(rng_.Range(0, 64'000))};
      if (rng_.OneIn(2)) quota.max = quota.guaranteed + MilliGpu(rng_.Range(0, 10'000));
      q.spec.quota.push_back(quota);
    }
    return q;
  }

  Object RandomPool() {
    NodePool p;
    p.metadata.name = Name("pool-");
    p.metadata.namespace_.clear();
    p.spec.gpu_type = RandomType(false).name;
    p.spec.gpus_per_node = static_cast<int32_t>(rng_.Range(1, 16));
    p.spec.min_nodes = static_cast<int32_t>(rng_.Range(0, 10));
    p.spec.max_nodes = p.spec.min_nodes + static_cast<int32_t>(rng_.Range(1, 10));
    p.spec.billing = static_cast<BillingClass>(rng_.Uniform(3));
    if (rng_.OneIn(2)) p.spec.price_per_gpu_hour = MicroUsd(rng_.Range(0, 20'000'000));
    if (rng_.OneIn(2)) p.spec.carbon_intensity = static_cast<int32_t>(rng_.Range(0, 2'000));
    if (rng_.OneIn(2)) {  // contiguous periods, the last open-ended or not
      int64_t t = 1'796'083'200'000 + rng_.Range(0, 1'000) * 1000;
      const int n = static_cast<int>(rng_.Range(1, 4));
      for (int i = 0; i < n; ++i) {
        PricePeriod period{.from_ms = t, .price_per_gpu_hour = MicroUsd(rng_.Range(0, 9'000'000))};
        t += rng_.Range(1, 100'000) * 1000;
        if (i + 1 < n || rng_.OneIn(2)) period.until_ms = t;
        p.spec.price_schedule.push_back(period);
      }
    }
    if (rng_.OneIn(2)) p.spec.taints.push_back({"gpucloud.io/spot", "true", "NoSchedule"});
    return p;
  }

  Rng rng_;
};

TEST(RoundTrip, RandomizedSpecs) {
  SpecGenerator gen(20261130);
  for (int i = 0; i < 500; ++i) {
    Object o = gen.Next();
    SCOPED_TRACE(i);
    ExpectRoundTrip(o, /*json=*/i % 2 == 0);
    if (HasFatalFailure() || HasNonfatalFailure()) break;
  }
}

}  // namespace
}  // namespace gpucloud::manifest
