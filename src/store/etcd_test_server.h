// Test helper: a real single-member etcd (Debian's etcd-server) on loopback, on free ports,
// with its data in a directory the caller owns. Start() returns once etcd says it is ready to
// serve clients; Stop() (and the destructor) end it with SIGTERM and wait for it. Start() after
// Stop() restarts it on the same data directory and ports, as a member restart does. With
// ServeTls its client URL is https:// and asks every client for a certificate.
// Test-only; thread-compatible.
#ifndef GPUCLOUD_STORE_ETCD_TEST_SERVER_H_
#define GPUCLOUD_STORE_ETCD_TEST_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gpucloud::store {

// The files of a member that serves clients over TLS (TestCa in etcd_test_certs.h makes them).
struct EtcdTestTls {
  std::string cert_file;        // --cert-file: its serving certificate
  std::string key_file;         // --key-file
  std::string trusted_ca_file;  // --trusted-ca-file: the CA of the clients' certificates
};

class EtcdTestServer {
 public:
  // The etcd binary the helper runs; tests skip when it is absent.
  static constexpr const char* kBinary = "/usr/bin/etcd";
  static bool Available();

  // `extra_flags` are added to etcd's command line (--max-txn-ops is 4096 unless given).
  explicit EtcdTestServer(std::string data_dir, std::vector<std::string> extra_flags = {});
  // A member of a cluster (EtcdTestCluster): its name, ports and --initial-cluster.
  EtcdTestServer(std::string data_dir, std::string name, int client_port, int peer_port,
                 std::string initial_cluster, std::vector<std::string> extra_flags = {});
  ~EtcdTestServer();
  EtcdTestServer(const EtcdTestServer&) = delete;
  EtcdTestServer& operator=(const EtcdTestServer&) = delete;

  // Before Start: serve clients on https:// with --client-cert-auth (a client without a
  // certificate that `tls.trusted_ca_file` signed is refused). Peers stay on plain HTTP.
  void ServeTls(EtcdTestTls tls) { tls_ = std::move(tls); }

  absl::Status Start();
  // Start() in two halves: a member of a new cluster is ready only once a quorum runs.
  absl::Status Launch();
  absl::Status AwaitReady();
  void Stop();
  // SIGSTOP / SIGCONT: a member that accepts connections (the kernel does) but answers nothing,
  // as a hung or partitioned one.
  void Pause();
  void Resume();
  // "127.0.0.1:PORT" of the client URL (valid after the first Start()).
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  // What etcd wrote to stderr so far (for failure messages).
  std::string log();

 private:
  void Drain(int fd);

  const std::string data_dir_;
  const std::string name_ = "test";
  std::string initial_cluster_;  // "" = this member alone
  const std::vector<std::string> extra_flags_;
  std::optional<EtcdTestTls> tls_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
  std::thread drainer_;
  absl::Mutex mu_;
  std::string log_;     // guarded by mu_
  bool ready_ = false;  // guarded by mu_
  bool ended_ = false;  // guarded by mu_: stderr closed
};

// `n` members on loopback, each with its data under `dir`, started together.
class EtcdTestCluster {
 public:
  EtcdTestCluster(const std::string& dir, int n, std::vector<std::string> extra_flags = {});
  absl::Status Start();
  EtcdTestServer& member(int i) { return *members_[static_cast<size_t>(i)]; }
  int size() const { return static_cast<int>(members_.size()); }
  // Every member's "127.0.0.1:PORT", comma-separated (EtcdStoreOptions::endpoint).
  std::string endpoints() const;

 private:
  std::vector<std::unique_ptr<EtcdTestServer>> members_;
};

// A port nothing listens on now (the kernel's pick for port 0).
int FreeLoopbackPort();

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_ETCD_TEST_SERVER_H_
