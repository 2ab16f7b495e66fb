// API load generator (issue 5): an in-process `gpucloud server` (HTTPS, TLS 1.3, SQLite store
// with synchronous=FULL) and C client threads, each on one keep-alive TLS connection, creating
// Jobs for D seconds. Prints durable creates per second, latency percentiles and the process's
// CPU time and peak memory (clients included: they share the process).
// Usage: api_load [CLIENTS=16] [SECONDS=5] [audit]
// With `audit`, the server keeps the audit log as `gpucloud server` does (docs/audit.md): each
// create commits with its record; without, it measures the store alone.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/audit_log.h"
#include "server/audited_store.h"
#include "server/credentials.h"
#include "server/https_server.h"
#include "server/rest.h"
#include "store/sqlite_store.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int clients = argc > 1 ? std::atoi(argv[1]) : 16;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool audit = argc > 3 && std::string(argv[3]) == "audit";
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpucloud-api-load-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto creds = *gpucloud::server::EnsureCredentials(dir.string());
  if (!gpucloud::server::CommitAdminToken(dir.string(), creds.admin_token).ok()) return 1;
  auto tokens = *gpucloud::server::TokenBook::Load(dir.string());
  auto store = std::move(*gpucloud::store::OpenSqliteStore((dir / "store.db").string()));
  gpucloud::SystemClock clock;
  std::unique_ptr<gpucloud::server::AuditLog> log;
  std::unique_ptr<gpucloud::server::AuditedStore> audited;
  if (audit) {
    log = std::make_unique<gpucloud::server::AuditLog>(
        *store, clock, *gpucloud::server::AuditKey::FromPemFile(creds.key_path));
    if (!log->Open().ok()) return 1;
    audited = std::make_unique<gpucloud::server::AuditedStore>(*store, *log);
  }
  gpucloud::server::RestApi api(audit ? *audited : *store, clock, 1);
  api.SetMaxJobsPerNamespace(0);  // a throughput test: creates are not bounded by the quota
  api.AttachAudit(log.get());
  gpucloud::server::HttpsServer server(
      api, tokens, *store,
      {.cert_path = creds.cert_path, .key_path = creds.key_path, .audit = log.get()});
  if (!server.Start().ok()) return 1;
  std::atomic<bool> go{true};
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::atomic<int> errors{0};
  auto started = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      asio::io_context io;
      asio::ssl::context ctx(asio::ssl::context::tls_client);
      ctx.load_verify_file(creds.ca_cert_path);
      ctx.set_verify_mode(asio::ssl::verify_peer);
      beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
      SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
      beast::get_lowest_layer(stream).connect(
          asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
      stream.handshake(asio::ssl::stream_base::client);
      beast::flat_buffer buf;
      std::vector<double> mine;
      for (int i = 0; go; ++i) {
        std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
        http::request<http::string_body> req{http::verb::post,
                                             "/apis/gpucloud/v1/namespaces/load/jobs", 11};
        req.set(http::field::host, "localhost");
        req.set(http::field::authorization, "Bearer " + creds.admin_token);
        req.keep_alive(true);
        req.body() = "{\"apiVersion\":\"gpucloud/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"" +
                     name +
                     "\"},\"spec\":{\"tasks\":[{\"name\":\"w\",\"replicas\":2,\"resources\":{"
                     "\"gpu\":{\"count\":1}}}]}}";
        req.prepare_payload();
        auto t0 = Clock::now();
        http::write(stream, req);
        http::response<http::string_body> res;
        http::read(stream, buf, res);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (res.result_int() != 201) ++errors;
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));  // the measuring window
  go = false;
  for (std::thread& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  server.Stop();
  if (log && !log->Close().ok()) return 1;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    if (latencies_ms.empty()) return 0.0;
    size_t i =
        std::min(latencies_ms.size() - 1, static_cast<size_t>(p / 100 * latencies_ms.size()));
    return latencies_ms[i];
  };
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu =
      ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::printf(
      "audit %s, clients %d, %.1f s: %zu durable creates (%d errors), %.0f creates/s; latency ms "
      "p50 %.2f "
      "p99 %.2f max %.2f; process CPU %.1f s (%.0f%% of one core), peak RSS %ld MiB\n",
      audit ? "on" : "off", clients, elapsed, latencies_ms.size(), errors.load(),
      latencies_ms.size() / elapsed, pct(50), pct(99),
      latencies_ms.empty() ? 0 : latencies_ms.back(), cpu, 100 * cpu / elapsed,
      ru.ru_maxrss / 1024);
  std::filesystem::remove_all(dir);
  return errors > 0 ? 1 : 0;
}
