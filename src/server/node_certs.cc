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
  std::map<std::string, int64_t> revisions;
  for (const store::KeyValue& kv : list->items) {
    const std::string name = kv.key.substr(sizeof("/nodecerts/") - 1);
    if (absl::Status s = ParseSerials(kv.key, kv.value, loaded[name]); !s.ok()) return s;
    revisions[name] = kv.mod_revision;
  }
  absl::MutexLock lock(&mu_);
  by_node_ = std::move(loaded);
  revision_ = std::move(revisions);
  read_ms_.clear();
  loaded_rev_ = list->revision;
  return absl::OkStatus();
}

void NodeCertificates::MirrorLocked(const std::string& name,
                                    std::optional<std::vector<Serial>> serials,
                                    int64_t revision) const {
  int64_t& newest = revision_[name];
  if (revision > 0 && revision <= newest) return;
  newest = std::max(newest, revision);
  if (serials) {
    by_node_[name] = std::move(*serials);
  } else {
    by_node_.erase(name);
  }
}

// Shared: the node's record as the store has it now, into the mirror.
void NodeCertificates::ReadFromStore(const std::string& name) const {
  absl::StatusOr<store::KeyValue> kv = store_.Get(Key(name));
  std::vector<Serial> serials;
  if (kv.ok() && !ParseSerials(kv->key, kv->value, serials).ok()) return;  // keep what we had
  absl::MutexLock lock(&mu_);
  read_ms_[name] = clock_.NowMillis();
  if (kv.ok()) MirrorLocked(name, std::move(serials), kv->mod_revision);
}

void NodeCertificates::Follow(const std::vector<store::Event>& events) {
  constexpr std::string_view kPrefix = "/nodecerts/";
  absl::MutexLock lock(&mu_);
  for (const store::Event& e : events) {
    if (!e.kv.key.starts_with(kPrefix)) continue;
    const std::string name = e.kv.key.substr(kPrefix.size());
    if (e.kind == store::Event::Kind::kDelete) {
      MirrorLocked(name, std::nullopt, e.revision);
      continue;
    }
    std::vector<Serial> serials;
    if (ParseSerials(e.kv.key, e.kv.value, serials).ok()) {
      MirrorLocked(name, std::move(serials), e.revision);
    }
  }
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
    MirrorLocked(name, serials, *rev);
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
    if (valid()) return name;
    // Shared: a certificate another server signed is looked up on first sight (at most once a
    // second per node: a revoked one must not cost a store read per request).
    auto read = read_ms_.find(name);
    if (!shared_ || (read != read_ms_.end() && now - read->second < kMissRereadMs)) {
      return std::nullopt;
    }
  }
  ReadFromStore(name);
  absl::MutexLock lock(&mu_);
  return valid() ? std::optional<std::string>(name) : std::nullopt;
}

store::Op NodeCertificates::ForgetOp(const std::string& name) {
  return {store::Op::Kind::kDelete, Key(name), "", std::nullopt};
}

void NodeCertificates::Forget(const std::string& name, int64_t revision) {
  absl::MutexLock lock(&mu_);
  MirrorLocked(name, std::nullopt, revision);
  read_ms_[name] = clock_.NowMillis();
}

}  // namespace gpucloud::server
