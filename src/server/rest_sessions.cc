// RestApi's interactive sessions (rest.h): where an exec or port-forward goes, and the agents'
// session WebSockets. The HTTPS front upgrades and relays (session_relay.h).
#include <nlohmann/json.hpp>

#include "api/job_status.h"
#include "api/session_wire.h"
#include "api/wire.h"
#include "core/text.h"
#include "server/job_status.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

constexpr size_t kMaxCommandArgs = 256;

// The command of an exec: a JSON array of strings, not empty.
absl::StatusOr<std::vector<std::string>> ParseCommand(const Request& r) {
  auto it = r.query.find("command");
  if (it == r.query.end()) {
    return absl::InvalidArgumentError(
        "command: required (a JSON array of strings, e.g. [\"nvidia-smi\"])");
  }
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty() || j.size() > kMaxCommandArgs) {
    return absl::InvalidArgumentError(
        Cat("command: must be a JSON array of 1 to ", kMaxCommandArgs, " strings"));
  }
  std::vector<std::string> out;
  for (const nlohmann::json& arg : j) {
    if (!arg.is_string()) return absl::InvalidArgumentError("command: every element is a string");
    out.push_back(arg.get<std::string>());
    if (out.back().find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("command: an argument holds a NUL byte");
    }
  }
  if (out[0].empty()) return absl::InvalidArgumentError("command: the program's name is empty");
  return out;
}

}  // namespace

Response RestApi::SessionTarget(const Request& r, const Route& route, const std::string& sub) {
  const bool exec = sub == "exec";
  std::optional<Response> bad = exec ? RefuseQuery(r, {"rank", "command", "tty", "stdin"})
                                : sub == "attach" ? RefuseQuery(r, {"rank"})
                                                  : RefuseQuery(r, {"rank", "port"});
  if (bad) return *bad;
  api::SessionRequest request;
  request.kind = sub;
  request.user = r.who.user;
  const int64_t rank = QueryInt(r, "rank").value_or(0);
  if (r.query.contains("rank") && !QueryInt(r, "rank")) {
    return Status(400, "BadRequest", Cat("rank: \"", r.query.at("rank"), "\" is not a number"));
  }
  if (rank < 0) return Status(400, "BadRequest", "rank: must be 0 or more");
  if (exec) {
    absl::StatusOr<std::vector<std::string>> command = ParseCommand(r);
    if (!command.ok()) return Status(400, "BadRequest", std::string(command.status().message()));
    request.command = *std::move(command);
    request.tty = QueryTrue(r, "tty");
    request.stdin = QueryTrue(r, "stdin");
  } else if (sub == "attach") {
    request.stdin = true;  // the client's stdin, into the task's
  } else {
    std::optional<int64_t> port = QueryInt(r, "port");
    if (!port || *port < 1 || *port > 65535) {
      return Status(400, "BadRequest", "port: required, a TCP port from 1 to 65535");
    }
    request.port = static_cast<int>(*port);
  }
  absl::StatusOr<store::KeyValue> kv = store_.Get(route.Key());
  if (!kv.ok()) {
    if (absl::IsNotFound(kv.status())) {
      return Status(404, "NotFound", Cat("Job ", route.namespace_, "/", route.name, " not found"));
    }
    return Status(503, "ServiceUnavailable", std::string(kv.status().message()));
  }
  nlohmann::ordered_json doc =
      nlohmann::ordered_json::parse(kv->value, nullptr, /*allow_exceptions=*/false);
  absl::StatusOr<JobStatus> status = JobStatusFromJson(doc);
  if (!status.ok()) return Status(500, "InternalError", std::string(status.status().message()));
  const std::string job = Cat(route.namespace_, "/", route.name);
  if (status->phase != api::JobPhase::kRunning) {
    return Status(409, "Conflict",
                  Cat("job ", job, " is ", api::PhaseName(status->phase),
                      ": a session needs a running task"));
  }
  const PlacedReplica* placed = nullptr;
  for (const PlacedReplica& p : status->placement) {
    if (p.rank == rank) placed = &p;
  }
  if (placed == nullptr) {
    return Status(404, "NotFound",
                  Cat("job ", job, " has no rank ", rank, " (its ranks are 0 to ",
                      static_cast<int64_t>(status->placement.size()) - 1, ")"));
  }
  if (auto t = status->tasks.find(placed->name);
      t != status->tasks.end() &&
      !t->second.starts_with(api::TaskStateName(api::TaskState::kRunning))) {
    return Status(
        409, "Conflict",
        Cat("rank ", rank, " of job ", job, " is ", t->second, ": a session needs a running task"));
  }
  request.assignment = placed->name;
  request.attempt = status->attempt;
  nlohmann::json out = {{"node", placed->node},
                        {"request", nlohmann::json::parse(api::SessionRequestJson(request))}};
  return Response{200, out.dump()};
}

Response RestApi::AgentSession(const Request& r, const std::string& node, const std::string& id) {
  if (r.method != "GET") {
    return Status(405, "MethodNotAllowed", Cat(r.method, " is not allowed on ", r.path));
  }
  // Only the node itself: its agent runs what the session carries.
  if (!r.who.node || r.who.node_name != node) {
    return Status(403, "Forbidden", Cat("only node ", node, "'s agent opens its sessions"));
  }
  nlohmann::json out = {{"node", node}};
  if (!id.empty()) out["session"] = id;
  return Response{200, out.dump()};
}

}  // namespace gpucloud::server
