#include "server/identity_book.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/object_meta.h"
#include "core/private_file.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/credentials.h"

namespace gpucloud::server {
namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> Strings(const Json& doc, const char* field) {
  std::vector<std::string> out;
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object()) return out;
  auto it = doc["spec"].find(field);
  if (it == doc["spec"].end() || !it->is_array()) return out;
  for (const Json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string SpecString(const Json& doc, const char* field) {
  if (!doc.is_object() || !doc.contains("spec") || !doc["spec"].is_object()) return "";
  return doc["spec"].value(field, "");
}

constexpr std::string_view kIam = "/iam/";

}  // namespace

IdentityBook::IdentityBook(store::Store& store, const Clock& clock, Authorizer& authorizer)
    : store_(store), clock_(clock), authorizer_(authorizer) {}

absl::Status IdentityBook::Load() {
  absl::StatusOr<store::ListResult> list = store_.List(std::string(kIam));
  if (!list.ok()) return list.status();
  std::map<std::string, std::pair<Json, int64_t>> listed;
  for (const store::KeyValue& kv : list->items) {
    Json doc = Json::parse(kv.value, nullptr, false);
    if (!doc.is_object()) return absl::DataLossError(Cat(kv.key, ": not a JSON object"));
    listed.emplace(kv.key, std::make_pair(std::move(doc), kv.mod_revision));
  }
  absl::MutexLock lock(&mu_);
  // Loaded again (the follower fell behind a compaction): what is gone from the store goes from
  // the mirror too (a token revoked meanwhile), unless this server wrote it after the list.
  for (auto it = mirrored_rev_.begin(); it != mirrored_rev_.end();) {
    if (!listed.contains(it->first) && it->second <= list->revision) {
      MirrorLocked(it->first, nullptr);
      it = mirrored_rev_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, doc] : listed) MirrorAtLocked(key, &doc.first, doc.second);
  loaded_rev_ = list->revision;
  PublishPoliciesLocked();
  return absl::OkStatus();
}

bool IdentityBook::MirrorAtLocked(const std::string& key, const Json* doc, int64_t revision) {
  int64_t& applied = mirrored_rev_[key];
  if (revision > 0 && revision <= applied) return false;
  applied = std::max(applied, revision);
  MirrorLocked(key, doc);
  return true;
}

void IdentityBook::Follow(const std::vector<store::Event>& events) {
  absl::MutexLock lock(&mu_);
  bool policies = false;
  for (const store::Event& e : events) {
    if (!e.kv.key.starts_with(kIam)) continue;
    Json doc;
    if (e.kind == store::Event::Kind::kPut) {
      doc = Json::parse(e.kv.value, nullptr, false);
      if (!doc.is_object()) continue;
    }
    const Json* mirrored = e.kind == store::Event::Kind::kPut ? &doc : nullptr;
    if (MirrorAtLocked(e.kv.key, mirrored, e.revision)) {
      policies = policies || e.kv.key.starts_with("/iam/policies/");
    }
  }
  if (policies) PublishPoliciesLocked();
}

void IdentityBook::MirrorLocked(const std::string& key, const Json* doc) {
  std::string rest = key.substr(kIam.size());
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return;
  const std::string kind = rest.substr(0, slash), name = rest.substr(slash + 1);
  if (kind == "users") {
    doc ? void(users_[name] = *doc) : void(users_.erase(name));
  } else if (kind == "groups") {
    doc ? void(groups_[name] = *doc) : void(groups_.erase(name));
  } else if (kind == "serviceaccounts") {
    doc ? void(service_accounts_[name] = *doc) : void(service_accounts_.erase(name));
  } else if (kind == "policies") {
    policies_.erase(name);
    if (doc) {
      manifest::PolicyDocumentResult p = manifest::ParsePolicyDocument(doc->dump(), key);
      if (p.ok()) policies_[name] = std::move(p.document);  // written validated
    }
  } else if (kind == "tokens") {
    if (auto h = token_hash_by_name_.find(name); h != token_hash_by_name_.end()) {
      tokens_by_hash_.erase(h->second);
      token_hash_by_name_.erase(h);
    }
    if (doc && (*doc)["hash"].is_string()) {
      Token t{name, SpecString(*doc, "user"), SpecString(*doc, "serviceAccount"),
              (*doc)["spec"].value("expiresAtMs", int64_t{0})};
      const std::string hash = (*doc)["hash"].get<std::string>();
      tokens_by_hash_[hash] = t;
      token_hash_by_name_[name] = hash;
    }
  }
}

void IdentityBook::PublishPoliciesLocked() { authorizer_.SetPolicies(policies_); }

Identity IdentityBook::UserIdentityLocked(const std::string& name) const {
  Identity who;
  who.user = name;
  auto u = users_.find(name);
  if (u == users_.end()) {
    who.policies = std::vector<std::string>{};
    return who;
  }
  who.namespace_ = SpecString(u->second, "namespace");
  who.groups = Strings(u->second, "groups");
  std::vector<std::string> policies = Strings(u->second, "policies");
  for (const std::string& g : who.groups) {
    if (auto it = groups_.find(g); it != groups_.end()) {
      for (std::string& p : Strings(it->second, "policies")) policies.push_back(std::move(p));
    }
  }
  std::sort(policies.begin(), policies.end());
  policies.erase(std::unique(policies.begin(), policies.end()), policies.end());
  who.policies = std::move(policies);
  return who;
}

std::optional<Identity> IdentityBook::Authenticate(const std::string& token) const {
  if (token.empty()) return std::nullopt;
  const std::string hash = Sha256Hex(token);
  absl::ReaderMutexLock lock(&mu_);
  auto it = tokens_by_hash_.find(hash);
  if (it == tokens_by_hash_.end()) return std::nullopt;
  const Token& t = it->second;
  if (t.expires_ms > 0 && clock_.NowMillis() >= t.expires_ms) return std::nullopt;
  Identity who;
  if (!t.service_account.empty()) {
    auto sa = service_accounts_.find(t.service_account);
    if (sa == service_accounts_.end()) return std::nullopt;  // deleted with its tokens' use
    who.user = Cat("system:serviceaccount:", t.service_account);
    who.namespace_ = t.service_account.substr(0, t.service_account.find('/'));
    who.policies = Strings(sa->second, "policies");
  } else {
    if (!users_.contains(t.user)) return std::nullopt;  // a deleted user's tokens die with it
    who = UserIdentityLocked(t.user);
  }
  who.token_name = t.name;
  return who;
}

absl::StatusOr<int> IdentityBook::MigrateTokenFile(const std::string& dir) {
  const std::string path = dir + "/tokens";
  std::ifstream in(path);
  if (!in) return 0;
  std::string line, kept;
  int moved = 0, n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::istringstream fields(line);
    std::string hash, user, ns, role;
    if (line.empty() || line[0] == '#' || !(fields >> hash >> user >> ns >> role) ||
        role != "tenant") {
      kept += line + "\n";  // TokenBook::Load judges these lines
      continue;
    }
    if (!ValidateDnsLabel(user).ok() || !ValidateDnsLabel(ns).ok()) {
      return absl::DataLossError(
          Cat(path, ":", n, ": user and namespace must be DNS labels to move into the API"));
    }
    std::vector<store::Op> ops;
    bool known = false;
    {
      absl::ReaderMutexLock lock(&mu_);
      known = tokens_by_hash_.contains(hash);
      if (!users_.contains(user)) {
        Json u{{"apiVersion", "gpucloud/v1"},
               {"kind", "User"},
               {"metadata", {{"name", user}}},
               {"spec", {{"namespace", ns}, {"policies", {"gpucloud:tenant"}}}}};
        ops.push_back({store::Op::Kind::kPut, Cat("/iam/users/", user), u.dump(2), 0});
      }
    }
    if (!known) {
      Json t{{"apiVersion", "gpucloud/v1"},
             {"kind", "Token"},
             {"metadata", {{"name", Cat(user, "-tokens-file")}}},
             {"spec", {{"user", user}, {"expiresAtMs", 0}, {"createdBy", "tokens file"}}},
             {"hash", hash}};
      ops.push_back({store::Op::Kind::kPut, TokenKey(Cat(user, "-tokens-file")), t.dump(2), 0});
    }
    for (const store::Op& op : ops) {
      Json doc = Json::parse(op.value);
      if (absl::StatusOr<int64_t> rev = Put(op.key, doc, 0); !rev.ok()) return rev.status();
    }
    ++moved;
  }
  if (moved > 0) {
    if (absl::Status s = WritePrivateFile(path, kept, FileSync::kDurable); !s.ok()) return s;
  }
  return moved;
}

std::optional<Identity> IdentityBook::IdentityOfUser(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  if (!users_.contains(name)) return std::nullopt;
  return UserIdentityLocked(name);
}

std::string IdentityBook::TokenOwner(const std::string& token_name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto h = token_hash_by_name_.find(token_name);
  if (h == token_hash_by_name_.end()) return "";
  return tokens_by_hash_.at(h->second).user;
}

absl::StatusOr<int64_t> IdentityBook::Put(const std::string& key, const Json& doc,
                                          std::optional<int64_t> expect) {
  absl::StatusOr<int64_t> rev = store_.Txn({{store::Op::Kind::kPut, key, doc.dump(2), expect}});
  if (!rev.ok()) return rev;
  absl::MutexLock lock(&mu_);
  MirrorAtLocked(key, &doc, *rev);
  if (key.starts_with("/iam/policies/")) PublishPoliciesLocked();
  return rev;
}

absl::StatusOr<int64_t> IdentityBook::Delete(const std::string& key,
                                             std::optional<int64_t> expect) {
  absl::StatusOr<int64_t> rev = store_.Txn({{store::Op::Kind::kDelete, key, "", expect}});
  if (!rev.ok()) return rev;
  absl::MutexLock lock(&mu_);
  MirrorAtLocked(key, nullptr, *rev);
  if (key.starts_with("/iam/policies/")) PublishPoliciesLocked();
  return rev;
}

}  // namespace gpucloud::server
