#include "store/etcd_test_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "core/text.h"

namespace gpucloud::store {
int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool EtcdTestServer::Available() { return ::access(kBinary, X_OK) == 0; }

EtcdTestServer::EtcdTestServer(std::string data_dir, std::vector<std::string> extra_flags)
    : data_dir_(std::move(data_dir)), extra_flags_(std::move(extra_flags)) {}

EtcdTestServer::EtcdTestServer(std::string data_dir, std::string name, int client_port,
                               int peer_port, std::string initial_cluster,
                               std::vector<std::string> extra_flags)
    : data_dir_(std::move(data_dir)),
      name_(std::move(name)),
      initial_cluster_(std::move(initial_cluster)),
      extra_flags_(std::move(extra_flags)),
      client_port_(client_port),
      peer_port_(peer_port) {}

EtcdTestServer::~EtcdTestServer() { Stop(); }

absl::Status EtcdTestServer::Start() {
  if (absl::Status s = Launch(); !s.ok()) return s;
  return AwaitReady();
}

absl::Status EtcdTestServer::Launch() {
  if (pid_ > 0) return absl::FailedPreconditionError("etcd is running already");
  if (client_port_ == 0) {
    client_port_ = FreeLoopbackPort();
    peer_port_ = FreeLoopbackPort();
  }
  std::string client = Cat(tls_ ? "https" : "http", "://127.0.0.1:", client_port_);
  std::string peer = Cat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> args = {
      kBinary,
      "--name=" + name_,
      "--data-dir=" + data_dir_,
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + (initial_cluster_.empty() ? name_ + "=" + peer : initial_cluster_),
      "--logger=zap",
      "--log-outputs=stderr"};
  bool txn_ops_given = false;
  for (const std::string& f : extra_flags_) txn_ops_given |= f.starts_with("--max-txn-ops");
  if (!txn_ops_given) args.push_back("--max-txn-ops=4096");
  if (tls_) {
    args.insert(args.end(), {"--cert-file=" + tls_->cert_file, "--key-file=" + tls_->key_file,
                             "--client-cert-auth", "--trusted-ca-file=" + tls_->trusted_ca_file});
  }
  args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  {
    absl::MutexLock lock(&mu_);
    ready_ = ended_ = false;
    log_.clear();
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    // etcd ends with the test, also when the test crashes or is killed.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(fds[1], STDERR_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kBinary, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid_ < 0) {
    ::close(fds[0]);
    return absl::InternalError("fork failed");
  }
  drainer_ = std::thread([this, fd = fds[0]] { Drain(fd); });
  return absl::OkStatus();
}

absl::Status EtcdTestServer::AwaitReady() {
  absl::MutexLock lock(&mu_);
  auto done = [this] { return ready_ || ended_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
  if (!ready_) return absl::UnavailableError(Cat("etcd did not become ready:\n", log_));
  return absl::OkStatus();
}

void EtcdTestServer::Drain(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    absl::MutexLock lock(&mu_);
    if (n <= 0) {
      ended_ = true;
      break;
    }
    log_.append(buf, static_cast<size_t>(n));
    // etcd logs this once it serves (embed/serve.go, after ReadyNotify).
    if (log_.find("serving client traffic") != std::string::npos) ready_ = true;
    if (log_.size() > (1 << 20)) log_.erase(0, log_.size() - (1 << 19));
  }
  ::close(fd);
}

void EtcdTestServer::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);  // a paused member cannot act on SIGTERM
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  if (drainer_.joinable()) drainer_.join();
}

void EtcdTestServer::Pause() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGSTOP);
  // kill returns before the member has stopped, and a request on a kept-alive connection can be
  // answered in that time: wait until it has (the stop is reported, the child not reaped).
  int status = 0;
  while (::waitpid(pid_, &status, WUNTRACED) == -1 && errno == EINTR) {
  }
}

void EtcdTestServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

EtcdTestCluster::EtcdTestCluster(const std::string& dir, int n,
                                 std::vector<std::string> extra_flags) {
  std::vector<std::pair<int, int>> ports;
  std::string initial;
  for (int i = 0; i < n; ++i) {
    ports.emplace_back(FreeLoopbackPort(), FreeLoopbackPort());
    initial += Cat(i == 0 ? "" : ",", "m", i, "=http://127.0.0.1:", ports.back().second);
  }
  for (int i = 0; i < n; ++i) {
    members_.push_back(std::make_unique<EtcdTestServer>(
        Cat(dir, "/m", i), Cat("m", i), ports[static_cast<size_t>(i)].first,
        ports[static_cast<size_t>(i)].second, initial, extra_flags));
  }
}

absl::Status EtcdTestCluster::Start() {
  for (auto& m : members_) {
    if (absl::Status s = m->Launch(); !s.ok()) return s;
  }
  for (auto& m : members_) {
    if (absl::Status s = m->AwaitReady(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string EtcdTestCluster::endpoints() const {
  std::string out;
  for (const auto& m : members_) out += (out.empty() ? "" : ",") + m->endpoint();
  return out;
}

std::string EtcdTestServer::log() {
  absl::MutexLock lock(&mu_);
  return log_;
}

}  // namespace gpucloud::store
