// FakeControlPlane: the server's side of the agent's protocol (design.md, "Agent ⇄ server"), for
// NodeAgent's tests — a test says what is assigned and how the server answers, and sees what
// the agent sent. HTTPS on 127.0.0.1 with a self-signed certificate for "localhost" (the name
// api::Client checks for 127.0.0.1); no authentication. It answers:
//   PUT  nodes/NAME                           registration: 200
//   GET  nodes/NAME/assignments               the assignments, with the current revision
//   GET  nodes/NAME/assignments?watch=true    their changes after resourceVersion, as events
//                                             (chunked), and a bookmark every 100 ms between
//   POST nodes/NAME/heartbeat                 kept; 200 acknowledging the ended reports it
//                                             carried while AcknowledgeEnded(true)
//   GET  nodes/NAME/assignments/A/secrets     the test's answer (SetSecretsAnswer), counted
//   POST namespaces/NS/jobs/J/logs?...        the test's answer (SetLogAnswer), counted; else
//                                             appended when at the log's size (200), else 409
// Anything else is 404. While SetStandby(true), every request (watches too) is answered 503, as
// a standby server of an HA control plane answers the agent's. Test-only. Thread-safe: a thread per
// connection; Await* wait on a condition variable with a deadline.
#ifndef GPUCLOUD_AGENT_FAKE_CONTROL_PLANE_H_
#define GPUCLOUD_AGENT_FAKE_CONTROL_PLANE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "api/client.h"
#include "api/wire.h"

namespace gpucloud::agent {

class FakeControlPlane {
 public:
  // The status and body of the n-th (0-based) secrets request.
  using SecretsAnswer = std::function<std::pair<int, std::string>(int n)>;
  // The status and body of the n-th (0-based) log chunk request, or nullopt to store it.
  using LogAnswer = std::function<std::optional<std::pair<int, std::string>>(int n)>;

  // Listens on a free port of 127.0.0.1; its certificate and key are written into `dir`, or
  // taken from there when an earlier one wrote them (fakes in one directory stand for the
  // servers of one control plane: one certificate, so one CA file trusts them all).
  explicit FakeControlPlane(const std::string& dir);
  ~FakeControlPlane();  // closes the listener and every connection, and joins their threads
  FakeControlPlane(const FakeControlPlane&) = delete;
  FakeControlPlane& operator=(const FakeControlPlane&) = delete;

  // How an agent reaches it (no token: the agent skips the bootstrap).
  api::ClientConfig client_config() const;

  // An assignment added (or replaced) and removed, each a new revision that watches deliver.
  void PutAssignment(const api::Assignment& a);
  void DeleteAssignment(const std::string& name);

  // Whether heartbeat answers acknowledge the ended reports they carried (off at first).
  void AcknowledgeEnded(bool on);
  // Whether it answers every request 503 (a standby); off at first. refused(): how many it did.
  void SetStandby(bool on);
  int refused() const;
  // How secrets requests are answered; by default 404 {"message": "no such assignment"}.
  void SetSecretsAnswer(SecretsAnswer answer);
  // How log chunks are answered; by default each is stored (LogAnswer's nullopt).
  void SetLogAnswer(LogAnswer answer);

  int registrations() const;
  int secrets_requests() const;
  int log_requests() const;
  // Every heartbeat received, in order.
  std::vector<api::Heartbeat> heartbeats() const;
  // The report of task `name` in the newest heartbeat that carried one; nullopt when none did.
  std::optional<api::TaskReport> LatestReport(const std::string& name) const;
  // The output shipped for the task of `ns`/`job`, rank and attempt.
  std::string Log(const std::string& ns, const std::string& job, int rank, int attempt) const;

  // Until `pred` holds for the heartbeats received so far, or `timeout` passes.
  bool AwaitHeartbeats(const std::function<bool(const std::vector<api::Heartbeat>&)>& pred,
                       absl::Duration timeout = absl::Seconds(10)) const;
  // Until a heartbeat has carried a report of task `name` for which `pred` holds.
  bool AwaitReport(const std::string& name, const std::function<bool(const api::TaskReport&)>& pred,
                   absl::Duration timeout = absl::Seconds(10)) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_FAKE_CONTROL_PLANE_H_
