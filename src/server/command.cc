#include "server/command.h"

#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <random>

#include "core/clock.h"
#include "core/text.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/rest.h"
#include "store/sqlite_store.h"

namespace gpucloud::server {

int RunServer(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"gpucloud server: the control plane"};
  std::string data_dir = ".gpucloud", listen = "127.0.0.1:8443";
  app.add_option("--data-dir", data_dir, "where the store, certificates and tokens live");
  app.add_option("--listen", listen, "address and port to serve HTTPS on (port 0: any)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(listen.substr(colon + 1));
    } catch (...) {
      port = -1;
    }
  }
  if (colon == std::string::npos || port < 0 || port > 65535) {
    err << "gpucloud server: --listen: \"" << listen << "\" is not HOST:PORT\n";
    return 2;
  }
  // A client that goes away must not kill the server (TLS writes to a closed socket, or output
  // to a closed pipe): such writes fail with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto fail = [&](const absl::Status& s) {
    err << "gpucloud server: " << s.message() << "\n";
    return 1;
  };
  absl::StatusOr<Credentials> creds = EnsureCredentials(data_dir);
  if (!creds.ok()) return fail(creds.status());
  absl::StatusOr<TokenBook> tokens = TokenBook::Load(data_dir);
  if (!tokens.ok()) return fail(tokens.status());
  absl::StatusOr<std::unique_ptr<store::Store>> store = store::OpenSqliteStore(data_dir + "/store.db");
  if (!store.ok()) return fail(store.status());
  SystemClock clock;
  RestApi api(**store, clock, std::random_device{}());
  HttpsServer server(api, *tokens, **store,
                     {.address = listen.substr(0, colon),
                      .port = static_cast<uint16_t>(port),
                      .cert_path = creds->cert_path,
                      .key_path = creds->key_path});
  if (absl::Status s = server.Start(); !s.ok()) return fail(s);
  std::string url = Cat("https://", listen.substr(0, colon), ":", server.port());
  if (!creds->admin_token.empty()) {
    std::string config = data_dir + "/admin.config";
    {
      std::ofstream f(config, std::ios::trunc);
      f << "server: " << url << "\ncertificate-authority: " << creds->ca_cert_path
        << "\ntoken: " << creds->admin_token << "\n";
    }
    chmod(config.c_str(), 0600);
    out << "first start: admin token written to " << config
        << " (copy it to ~/.gpucloud/config for gpuctl)\n";
  }
  out << "gpucloud server: serving " << url << " (CA " << creds->ca_cert_path << ", store "
      << data_dir << "/store.db, revision " << (*store)->Revision() << ")" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  out << "gpucloud server: stopping on signal " << sig << std::endl;
  server.Stop();
  return 0;
}

}  // namespace gpucloud::server
