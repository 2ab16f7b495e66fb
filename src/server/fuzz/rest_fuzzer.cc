// libFuzzer target for the REST request path: any method, target (path and query), identity
// and body handed to RestApi (over a real SQLite store in /dev/shm, with the cluster half
// attached) gives an answer with a valid HTTP status, never a crash, a hang, an exception or a
// sanitizer report. Input: byte 0 picks the method, byte 1 the identity, then the target up to
// the first newline, then the body. Build with `make fuzz` (clang, GPUCLOUD_FUZZ=ON).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "server/rest_util.h"
#include "store/sqlite_store.h"

namespace {

using namespace gpucloud;

struct World {
  World() {
    dir = "/dev/shm/gpucloud-rest-fuzz-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = std::move(*store::OpenSqliteStore(dir + "/store.db"));
    logs = std::make_unique<server::LogStore>(dir + "/logs");
    api = std::make_unique<server::RestApi>(*store, clock, 1);
    api->AttachCluster(&nodes, logs.get(), nullptr, [] { return std::string("{}"); });
  }
  std::string dir;
  FakeClock clock{1'700'000'000'000};
  std::unique_ptr<store::Store> store;
  server::NodeTable nodes;
  std::unique_ptr<server::LogStore> logs;
  std::unique_ptr<server::RestApi> api;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // one store for the whole run: state carries over
  if (size < 2) return 0;
  static const char* kMethods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  static const server::Identity kWho[] = {{"root", "", true, false},
                                          {"alice", "team-a", false, false},
                                          {"system:node", "", false, true}};
  server::Request r;
  r.method = kMethods[data[0] % 5];
  r.who = kWho[data[1] % 3];
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  size_t nl = rest.find('\n');
  server::ParseTarget(rest.substr(0, nl), &r);
  if (nl != std::string_view::npos) r.body = std::string(rest.substr(nl + 1));
  // A followed log or a long watch wait is the HTTPS layer's; here one batch is asked for.
  r.query.erase("follow");
  if (std::optional<int64_t> rv = server::QueryInt(r, "resourceVersion");
      rv && *rv > world->store->Revision() && r.query.contains("watch")) {
    r.query.erase("resourceVersion");  // a future revision waits 3 s: covered by the unit tests
  }
  server::Response resp = world->api->Handle(r);
  if (resp.status < 200 || resp.status > 599) std::abort();
  return 0;
}
