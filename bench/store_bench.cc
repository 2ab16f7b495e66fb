// Durable writes per second of the store backends, side by side in one run: SQLite
// (synchronous=FULL: each acknowledged transaction is on disk) and etcd, one member and a
// three-member cluster on this machine (each member fsyncs its WAL; a write is acknowledged once
// a majority has it), all under $TMPDIR. From 1 writer and from several (group commit; etcd
// batches concurrent proposals too). Besides items/s, each run reports its creates' latency
// percentiles (p50_ms, p99_ms). The etcd runs skip when /usr/bin/etcd is absent. Results are
// recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/etcd_store.h"
#include "store/etcd_test_server.h"
#include "store/sqlite_store.h"

namespace gpucloud::store {
namespace {

enum Backend : int64_t { kSqlite = 0, kEtcd1 = 1, kEtcd3 = 3 };

std::unique_ptr<Store> g_store;
std::filesystem::path g_path;
std::atomic<int64_t> g_next{0};
std::mutex g_mu;
std::condition_variable g_added_cv;
std::vector<double> g_latency_ms;  // guarded by g_mu
int g_added = 0;                   // guarded by g_mu: threads that added their latencies

// The etcd clusters, started once for the whole run (a start takes a second or two), under
// one directory removed at exit.
struct Clusters {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("gpucloud-store-bench-etcd-" + std::to_string(::getpid()));
  std::unique_ptr<EtcdTestCluster> one, three;
  ~Clusters() {
    one.reset();
    three.reset();
    std::filesystem::remove_all(dir);
  }
};
Clusters g_clusters;

absl::StatusOr<std::unique_ptr<Store>> OpenBackend(Backend b) {
  if (b == kSqlite) {
    g_path = std::filesystem::temp_directory_path() /
             ("gpucloud-store-bench-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(g_path);
    return OpenSqliteStore(g_path.string());
  }
  if (!EtcdTestServer::Available()) return absl::NotFoundError("no /usr/bin/etcd");
  std::unique_ptr<EtcdTestCluster>& c = b == kEtcd1 ? g_clusters.one : g_clusters.three;
  if (c == nullptr) {
    c = std::make_unique<EtcdTestCluster>((g_clusters.dir / std::to_string(b)).string(),
                                          static_cast<int>(b));
    if (absl::Status s = c->Start(); !s.ok()) return s;
  }
  return OpenEtcdStore({.endpoint = c->endpoints()});
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void BM_DurableCreates(benchmark::State& state) {
  const auto backend = static_cast<Backend>(state.range(0));
  if (state.thread_index() == 0) {
    absl::StatusOr<std::unique_ptr<Store>> s = OpenBackend(backend);
    if (s.ok()) g_store = std::move(*s);
    std::lock_guard<std::mutex> lock(g_mu);
    g_latency_ms.clear();
    g_added = 0;
  }
  std::string value(600, 'x');  // about the size of a Job's JSON
  std::vector<double> mine;
  for (auto _ : state) {
    if (g_store == nullptr) {
      state.SkipWithError("the backend did not start (etcd absent?)");
      break;
    }
    std::string key = "/jobs/team/" + std::to_string(g_next.fetch_add(1));
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<int64_t> r = g_store->Txn({Op{Op::Kind::kPut, key, value, 0}});
    mine.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (!r.ok()) state.SkipWithError(std::string(r.status().message()).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_latency_ms.insert(g_latency_ms.end(), mine.begin(), mine.end());
    ++g_added;
  }
  g_added_cv.notify_all();
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    std::unique_lock<std::mutex> lock(g_mu);
    g_added_cv.wait(lock, [&] { return g_added == state.threads(); });
    state.counters["p50_ms"] = Percentile(g_latency_ms, 0.50);
    state.counters["p99_ms"] = Percentile(g_latency_ms, 0.99);
    g_store.reset();
    if (backend == kSqlite) {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::filesystem::remove(g_path.string() + suffix);
      }
    }
  }
}
BENCHMARK(BM_DurableCreates)
    ->ArgName("backend")
    ->Arg(kSqlite)
    ->Arg(kEtcd1)
    ->Arg(kEtcd3)
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->UseRealTime();

}  // namespace
}  // namespace gpucloud::store

BENCHMARK_MAIN();
