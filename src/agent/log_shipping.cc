#include "agent/log_shipping.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/paths.h"
#include "core/text.h"

namespace gpucloud::agent {

ShipPlan PlanLogShipping(int64_t size, int64_t read_pos, const LogLimits& limits, bool over_quota) {
  ShipPlan p;
  read_pos = std::clamp<int64_t>(read_pos, 0, size);
  int64_t backlog = size - read_pos;
  if (over_quota) {
    // The server keeps no more of it for now: give the output up as it comes (the file then
    // rotates like a shipped one, so the node's disk stays bounded too).
    p.drop = backlog;
    p.rotate = backlog > 0 && size > limits.rotate_bytes;
    return p;
  }
  if (backlog > limits.max_backlog) {
    // Keep the node's disk bounded and the output current: what the server could not take is
    // left in the rotated file, and the marker says how much.
    p.drop = backlog;
    p.rotate = true;
    return p;
  }
  p.ship = std::min(backlog, limits.bytes_per_pass);
  p.rotate = read_pos + p.ship == size && size > limits.rotate_bytes;
  return p;
}

std::string DroppedLogMarker(int64_t dropped, DropCause cause, const std::string& log_path,
                             const std::string& node) {
  if (cause == DropCause::kQuota) {
    return Cat("\n[gpucloud: ", dropped,
               " bytes of this task's output were not shipped (its namespace's logs on the server "
               "were at their quota); they are in ",
               log_path, " or its rotated copies .1 to .3 on node ", node, ", while they last]\n");
  }
  return Cat("\n[gpucloud: ", dropped,
             " bytes of this task's output were not shipped (it wrote faster than the server took "
             "them); they are in ",
             log_path, ".1 on node ", node, "]\n");
}

ShipAnswer ReadShipAnswer(int status, const std::string& body) {
  using Kind = ShipAnswer::Kind;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  auto number = [](const nlohmann::json& o, const char* key) -> int64_t {
    auto it = o.find(key);
    return it != o.end() && it->is_number_integer() ? std::max<int64_t>(0, it->get<int64_t>()) : 0;
  };
  ShipAnswer a;
  if (auto m = j.find("message"); m != j.end() && m->is_string()) a.message = *m;
  if (status == 200) {
    a.kind = Kind::kStored;
    a.size = number(j, "size");
  } else if (status == 409) {
    a.kind = Kind::kOtherSize;
    a.size = number(j, "size");
  } else if (status == 429 && j.find("reason") != j.end() && j["reason"] == "QuotaExceeded" &&
             j.find("details") != j.end() && j["details"].is_object() &&
             j["details"].contains("size")) {
    a.kind = Kind::kOverQuota;
    a.size = number(j["details"], "size");
    int64_t retry = number(j["details"], "retryAfterSeconds");
    a.retry_after_s = std::clamp<int64_t>(retry == 0 ? 30 : retry, 1, 600);
  } else if (status == 429 || status >= 500) {
    a.kind = Kind::kLater;
  } else {
    a.kind = Kind::kGone;
  }
  return a;
}

bool ApplyShipAnswer(const ShipAnswer& answer, int64_t sent, ChunkKind kind, LogCursor& c) {
  switch (answer.kind) {
    case ShipAnswer::Kind::kStored:
      if (kind == ChunkKind::kFile) c.read_pos += sent;
      c.shipped += sent;
      c.over_quota = false;
      return true;
    case ShipAnswer::Kind::kOtherSize:
      // The server has another length (it lost some, or has it already): follow it.
      if (kind == ChunkKind::kFile) {
        c.read_pos = std::max<int64_t>(0, c.read_pos + (answer.size - c.shipped));
      }
      c.shipped = answer.size;
      return false;
    case ShipAnswer::Kind::kOverQuota: {
      const int64_t kept = std::clamp<int64_t>(answer.size - c.shipped, 0, sent);
      c.shipped += kept;
      if (kind == ChunkKind::kFile) c.read_pos += sent;
      if (kind != ChunkKind::kMarker && sent > kept) {
        c.dropped += sent - kept;
        c.cause = DropCause::kQuota;
      }
      c.over_quota = true;
      return false;
    }
    case ShipAnswer::Kind::kLater:
      return false;
    case ShipAnswer::Kind::kGone:
      c.gone = true;
      return false;
  }
  return false;
}

int64_t ShipTimeMs(int64_t read_ms, std::optional<int64_t> written_by_ms) {
  return written_by_ms ? std::min(read_ms, *written_by_ms) : read_ms;
}

std::string LogChunkTarget(const std::string& ns, const std::string& job, int rank, int attempt,
                           int64_t offset, int64_t time_ms) {
  return api::JobSubresourcePath(
      ns, job,
      Cat("logs?rank=", rank, "&attempt=", attempt, "&offset=", offset, "&time=", time_ms));
}

}  // namespace gpucloud::agent
