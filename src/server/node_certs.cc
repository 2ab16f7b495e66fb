#include "server/node_certs.h"

#include <algorithm>

#include "core/text.h"
#include "nlohmann/json.hpp"
#include "server/credentials.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::json;

}  // namespace

NodeCertificates::NodeCertificates(store::Store& store, const Clock& clock,
                                   std::string credentials_dir, absl::Duration ttl)
    : store_(store), clock_(clock), dir_(std::move(credentials_dir)), ttl_(ttl) {}

namespace {

// One /nodecerts/NAME record's serials; DataLoss naming `key` when it does not parse.
template <typename Serial>
absl::Status ParseSerials(const std::string& key, const std::string& value,
                          std::vector<Serial>& out) {
  Json doc = Json::parse(value, nullptr, false);
  if (!doc.is_object() || !doc["serials"].is_array()) {
    return absl::DataLossError(Cat(key, ": not a node certificate record"));
  }
  for (const Json& s : doc["serials"]) {
    if (!s.is_object() || !s["serial"].is_string() || !s["notAfterMs"].is_number_integer()) {
      return absl::DataLossError(Cat(key, ": a serial without serial or notAfterMs"));
    }
    out.push_back({s["serial"].get<std::string>(), s["notAfterMs"].get<int64_t>()});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NodeCertificates::Load() {
  absl::StatusOr<store::ListResult> list = store_.List("/nodecerts/");
  if (!list.ok()) return list.status();
  std::map<std::string, std::vector<Serial>> loaded;
  for (const store::KeyValue& kv : list->items) {
    std::vector<Serial>& serials = loaded[kv.key.substr(sizeof("/nodecerts/") - 1)];
    if (absl::Status s = ParseSerials(kv.key, kv.value, serials); !s.ok()) return s;
  }
  const int64_t now = clock_.NowMillis();
  absl::MutexLock lock(&mu_);
  by_node_ = std::move(loaded);
  read_ms_.clear();
  for (const auto& [name, serials] : by_node_) read_ms_[name] = now;
  return absl::OkStatus();
}

// Shared: the node's record as the store has it now, into the mirror (gone: forgotten).
void NodeCertificates::ReadFromStore(const std::string& name) const {
  absl::StatusOr<store::KeyValue> kv = store_.Get(Key(name));
  std::vector<Serial> serials;
  if (kv.ok() && !ParseSerials(kv->key, kv->value, serials).ok()) return;  // keep what we had
  if (!kv.ok() && !absl::IsNotFound(kv.status())) return;  // the store failing: keep it too
  absl::MutexLock lock(&mu_);
  if (kv.ok()) {
    by_node_[name] = std::move(serials);
  } else {
    by_node_.erase(name);
  }
  read_ms_[name] = clock_.NowMillis();
}

bool NodeCertificates::HoldsLiveCertificate(const std::vector<Serial>& serials) const {
  const int64_t now = clock_.NowMillis();
  return std::any_of(serials.begin(), serials.end(),
                     [now](const Serial& s) { return s.not_after_ms > now; });
}

absl::StatusOr<NodeCertificates::Issued> NodeCertificates::Issue(const std::string& name,
                                                                 const std::string& csr_pem,
                                                                 Asker asker,
                                                                 const std::string& asker_node) {
  if (asker == Asker::kNode && asker_node != name) {
    return absl::PermissionDeniedError(
        Cat("node ", asker_node, " may renew only its own certificate, not node ", name, "'s"));
  }
  absl::StatusOr<store::KeyValue> current = store_.Get(Key(name));
  if (!current.ok() && !absl::IsNotFound(current.status())) return current.status();
  std::vector<Serial> serials;
  if (current.ok()) {
    Json doc = Json::parse(current->value, nullptr, false);
    if (doc.is_object() && doc["serials"].is_array()) {
      for (const Json& s : doc["serials"]) {
        serials.push_back({s.value("serial", ""), s.value("notAfterMs", int64_t{0})});
      }
    }
  }
  if (asker == Asker::kBootstrap && HoldsLiveCertificate(serials)) {
    return absl::PermissionDeniedError(
        Cat("node ", name,
            " holds a certificate that has not expired: a bootstrap token cannot join a node "
            "that exists (its agent renews with its certificate; to join a new machine under "
            "this name, delete the node first: gpuctl delete node ",
            name, ")"));
  }
  const absl::Time now = absl::FromUnixMillis(clock_.NowMillis());
  absl::StatusOr<SignedCertificate> signed_cert =
      SignClientCsr(dir_, csr_pem, kNodeOrganization, Cat(kNodeNamePrefix, name), now, ttl_);
  if (!signed_cert.ok()) return signed_cert.status();
  // Newest first; expired ones and the oldest beyond kKeptSerials go.
  std::erase_if(serials,
                [&](const Serial& s) { return s.not_after_ms <= absl::ToUnixMillis(now); });
  serials.insert(serials.begin(),
                 {signed_cert->serial, absl::ToUnixMillis(signed_cert->not_after)});
  if (serials.size() > kKeptSerials) serials.resize(kKeptSerials);
  Json doc{{"node", name}, {"serials", Json::array()}};
  for (const Serial& s : serials) {
    doc["serials"].push_back({{"serial", s.serial}, {"notAfterMs", s.not_after_ms}});
  }
  absl::StatusOr<int64_t> rev = store_.Txn(
      {{store::Op::Kind::kPut, Key(name), doc.dump(),
        current.ok() ? std::optional<int64_t>(current->mod_revision) : std::optional<int64_t>(0)}});
  if (!rev.ok()) {
    if (absl::IsAlreadyExists(rev.status()) || absl::IsNotFound(rev.status())) {
      return absl::AbortedError(Cat("another certificate for node ", name, " was just issued"));
    }
    return rev.status();
  }
  {
    absl::MutexLock lock(&mu_);
    by_node_[name] = serials;
    read_ms_[name] = clock_.NowMillis();
  }
  return Issued{signed_cert->pem, signed_cert->serial, signed_cert->not_after};
}

std::optional<std::string> NodeCertificates::Authenticate(const std::string& common_name,
                                                          const std::string& serial) const {
  if (!common_name.starts_with(kNodeNamePrefix)) return std::nullopt;
  std::string name = common_name.substr(sizeof(kNodeNamePrefix) - 1);
  const int64_t now = clock_.NowMillis();
  auto valid = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = by_node_.find(name);
    if (it == by_node_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const Serial& s) { return s.serial == serial && s.not_after_ms > now; });
  };
  {
    absl::MutexLock lock(&mu_);
    if (!shared_) return valid() ? std::optional<std::string>(name) : std::nullopt;
    auto read = read_ms_.find(name);
    const bool fresh = read != read_ms_.end() && now - read->second < kSharedRefreshMs;
    // Shared: a certificate another server signed is learnt on first sight; a revocation made
    // elsewhere, within kSharedRefreshMs.
    if (fresh && valid()) return name;
    if (fresh && read->second >= now - kMissRereadMs) return std::nullopt;
  }
  ReadFromStore(name);
  absl::MutexLock lock(&mu_);
  return valid() ? std::optional<std::string>(name) : std::nullopt;
}

store::Op NodeCertificates::ForgetOp(const std::string& name) {
  return {store::Op::Kind::kDelete, Key(name), "", std::nullopt};
}

void NodeCertificates::Forget(const std::string& name) {
  absl::MutexLock lock(&mu_);
  by_node_.erase(name);
  read_ms_[name] = clock_.NowMillis();
}

}  // namespace gpucloud::server
