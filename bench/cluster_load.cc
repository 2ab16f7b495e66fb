// Cluster load generator (issue 5): against a running `gpucloud server`, it
//   1. joins A simulated agents (each gets its own node certificate with the bootstrap token,
//      as agents do), registers them (8 GPUs each), each on its own keep-alive mutual-TLS
//      connection, and keeps them heartbeating once a second for the rest of the run;
//   2. on that otherwise idle cluster, submits jobs one at a time and reads how long each took
//      from submission to binding (the server's own timestamps: status.submittedMs and
//      status.scheduledMs);
//   3. adds R job creates per second for S seconds, and reports the achieved rates and the
//      latency percentiles of heartbeats and creates as the clients saw them.
// Each agent also keeps a watch on its assignments open, as the real agent does (a second
// connection, with bookmarks), unless WATCH=0; the watches' events are counted.
// The server's CPU and memory are measured from outside (scripts/bench-cluster).
// Usage: [HOLD_SECONDS=N] cluster_load DATA_DIR [AGENTS=2000] [CREATES_PER_S=500] [SECONDS=30]
//                     [THREADS=16] [WATCH=1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent/node_identity.h"
#include "api/client.h"
#include "api/wire.h"
#include "core/text.h"

using gpucloud::Cat;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

namespace {

struct Latencies {
  std::mutex mu;
  std::vector<double> ms;
  int64_t errors = 0;
  void Add(double v) {
    std::lock_guard l(mu);
    ms.push_back(v);
  }
  void Error() {
    std::lock_guard l(mu);
    ++errors;
  }
  std::string Summary(const char* what, double seconds) {
    std::lock_guard l(mu);
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) {
      return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
    };
    return Cat(what, ": ", ms.size(), " ok (", static_cast<int64_t>(ms.size() / seconds), "/s), ",
               errors, " errors; latency ms p50 ", pct(0.5), " p90 ", pct(0.9), " p99 ", pct(0.99),
               " max ", ms.empty() ? 0.0 : ms.back());
  }
};

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string NodeBody(int i) {
  gpucloud::api::NodeInfo n;
  n.name = Cat("load-", i);
  n.address = Cat("10.", i / 250, ".", i % 250, ".1");
  n.cpu_milli = 128'000;
  n.memory_mib = 1 << 20;
  n.backend = "simulated";
  for (int g = 0; g < 8; ++g) {
    gpucloud::Gpu gpu;
    gpu.index = g;
    gpu.uuid = Cat("GPU-load-", i, "-", g);
    gpu.type = "H100-80GB";
    gpu.memory = gpucloud::MiB(80 << 10);
    n.gpus.push_back(gpu);
  }
  return gpucloud::api::NodeToJson(n, false);
}

std::string JobBody(const std::string& name) {
  return Cat(
      "apiVersion: gpucloud/v1\nkind: Job\nmetadata: {name: ", name,
      "}\nspec:\n  tasks:\n  - name: main\n    command: ['true']\n    resources: {gpu: 1}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: cluster_load DATA_DIR [AGENTS] [CREATES_PER_S] [SECONDS] [THREADS]\n");
    return 2;
  }
  std::string dir = argv[1];
  int agents = argc > 2 ? std::atoi(argv[2]) : 2000;
  int rate = argc > 3 ? std::atoi(argv[3]) : 500;
  int seconds = argc > 4 ? std::atoi(argv[4]) : 30;
  int threads = argc > 5 ? std::atoi(argv[5]) : 16;
  bool watch = argc > 6 ? std::atoi(argv[6]) != 0 : true;
  absl::StatusOr<gpucloud::api::ClientConfig> admin =
      gpucloud::api::LoadClientConfig(dir + "/admin.config");
  if (!admin.ok()) {
    std::fprintf(stderr, "%s\n", std::string(admin.status().message()).c_str());
    return 1;
  }
  gpucloud::api::ClientConfig bootstrap = *admin;
  std::ifstream(dir + "/bootstrap.token") >> bootstrap.token;

  // 1. Agents: join (each its own node certificate, as agents do), register, then heartbeat
  // once a second each, spread over the second.
  std::vector<gpucloud::api::ClientConfig> node_configs;
  std::filesystem::create_directories(dir + "/load-certs");
  for (int i = 0; i < agents; ++i) {
    std::string path = Cat(dir, "/load-certs/load-", i, ".pem");
    absl::StatusOr<gpucloud::agent::NodeCertificateInfo> cert =
        gpucloud::agent::RequestNodeCertificate(gpucloud::api::Client(bootstrap), Cat("load-", i),
                                                path);
    if (!cert.ok()) {
      std::fprintf(stderr, "load-%d cannot join: %s\n", i,
                   std::string(cert.status().message()).c_str());
      return 1;
    }
    node_configs.push_back(gpucloud::agent::WithNodeCredential(bootstrap, path));
  }
  std::vector<std::unique_ptr<gpucloud::api::Client>> clients;
  for (int i = 0; i < agents; ++i)
    clients.push_back(std::make_unique<gpucloud::api::Client>(node_configs[i]));
  Latencies heartbeats, creates;
  std::atomic<bool> stop{false}, measuring{false};
  std::atomic<int> registered{0};
  std::vector<std::thread> agent_threads;
  for (int t = 0; t < threads; ++t) {
    agent_threads.emplace_back([&, t] {
      std::vector<int> mine;
      for (int i = t; i < agents; i += threads) mine.push_back(i);
      for (int i : mine) {
        auto r = clients[i]->Call("PUT", gpucloud::api::NodePath(Cat("load-", i)), NodeBody(i));
        if (r.ok() && r->status / 100 == 2) ++registered;
      }
      std::string body = gpucloud::api::HeartbeatToJson({});
      auto start = Clock::now();
      for (int64_t round = 0; !stop; ++round) {
        for (size_t k = 0; k < mine.size() && !stop; ++k) {
          auto due = start + std::chrono::milliseconds(
                                 round * 1000 + static_cast<int64_t>(k * 1000 / mine.size()));
          std::this_thread::sleep_until(due);
          auto t0 = Clock::now();
          auto r = clients[mine[k]]->Call(
              "POST", gpucloud::api::NodePath(Cat("load-", mine[k])) + "/heartbeat", body);
          if (!measuring) continue;
          if (r.ok() && r->status == 200) {
            heartbeats.Add(MsSince(t0));
          } else {
            heartbeats.Error();
          }
        }
      }
    });
  }
  for (int waited = 0; registered < agents; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waited >= 1200) {  // 2 minutes
      std::fprintf(stderr, "only %d of %d agents registered\n", registered.load(), agents);
      stop = true;
      for (auto& t : agent_threads) t.join();
      return 1;
    }
  }
  std::printf("registered %d agents (%d GPUs)\n", agents, agents * 8);

  // Each agent's watch on its assignments (a thread each here; the server should not need one).
  std::atomic<int64_t> watch_events{0}, watch_lines{0};
  std::atomic<int> watches_open{0};
  std::vector<std::thread> watch_threads;
  for (int i = 0; watch && i < agents; ++i) {
    watch_threads.emplace_back([&, i] {
      gpucloud::api::Client client(node_configs[i]);
      std::string target = Cat(gpucloud::api::AssignmentsPath(Cat("load-", i)),
                               "?watch=true&allowWatchBookmarks=true&timeoutSeconds=3600");
      bool counted = false;
      while (!stop) {
        auto r = client.Stream(
            target,
            [&](const std::string& line) {
              if (!counted) {
                counted = true;
                ++watches_open;
              }
              ++watch_lines;
              if (line.find("\"BOOKMARK\"") == std::string::npos) ++watch_events;
            },
            15, &stop);
        if (!r.ok() && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  for (int waited = 0; watch && watches_open < agents && waited < 600; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (watch) std::printf("watches open: %d of %d\n", watches_open.load(), agents);
  std::this_thread::sleep_for(std::chrono::seconds(2));

  // 2. Submission to binding on the idle cluster, one job at a time.
  gpucloud::api::Client user(*admin);
  std::vector<double> bind_ms;
  for (int i = 0; i < 200; ++i) {
    std::string name = Cat("idle-", i);
    auto r = user.Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs", JobBody(name));
    if (!r.ok() || r->status != 201) continue;
    for (int tries = 0; tries < 2000; ++tries) {
      auto g = user.Call("GET", "/apis/gpucloud/v1/namespaces/default/jobs/" + name);
      Json j = g.ok() ? Json::parse(g->body, nullptr, false) : Json();
      if (j.is_object() && j["status"].value("phase", "") == "Scheduled") {
        bind_ms.push_back(static_cast<double>(j["status"].value("scheduledMs", int64_t{0}) -
                                              j["status"].value("submittedMs", int64_t{0})));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::sort(bind_ms.begin(), bind_ms.end());
  if (!bind_ms.empty()) {
    std::printf(
        "idle cluster, submission to binding (%zu jobs): p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
        bind_ms.size(), bind_ms[bind_ms.size() / 2], bind_ms[bind_ms.size() * 99 / 100],
        bind_ms.back());
  }

  if (auto m = user.Call("GET", "/metrics"); m.ok()) {
    for (const std::string& line : gpucloud::SplitAny(m->body, "\n")) {
      if (line.starts_with("gpucloud_controller_pass_seconds ")) std::printf("%s\n", line.c_str());
    }
  }

  // 3. Creates at `rate` per second, on top of the heartbeats.
  std::printf("load: %d heartbeats/s + %d creates/s for %d s\n", agents, rate, seconds);
  std::fflush(stdout);
  measuring = true;
  auto load_start = Clock::now();
  int creators = std::max(1, std::min(16, rate / 25));
  std::vector<std::thread> creator_threads;
  for (int c = 0; c < creators; ++c) {
    creator_threads.emplace_back([&, c] {
      gpucloud::api::Client client(*admin);
      for (int64_t k = c;; k += creators) {
        auto due = load_start + std::chrono::microseconds(k * 1'000'000 / rate);
        if (due >= load_start + std::chrono::seconds(seconds)) break;
        std::this_thread::sleep_until(due);
        auto t0 = Clock::now();
        auto r = client.Call("POST", "/apis/gpucloud/v1/namespaces/default/jobs",
                             JobBody(Cat("load-", k)));
        if (r.ok() && r->status == 201) {
          creates.Add(MsSince(t0));
        } else {
          creates.Error();
        }
      }
    });
  }
  for (auto& t : creator_threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - load_start).count();
  measuring = false;
  std::string open_connections = "?";
  if (auto m = user.Call("GET", "/metrics"); m.ok()) {
    for (const std::string& line : gpucloud::SplitAny(m->body, "\n")) {
      if (line.starts_with("gpucloud_api_open_connections ")) open_connections = line.substr(30);
    }
  }
  // What the server holds now, with every agent and watch still connected.
  std::printf("at the end of the load: %s connections open on the server\n",
              open_connections.c_str());
  if (const char* pid = std::getenv("SERVER_PID")) {
    std::ifstream status(Cat("/proc/", pid, "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("Threads:") || line.starts_with("VmRSS:") ||
          line.starts_with("VmHWM:")) {
        std::printf("server %s\n", line.c_str());
      }
    }
  }
  std::fflush(stdout);
  // HOLD_SECONDS=N (scripts/bench-console): the agents go on heartbeating, their watches open,
  // for up to N more seconds, or until DATA_DIR/stop-load exists, while something else is
  // measured against the loaded server.
  if (const char* hold = std::getenv("HOLD_SECONDS"); hold != nullptr && std::atoi(hold) > 0) {
    std::printf("holding: %d agents heartbeating for up to %s s (touch %s/stop-load to end)\n",
                agents, hold, dir.c_str());
    std::fflush(stdout);
    auto until = Clock::now() + std::chrono::seconds(std::atoi(hold));
    while (Clock::now() < until && !std::filesystem::exists(dir + "/stop-load")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  stop = true;
  for (auto& t : agent_threads) t.join();
  for (auto& t : watch_threads) t.join();
  std::printf("%s\n%s\n", heartbeats.Summary("heartbeats", elapsed).c_str(),
              creates.Summary("creates", elapsed).c_str());
  if (watch) {
    std::printf("watches: %d opened, %lld events and %lld lines in all\n", watches_open.load(),
                static_cast<long long>(watch_events.load()),
                static_cast<long long>(watch_lines.load()));
  }
  if (auto m = user.Call("GET", "/metrics"); m.ok()) {
    for (const std::string& line : gpucloud::SplitAny(m->body, "\n")) {
      if (line.starts_with("gpucloud_controller_pass_seconds ") ||
          line.starts_with("gpucloud_controller_stage_seconds") ||
          line.starts_with("gpucloud_jobs{phase=\"Scheduled\"}") ||
          line.starts_with("gpucloud_jobs{phase=\"Pending\"}")) {
        std::printf("%s\n", line.c_str());
      }
    }
  }
  return 0;
}
