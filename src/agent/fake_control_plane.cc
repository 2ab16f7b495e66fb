#include "agent/fake_control_plane.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/str_split.h"
#include "core/private_file.h"
#include "core/query.h"
#include "core/text.h"
#include "testing/pem.h"

namespace gpucloud::agent {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Json = nlohmann::json;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using TlsStream = beast::ssl_stream<tcp::socket>;

Response Answer(const Request& req, int status, std::string body) {
  Response res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

std::string LogKey(const std::string& ns, const std::string& job, int rank, int attempt) {
  return Cat(ns, "/", job, "/", rank, "/", attempt);
}

}  // namespace

struct FakeControlPlane::State {
  asio::io_context io;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  tcp::acceptor acceptor{io};
  uint16_t port = 0;
  std::string ca_path;
  std::atomic<bool> stopping{false};
  std::thread accept_thread;

  mutable std::mutex mu;
  mutable std::condition_variable changed;  // a heartbeat came, or the assignments changed
  std::vector<std::thread> connections;     // guarded by mu
  std::set<int> fds;                        // guarded by mu: open connections' sockets
  // guarded by mu: the assignments, and each change as (revision, watch event line)
  std::map<std::string, api::Assignment> assignments;
  std::vector<std::pair<int64_t, std::string>> events;
  int64_t revision = 1;
  bool acknowledge = false;
  bool standby = false;
  int refused = 0;
  SecretsAnswer secrets_answer;
  int secrets_requests = 0;
  LogAnswer log_answer;
  int log_requests = 0;
  int registrations = 0;
  std::vector<api::Heartbeat> heartbeats;
  std::map<std::string, std::string> logs;  // LogKey -> the output shipped

  void Accept() {
    while (!stopping) {
      tcp::socket socket(io);
      beast::error_code ec;
      acceptor.accept(socket, ec);
      if (ec || stopping) return;
      std::lock_guard lock(mu);
      fds.insert(socket.native_handle());
      connections.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
    }
  }

  void Serve(tcp::socket socket) {
    const int fd = socket.native_handle();
    TlsStream stream(std::move(socket), tls);
    beast::error_code ec;
    stream.handshake(asio::ssl::stream_base::server, ec);
    beast::flat_buffer buf;
    while (!ec && !stopping) {
      Request req;
      http::read(stream, buf, req, ec);
      if (ec) break;
      RequestTarget target = ParseRequestTarget(std::string(req.target()));
      if (Refuses()) {
        http::write(stream, Answer(req, 503, R"({"message": "a standby"})"), ec);
        if (!req.keep_alive()) break;
        continue;
      }
      if (req.method() == http::verb::get && target.query.contains("watch")) {
        Watch(stream, req, target);
        break;
      }
      http::write(stream, Handle(req, target), ec);
      if (!req.keep_alive()) break;
    }
    std::lock_guard lock(mu);
    fds.erase(fd);
  }

  bool Refuses() {
    std::lock_guard lock(mu);
    if (standby) ++refused;
    return standby;
  }

  Response Handle(const Request& req, const RequestTarget& target) {
    const std::string& path = target.path;
    std::unique_lock lock(mu);
    if (req.method() == http::verb::put && path.find("/assignments") == std::string::npos) {
      ++registrations;
      return Answer(req, 200, "{}");
    }
    if (req.method() == http::verb::get && path.ends_with("/secrets")) {
      const int n = secrets_requests++;
      std::pair<int, std::string> a =
          secrets_answer ? secrets_answer(n)
                         : std::pair<int, std::string>{404, R"({"message": "no such assignment"})"};
      return Answer(req, a.first, a.second);
    }
    if (req.method() == http::verb::get && path.ends_with("/assignments")) {
      Json items = Json::array();
      for (const auto& [name, a] : assignments) items.push_back(Json::parse(AssignmentJson(a)));
      return Answer(
          req, 200,
          Json{{"items", items}, {"metadata", {{"resourceVersion", std::to_string(revision)}}}}
              .dump());
    }
    if (req.method() == http::verb::post && path.ends_with("/heartbeat")) {
      return Heartbeat(req, lock);
    }
    if (req.method() == http::verb::post && path.ends_with("/logs")) return ShipLog(req, target);
    return Answer(req, 404, R"({"message": "not found"})");
  }

  Response Heartbeat(const Request& req, std::unique_lock<std::mutex>& lock) {
    absl::StatusOr<api::Heartbeat> h = api::HeartbeatFromJson(req.body());
    if (!h.ok()) return Answer(req, 400, Json{{"message", h.status().message()}}.dump());
    api::Heartbeat acked;
    if (acknowledge) {
      for (const api::TaskReport& r : h->tasks) {
        if (api::IsTerminal(r.state)) acked.tasks.push_back(r);
      }
    }
    heartbeats.push_back(*std::move(h));
    lock.unlock();
    changed.notify_all();
    Json body{{"healthReset", 0},
              {"acknowledged", Json::parse(api::HeartbeatToJson(acked))["tasks"]}};
    return Answer(req, 200, body.dump());
  }

  // Called with mu held.
  Response ShipLog(const Request& req, const RequestTarget& target) {
    auto q = [&](const char* k) {
      auto it = target.query.find(k);
      return it == target.query.end() ? std::string() : it->second;
    };
    if (log_answer) {
      if (std::optional<std::pair<int, std::string>> a = log_answer(log_requests++)) {
        return Answer(req, a->first, a->second);
      }
    } else {
      ++log_requests;
    }
    // .../namespaces/NS/jobs/JOB/logs
    std::vector<std::string> parts = absl::StrSplit(target.path, '/');
    if (parts.size() < 5) return Answer(req, 404, "{}");
    const std::string& job = parts[parts.size() - 2];
    const std::string& ns = parts[parts.size() - 4];
    const int rank = static_cast<int>(ParseQueryInt(q("rank"), 1 << 20).value_or(0));
    const int attempt = static_cast<int>(ParseQueryInt(q("attempt"), 1 << 20).value_or(0));
    std::string& log = logs[LogKey(ns, job, rank, attempt)];
    const int64_t size = static_cast<int64_t>(log.size());
    if (ParseQueryInt(q("offset")).value_or(-1) != size) {
      return Answer(req, 409, Json{{"size", size}}.dump());
    }
    log += req.body();
    return Answer(req, 200, Json{{"size", log.size()}}.dump());
  }

  // A watch from its resourceVersion: every later event, a bookmark while there is none, until
  // the plane stops or the agent goes.
  void Watch(TlsStream& stream, const Request& req, const RequestTarget& target) {
    auto rv = target.query.find("resourceVersion");
    int64_t from = rv == target.query.end() ? 0 : ParseQueryInt(rv->second).value_or(0);
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "application/json");
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    http::write_header(stream, sr, ec);
    std::unique_lock lock(mu);
    while (!ec && !stopping) {
      std::vector<std::string> lines;
      for (const auto& [rev, line] : events) {
        if (rev > from) lines.push_back(line + "\n");
      }
      if (lines.empty()) {
        lines.push_back(
            Json{{"type", "BOOKMARK"},
                 {"object", {{"metadata", {{"resourceVersion", std::to_string(revision)}}}}}}
                .dump() +
            "\n");
      }
      from = revision;
      lock.unlock();
      for (const std::string& line : lines) {
        if (!ec) asio::write(stream, http::make_chunk(asio::buffer(line)), ec);
      }
      lock.lock();
      changed.wait_for(lock, std::chrono::milliseconds(100),
                       [&] { return stopping || revision > from; });
    }
  }

  // Called with mu held.
  std::string AssignmentJson(const api::Assignment& a) const {
    Json j = Json::parse(api::AssignmentToJson(a));
    j["metadata"]["resourceVersion"] = std::to_string(revision);
    return j.dump();
  }

  void AddEvent(const std::string& type, const Json& object) {
    events.emplace_back(revision, Json{{"type", type}, {"object", object}}.dump());
  }
};

FakeControlPlane::FakeControlPlane(const std::string& dir) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.ca_path = Cat(dir, "/fake-server.crt");
  const std::string key_path = Cat(dir, "/fake-server.key");
  if (!std::filesystem::exists(s.ca_path) || !std::filesystem::exists(key_path)) {
    auto [key, cert] = testing_util::MakeKeyAndSelfSignedCert("localhost", 1);
    (void)WritePrivateFile(s.ca_path, cert);
    (void)WritePrivateFile(key_path, key);
  }
  s.tls.use_certificate_chain_file(s.ca_path);
  s.tls.use_private_key_file(key_path, asio::ssl::context::pem);
  s.acceptor.open(tcp::v4());
  s.acceptor.set_option(asio::socket_base::reuse_address(true));
  s.acceptor.bind({asio::ip::make_address("127.0.0.1"), 0});
  s.acceptor.listen();
  s.port = s.acceptor.local_endpoint().port();
  s.accept_thread = std::thread([&s] { s.Accept(); });
}

FakeControlPlane::~FakeControlPlane() {
  State& s = *state_;
  s.stopping = true;
  s.changed.notify_all();
  {
    // Wake the blocked accept with a connection of its own.
    asio::io_context io;
    tcp::socket wake(io);
    beast::error_code ec;
    wake.connect({asio::ip::make_address("127.0.0.1"), s.port}, ec);
  }
  s.accept_thread.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(s.mu);
    for (int fd : s.fds) ::shutdown(fd, SHUT_RDWR);  // ends blocked reads and writes
    threads = std::move(s.connections);
  }
  for (std::thread& t : threads) t.join();
}

api::ClientConfig FakeControlPlane::client_config() const {
  api::ClientConfig c;
  c.host = "127.0.0.1";
  c.port = state_->port;
  c.ca_path = state_->ca_path;
  return c;
}

void FakeControlPlane::PutAssignment(const api::Assignment& a) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    const bool known = s.assignments.contains(a.name);
    ++s.revision;
    s.assignments[a.name] = a;
    s.AddEvent(known ? "MODIFIED" : "ADDED", Json::parse(s.AssignmentJson(a)));
  }
  s.changed.notify_all();
}

void FakeControlPlane::DeleteAssignment(const std::string& name) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (s.assignments.erase(name) == 0) return;
    ++s.revision;
    s.AddEvent(
        "DELETED",
        Json{{"metadata", {{"name", name}, {"resourceVersion", std::to_string(s.revision)}}}});
  }
  s.changed.notify_all();
}

void FakeControlPlane::AcknowledgeEnded(bool on) {
  std::lock_guard lock(state_->mu);
  state_->acknowledge = on;
}

void FakeControlPlane::SetStandby(bool on) {
  std::lock_guard lock(state_->mu);
  state_->standby = on;
}

int FakeControlPlane::refused() const {
  std::lock_guard lock(state_->mu);
  return state_->refused;
}

void FakeControlPlane::SetSecretsAnswer(SecretsAnswer answer) {
  std::lock_guard lock(state_->mu);
  state_->secrets_answer = std::move(answer);
}

void FakeControlPlane::SetLogAnswer(LogAnswer answer) {
  std::lock_guard lock(state_->mu);
  state_->log_answer = std::move(answer);
}

int FakeControlPlane::log_requests() const {
  std::lock_guard lock(state_->mu);
  return state_->log_requests;
}

int FakeControlPlane::registrations() const {
  std::lock_guard lock(state_->mu);
  return state_->registrations;
}

int FakeControlPlane::secrets_requests() const {
  std::lock_guard lock(state_->mu);
  return state_->secrets_requests;
}

std::vector<api::Heartbeat> FakeControlPlane::heartbeats() const {
  std::lock_guard lock(state_->mu);
  return state_->heartbeats;
}

std::optional<api::TaskReport> FakeControlPlane::LatestReport(const std::string& name) const {
  std::lock_guard lock(state_->mu);
  for (auto h = state_->heartbeats.rbegin(); h != state_->heartbeats.rend(); ++h) {
    for (const api::TaskReport& r : h->tasks) {
      if (r.name == name) return r;
    }
  }
  return std::nullopt;
}

std::string FakeControlPlane::Log(const std::string& ns, const std::string& job, int rank,
                                  int attempt) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->logs.find(LogKey(ns, job, rank, attempt));
  return it == state_->logs.end() ? "" : it->second;
}

bool FakeControlPlane::AwaitHeartbeats(
    const std::function<bool(const std::vector<api::Heartbeat>&)>& pred,
    absl::Duration timeout) const {
  std::unique_lock lock(state_->mu);
  return state_->changed.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                                  [&] { return pred(state_->heartbeats); });
}

bool FakeControlPlane::AwaitReport(const std::string& name,
                                   const std::function<bool(const api::TaskReport&)>& pred,
                                   absl::Duration timeout) const {
  return AwaitHeartbeats(
      [&](const std::vector<api::Heartbeat>& hs) {
        for (const api::Heartbeat& h : hs) {
          for (const api::TaskReport& r : h.tasks) {
            if (r.name == name && pred(r)) return true;
          }
        }
        return false;
      },
      timeout);
}

}  // namespace gpucloud::agent
