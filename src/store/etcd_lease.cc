#include "store/etcd_lease.h"

#include <cmath>

#include "core/text.h"
#include "store/etcd_http.h"

namespace gpucloud::store {
namespace {

using etcd::Base64;
using etcd::JsonInt;
using nlohmann::json;

absl::StatusOr<KeyHolder> ToHolder(const json& kv) {
  KeyHolder h;
  if (kv.contains("value") && kv["value"].is_string()) {
    absl::StatusOr<std::string> value = etcd::FromBase64(kv["value"]);
    if (!value.ok()) return value.status();
    h.value = std::move(*value);
  }
  h.create_revision = JsonInt(kv, "create_revision");
  h.mod_revision = JsonInt(kv, "mod_revision");
  h.lease = JsonInt(kv, "lease");
  return h;
}

class EtcdLeases final : public LeaseClient {
 public:
  EtcdLeases(std::vector<etcd::Member> members, absl::Duration timeout,
             std::shared_ptr<etcd::TlsContext> tls)
      : http_(std::move(members), timeout, std::move(tls)) {}

  absl::StatusOr<int64_t> Grant(absl::Duration ttl) override {
    const int64_t seconds = std::max<int64_t>(1, std::ceil(absl::ToDoubleSeconds(ttl)));
    absl::StatusOr<json> r = http_.Post("/v3/lease/grant", {{"TTL", std::to_string(seconds)}});
    if (!r.ok()) return r.status();
    if (std::string error = r->value("error", ""); !error.empty()) {
      return absl::UnavailableError(Cat("etcd: lease grant: ", error));
    }
    const int64_t id = JsonInt(*r, "ID");
    if (id == 0) return absl::InternalError(Cat("etcd: lease grant without an ID: ", r->dump()));
    return id;
  }

  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) override {
    // A streaming call on the gateway: one request in the body, one result back.
    absl::StatusOr<json> r = http_.Post("/v3/lease/keepalive", {{"ID", std::to_string(lease)}});
    if (!r.ok()) return r.status();
    const int64_t ttl = JsonInt(r->value("result", json::object()), "TTL");
    if (ttl <= 0) return absl::NotFoundError(Cat("etcd: lease ", lease, " has expired"));
    return absl::Seconds(ttl);
  }

  absl::Status Revoke(int64_t lease) override {
    return http_.Post("/v3/lease/revoke", {{"ID", std::to_string(lease)}}).status();
  }

  absl::StatusOr<KeyHolder> CreateIfAbsent(const std::string& key, const std::string& value,
                                           int64_t lease) override {
    const json range = {{"request_range", {{"key", Base64(key)}}}};
    json req = {
        {"compare",
         {{{"key", Base64(key)},
           {"target", "CREATE"},
           {"result", "EQUAL"},
           {"create_revision", "0"}}}},
        {"success",
         {{{"request_put",
            {{"key", Base64(key)}, {"value", Base64(value)}, {"lease", std::to_string(lease)}}}},
          range}},
        {"failure", {range}}};
    absl::StatusOr<json> r = http_.Post("/v3/kv/txn", req);
    if (!r.ok()) return r.status();
    // The range is the last response of either branch.
    const json& responses = r->value("responses", json::array());
    if (responses.empty()) return absl::InternalError(Cat("etcd: txn without responses on ", key));
    const json& kvs = responses.back()["response_range"].value("kvs", json::array());
    // The key can be gone already (its lease expired between the compare and the read: never
    // in one txn), so an empty read is an answer that the caller retries.
    if (kvs.empty()) return absl::UnavailableError(Cat("etcd: ", key, " vanished in its txn"));
    return ToHolder(kvs[0]);
  }

  absl::StatusOr<std::optional<KeyHolder>> Holder(const std::string& key) override {
    absl::StatusOr<json> r = http_.Post("/v3/kv/range", {{"key", Base64(key)}});
    if (!r.ok()) return r.status();
    const json& kvs = r->value("kvs", json::array());
    if (kvs.empty()) return std::optional<KeyHolder>();
    absl::StatusOr<KeyHolder> h = ToHolder(kvs[0]);
    if (!h.ok()) return h.status();
    return std::optional<KeyHolder>(std::move(*h));
  }

 private:
  const etcd::Http http_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseClient>> OpenEtcdLeases(const std::string& endpoints,
                                                            absl::Duration request_timeout,
                                                            const EtcdTlsOptions& tls) {
  absl::StatusOr<std::vector<etcd::Member>> members = etcd::ParseMembers(endpoints);
  if (!members.ok()) return members.status();
  if (request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd leases: the request timeout must be positive");
  }
  absl::StatusOr<std::shared_ptr<etcd::TlsContext>> context = etcd::MakeTlsContext(tls);
  if (!context.ok()) return context.status();
  return std::make_unique<EtcdLeases>(std::move(*members), request_timeout, std::move(*context));
}

}  // namespace gpucloud::store
