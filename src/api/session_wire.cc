#include "api/session_wire.h"

#include <nlohmann/json.hpp>

#include "api/paths.h"
#include "core/text.h"

namespace gpucloud::api {
namespace {

using Json = nlohmann::json;

absl::StatusOr<Json> ParseObject(std::string_view text, std::string_view what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError(Cat(what, ": not a JSON object"));
  return j;
}

}  // namespace

std::string ExecMessage(ExecChannel channel, std::string_view data) {
  std::string out;
  out.reserve(data.size() + 1);
  out.push_back(static_cast<char>(channel));
  out.append(data);
  return out;
}

std::string ExecStatusJson(const ExecStatus& s) {
  Json j = {{"exitCode", s.exit_code}};
  if (s.signal != 0) j["signal"] = s.signal;
  if (!s.error.empty()) j["error"] = s.error;
  return j.dump();
}

absl::StatusOr<ExecStatus> ParseExecStatus(std::string_view json) {
  absl::StatusOr<Json> j = ParseObject(json, "exec status");
  if (!j.ok()) return j.status();
  ExecStatus s;
  if (!j->contains("exitCode") || !(*j)["exitCode"].is_number_integer()) {
    return absl::InvalidArgumentError("exec status: exitCode must be an integer");
  }
  s.exit_code = (*j)["exitCode"].get<int>();
  if (j->contains("signal") && (*j)["signal"].is_number_integer()) {
    s.signal = (*j)["signal"].get<int>();
  }
  if (j->contains("error") && (*j)["error"].is_string()) s.error = (*j)["error"];
  return s;
}

std::string TerminalSizeJson(const TerminalSize& s) {
  return Json{{"width", s.width}, {"height", s.height}}.dump();
}

absl::StatusOr<TerminalSize> ParseTerminalSize(std::string_view json) {
  absl::StatusOr<Json> j = ParseObject(json, "terminal size");
  if (!j.ok()) return j.status();
  TerminalSize s;
  for (auto [key, out] : {std::pair{"width", &s.width}, std::pair{"height", &s.height}}) {
    const Json& v = (*j)[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 65535) {
      return absl::InvalidArgumentError(
          Cat("terminal size: ", key, " must be an integer from 1 to 65535"));
    }
    *out = v.get<int>();
  }
  return s;
}

std::string EncodeForward(ForwardFrame type, uint32_t connection, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 5);
  out.push_back(static_cast<char>(type));
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((connection >> shift) & 0xff));
  }
  out.append(payload);
  return out;
}

std::optional<ForwardMessage> DecodeForward(std::string_view message) {
  if (message.size() < 5) return std::nullopt;
  auto type = static_cast<uint8_t>(message[0]);
  if (type < 1 || type > 3) return std::nullopt;
  ForwardMessage m;
  m.type = static_cast<ForwardFrame>(type);
  for (int i = 1; i <= 4; ++i) {
    m.connection = (m.connection << 8) | static_cast<uint8_t>(message[static_cast<size_t>(i)]);
  }
  m.payload = message.substr(5);
  return m;
}

std::string SessionRequestJson(const SessionRequest& r) {
  Json j = {{"id", r.id},
            {"kind", r.kind},
            {"assignment", r.assignment},
            {"attempt", r.attempt},
            {"user", r.user}};
  if (r.kind == "exec") {
    j["command"] = r.command;
    j["tty"] = r.tty;
    j["stdin"] = r.stdin;
  } else if (r.kind == "portforward") {
    j["port"] = r.port;
  }
  return j.dump();
}

absl::StatusOr<SessionRequest> ParseSessionRequest(std::string_view json) {
  absl::StatusOr<Json> j = ParseObject(json, "session request");
  if (!j.ok()) return j.status();
  SessionRequest r;
  auto str = [&](const char* key, std::string& out) -> absl::Status {
    if (!j->contains(key) || !(*j)[key].is_string()) {
      return absl::InvalidArgumentError(Cat("session request: ", key, " must be a string"));
    }
    out = (*j)[key];
    return absl::OkStatus();
  };
  for (auto [key, out] : {std::pair{"id", &r.id}, std::pair{"kind", &r.kind},
                          std::pair{"assignment", &r.assignment}}) {
    if (absl::Status s = str(key, *out); !s.ok()) return s;
  }
  if (j->contains("user") && (*j)["user"].is_string()) r.user = (*j)["user"];
  if (!(*j)["attempt"].is_number_integer()) {
    return absl::InvalidArgumentError("session request: attempt must be an integer");
  }
  r.attempt = (*j)["attempt"].get<int>();
  if (r.kind == "exec") {
    const Json& c = (*j)["command"];
    if (!c.is_array() || c.empty()) {
      return absl::InvalidArgumentError("session request: command must be a non-empty array");
    }
    for (const Json& arg : c) {
      if (!arg.is_string()) {
        return absl::InvalidArgumentError("session request: command must hold strings");
      }
      r.command.push_back(arg);
    }
    r.tty = j->value("tty", false);
    r.stdin = j->value("stdin", false);
  } else if (r.kind == "portforward") {
    const Json& p = (*j)["port"];
    if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 65535) {
      return absl::InvalidArgumentError("session request: port must be 1 to 65535");
    }
    r.port = p.get<int>();
  } else if (r.kind == "attach") {
    r.stdin = true;
  } else {
    return absl::InvalidArgumentError(
        Cat("session request: kind \"", r.kind, "\" is not exec, portforward or attach"));
  }
  return r;
}

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ExecPath(std::string_view ns, std::string_view job, int rank,
                     const std::vector<std::string>& command, bool tty, bool stdin) {
  std::string out = Cat(JobSubresourcePath(ns, job, "exec"), "?rank=", rank,
                        "&command=", PercentEncode(Json(command).dump()));
  if (tty) out += "&tty=true";
  if (stdin) out += "&stdin=true";
  return out;
}

std::string PortForwardPath(std::string_view ns, std::string_view job, int rank, int port) {
  return Cat(JobSubresourcePath(ns, job, "portforward"), "?rank=", rank, "&port=", port);
}

std::string AttachPath(std::string_view ns, std::string_view job, int rank) {
  return Cat(JobSubresourcePath(ns, job, "attach"), "?rank=", rank);
}

std::string TunnelPath(const std::string& node) { return NodeVerbPath(node, "tunnel"); }

std::string SessionPath(const std::string& node, const std::string& id) {
  return Cat(NodeVerbPath(node, "sessions"), "/", id);
}

}  // namespace gpucloud::api
