// Durable writes per second of the SQLite store (synchronous=FULL: each acknowledged
// transaction is on disk), from 1 writer and from several (group commit), on a file under
// $TMPDIR. Results are recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "store/sqlite_store.h"

namespace gpucloud::store {
namespace {

std::unique_ptr<Store> g_store;
std::filesystem::path g_path;
std::atomic<int64_t> g_next{0};

void BM_DurableCreates(benchmark::State& state) {
  if (state.thread_index() == 0) {
    g_path = std::filesystem::temp_directory_path() /
             ("gpucloud-store-bench-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(g_path);
    g_store = std::move(*OpenSqliteStore(g_path.string()));
  }
  std::string value(600, 'x');  // about the size of a Job's JSON
  for (auto _ : state) {
    std::string key = "/jobs/team/" + std::to_string(g_next.fetch_add(1));
    absl::StatusOr<int64_t> r = g_store->Txn({Op{Op::Kind::kPut, key, value, 0}});
    if (!r.ok()) state.SkipWithError(std::string(r.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    g_store.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(g_path.string() + suffix);
    }
  }
}
BENCHMARK(BM_DurableCreates)->Threads(1)->Threads(8)->Threads(32)->UseRealTime();

}  // namespace
}  // namespace gpucloud::store

BENCHMARK_MAIN();
