#include "server/control_plane.h"

#include <sys/stat.h>

#include <fstream>
#include <random>

#include "core/clock.h"
#include "core/gpu_catalog.h"
#include "core/text.h"
#include "server/controller.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/log_store.h"
#include "server/node_table.h"
#include "server/rest.h"
#include "store/sqlite_store.h"

namespace gpucloud::server {

struct ControlPlane::Impl {
  ControlPlaneOptions options;
  SystemClock clock;
  std::optional<Credentials> creds;
  std::optional<TokenBook> tokens;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<RestApi> api;
  std::unique_ptr<NodeTable> nodes;
  std::unique_ptr<LogStore> logs;
  std::unique_ptr<Controller> controller;
  std::unique_ptr<HttpsServer> https;
  std::string bootstrap;
  bool first = false;
};

ControlPlane::ControlPlane(ControlPlaneOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

ControlPlane::~ControlPlane() { Stop(); }

absl::Status ControlPlane::Start() {
  Impl& m = *impl_;
  const std::string& dir = m.options.data_dir;
  absl::StatusOr<Credentials> creds = EnsureCredentials(dir, {m.options.address});
  if (!creds.ok()) return creds.status();
  m.creds = *creds;
  m.first = !creds->admin_token.empty();
  absl::StatusOr<TokenBook> tokens = TokenBook::Load(dir);
  if (!tokens.ok()) return tokens.status();
  m.tokens = std::move(*tokens);
  {
    std::ifstream f(creds->bootstrap_token_path);
    std::getline(f, m.bootstrap);
  }
  absl::StatusOr<std::unique_ptr<store::Store>> store = store::OpenSqliteStore(dir + "/store.db");
  if (!store.ok()) return store.status();
  m.store = std::move(*store);
  m.nodes = std::make_unique<NodeTable>();
  m.logs = std::make_unique<LogStore>(dir + "/logs");
  ControllerOptions co;
  co.scheduler = m.options.scheduler;
  co.heartbeat_timeout_ms = m.options.heartbeat_timeout_ms;
  co.stop_grace_ms = m.options.stop_grace_ms;
  co.checkpoint_root =
      m.options.checkpoint_root.empty() ? dir + "/checkpoints" : m.options.checkpoint_root;
  m.controller = std::make_unique<Controller>(*m.store, *m.nodes, m.clock, GpuCatalog::Default(), co);
  m.api = std::make_unique<RestApi>(*m.store, m.clock, std::random_device{}());
  Controller* controller = m.controller.get();
  m.api->AttachCluster(
      m.nodes.get(), m.logs.get(), [controller] { controller->Kick(); },
      [controller] { return ClusterSummaryJson(controller->Metrics()); });
  HttpsServer::Options ho{.address = m.options.address,
                          .port = m.options.port,
                          .cert_path = creds->cert_path,
                          .key_path = creds->key_path,
                          .extra_metrics = [controller] {
                            return RenderClusterMetrics(controller->Metrics());
                          },
                          .logs = m.logs.get()};
  m.https = std::make_unique<HttpsServer>(*m.api, *m.tokens, *m.store, std::move(ho));
  if (absl::Status s = m.https->Start(); !s.ok()) return s;
  m.controller->Start();
  // gpuctl's config for the admin: written on the first start, and again when the port moved.
  std::string config = admin_config_path();
  bool rewrite = m.first;
  if (!rewrite) {
    std::ifstream f(config);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    rewrite = !text.empty() && text.find(url()) == std::string::npos;
  }
  if (m.first) {
    std::ofstream f(config, std::ios::trunc);
    f << "server: " << url() << "\ncertificate-authority: " << creds->ca_cert_path
      << "\ntoken: " << creds->admin_token << "\n";
    f.close();
    chmod(config.c_str(), 0600);
  } else if (rewrite) {
    // Keep the token, change the address.
    std::ifstream f(config);
    std::string line, out;
    while (std::getline(f, line)) {
      out += line.starts_with("server:") ? Cat("server: ", url()) : line;
      out += "\n";
    }
    f.close();
    std::ofstream w(config, std::ios::trunc);
    w << out;
  }
  return absl::OkStatus();
}

void ControlPlane::Stop() {
  Impl& m = *impl_;
  if (m.controller) m.controller->Stop();
  if (m.https) m.https->Stop();
}

std::string ControlPlane::url() const {
  return Cat("https://", impl_->options.address, ":", impl_->https ? impl_->https->port() : 0);
}
std::string ControlPlane::ca_path() const { return impl_->options.data_dir + "/ca.crt"; }
std::string ControlPlane::admin_config_path() const {
  return impl_->options.data_dir + "/admin.config";
}
std::string ControlPlane::bootstrap_token() const { return impl_->bootstrap; }
bool ControlPlane::first_start() const { return impl_->first; }
int64_t ControlPlane::revision() const { return impl_->store ? impl_->store->Revision() : 0; }

}  // namespace gpucloud::server
