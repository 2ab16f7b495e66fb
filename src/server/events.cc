#include "server/events.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "core/text.h"

namespace gpucloud::server {

std::string EventPrefix(const std::string& ns, const std::string& job) {
  return Cat("/events/", ns, "/", job, ".");
}

namespace {

store::Op EventOp(const std::string& ns, const std::string& job, nlohmann::ordered_json involved,
                  const JobEvent& e, int64_t now_ms, uint64_t seq) {
  std::string name = fmt::format("{}.{:013d}-{}", job, now_ms, seq);
  nlohmann::ordered_json j{
      {"apiVersion", "gpucloud/v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"involvedObject", std::move(involved)},
      {"type", e.type},
      {"reason", e.reason},
      {"message", e.message},
      {"timestamp",
       absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(now_ms), absl::UTCTimeZone())},
      {"timestampMs", now_ms}};
  return {store::Op::Kind::kPut, Cat("/events/", ns, "/", name), j.dump(), std::nullopt};
}

}  // namespace

store::Op MakeEventOp(const std::string& ns, const std::string& job, const std::string& uid,
                      const JobEvent& e, int64_t now_ms, uint64_t seq) {
  return EventOp(ns, job, {{"kind", "Job"}, {"namespace", ns}, {"name", job}, {"uid", uid}}, e,
                 now_ms, seq);
}

store::Op MakeNamespaceEventOp(const std::string& ns, const std::string& uid, const JobEvent& e,
                               int64_t now_ms, uint64_t seq) {
  return EventOp(ns, std::string(kNamespaceEvents),
                 {{"kind", "Namespace"}, {"name", ns}, {"uid", uid}}, e, now_ms, seq);
}

std::vector<std::string> EventKeysOf(store::Store& store, const std::string& ns,
                                     const std::string& job) {
  std::vector<std::string> keys;
  absl::StatusOr<store::ListResult> list = store.List(EventPrefix(ns, job));
  if (!list.ok()) return keys;
  for (const store::KeyValue& kv : list->items) keys.push_back(kv.key);
  return keys;
}

}  // namespace gpucloud::server
