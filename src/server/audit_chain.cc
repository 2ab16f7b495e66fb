#include "server/audit_chain.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "core/text.h"

namespace gpucloud::server {
namespace {

using nlohmann::json;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};

// Canonical text: sorted keys (nlohmann::json's objects are std::map), no whitespace, invalid
// UTF-8 replaced by U+FFFD (so any string can be recorded and the text always parses).
std::string Canonical(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

// SHA-256 fetched from OpenSSL's provider once (EVP_sha256() makes every digest fetch it
// again); an EVP_MD may be shared between threads.
const EVP_MD* Sha256() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md != nullptr ? md : EVP_sha256();
}

// SHA-256 in hex of the concatenation of `parts`, without concatenating them.
std::string Sha256Hex(std::initializer_list<std::string_view> parts) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx.get(), Sha256(), nullptr) == 1;
  for (std::string_view part : parts) {
    ok = ok && EVP_DigestUpdate(ctx.get(), part.data(), part.size()) == 1;
  }
  ok = ok && EVP_DigestFinal_ex(ctx.get(), md, &n) == 1;
  return ok ? Hex(md, n) : std::string();
}

std::string Sha256Hex(const std::string& data) { return Sha256Hex({std::string_view(data)}); }

// RFC 3339 in UTC with microseconds, as Kubernetes writes a MicroTime.
std::string FormatTime(int64_t ms) {
  int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  int64_t rest = ms - secs * 1000;
  time_t t = static_cast<time_t>(secs);
  struct tm tm {};
  gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:06d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rest * 1000);
}

// The inverse of FormatTime; a text it would not write does not survive the canonical check.
absl::StatusOr<int64_t> ParseTime(const std::string& text, const char* field) {
  struct tm tm {};
  int micros = 0;
  char z = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6d%c", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &micros, &z) != 8 ||
      z != 'Z') {
    return absl::InvalidArgumentError(Cat(field, ": not an RFC 3339 UTC time: ", text));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + micros / 1000;
}

// JSON string quoting exactly as nlohmann::json's dump writes it (so that a record parsed and
// dumped again is byte for byte what was hashed); invalid UTF-8 bytes become U+FFFD.
void Quote(std::string& out, std::string_view s) {
  out += '"';
  while (!s.empty()) {
    size_t bad = FirstInvalidUtf8(s);
    std::string_view good = s.substr(0, bad);
    for (char ch : good) {
      unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20) {
            out += fmt::format("\\u{:04x}", c);
          } else {
            out += ch;
          }
      }
    }
    if (bad == std::string_view::npos) break;
    out += "\xEF\xBF\xBD";
    s.remove_prefix(bad + 1);
  }
  out += '"';
}

void QuoteList(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    Quote(out, items[i]);
  }
  out += ']';
}

// The canonical JSON of a record, written directly (keys in byte order, no whitespace); the same
// text as nlohmann::json's dump of RecordJson, several times faster. Without "hash" when
// `with_hash` is false: the bytes the hash is over. With `cuts` (and no hash), the values of
// prevHash and seq are left out too, and `cuts` says where they and "hash" go.
struct Cuts {
  size_t hash = 0, prev_hash = 0, seq = 0;
};
std::string CanonicalRecord(const AuditRecord& r, bool with_hash, Cuts* cuts = nullptr) {
  std::string out;
  out.reserve(1024);
  auto field = [&](const char* key, std::string_view value) {
    out += key;
    Quote(out, value);
  };
  field("{\"action\":", r.action);
  out += ",\"annotations\":{";
  bool first = true;
  for (const auto& [k, v] : r.annotations) {
    if (!first) out += ',';
    first = false;
    Quote(out, k);
    out += ':';
    Quote(out, v);
  }
  out += "},\"apiVersion\":\"audit.k8s.io/v1\"";
  field(",\"auditID\":", r.audit_id);
  field(",\"decision\":", r.decision);
  if (with_hash) field(",\"hash\":", r.hash);
  if (cuts != nullptr) cuts->hash = out.size();
  out += ",\"kind\":\"Event\",\"level\":\"Metadata\"";
  field(",\"nodeName\":", r.node_name);
  field(",\"objectRef\":{\"name\":", r.object_name);
  field(",\"namespace\":", r.object_namespace);
  field(",\"resource\":", r.object_resource);
  if (cuts != nullptr) {
    out += "},\"prevHash\":";
    cuts->prev_hash = out.size();
  } else {
    field("},\"prevHash\":", r.prev_hash);
  }
  field(",\"reason\":", r.reason);
  field(",\"requestReceivedTimestamp\":", FormatTime(r.request_received_ms));
  field(",\"requestURI\":", r.request_uri);
  field(",\"resource\":", r.resource);
  out += fmt::format(",\"responseStatus\":{{\"code\":{}}},\"seq\":", r.response_code);
  if (cuts != nullptr) {
    cuts->seq = out.size();
  } else {
    out += std::to_string(r.seq);
  }
  out += ",\"sourceIPs\":";
  QuoteList(out, r.source_ips);
  field(",\"stage\":", r.stage);
  field(",\"stageTimestamp\":", FormatTime(r.stage_ms));
  field(",\"tokenName\":", r.token_name);
  out += ",\"user\":{\"groups\":";
  QuoteList(out, r.groups);
  field(",\"username\":", r.username);
  field("},\"userAgent\":", r.user_agent);
  field(",\"verb\":", r.verb);
  out += '}';
  return out;
}

json RecordJson(const AuditRecord& r) {
  json j = {
      {"kind", "Event"},
      {"apiVersion", "audit.k8s.io/v1"},
      {"level", "Metadata"},
      {"auditID", r.audit_id},
      {"stage", r.stage},
      {"requestURI", r.request_uri},
      {"verb", r.verb},
      {"user", {{"username", r.username}, {"groups", r.groups}}},
      {"sourceIPs", r.source_ips},
      {"userAgent", r.user_agent},
      {"objectRef",
       {{"resource", r.object_resource},
        {"namespace", r.object_namespace},
        {"name", r.object_name}}},
      {"responseStatus", {{"code", r.response_code}}},
      {"requestReceivedTimestamp", FormatTime(r.request_received_ms)},
      {"stageTimestamp", FormatTime(r.stage_ms)},
      {"annotations", r.annotations},
      {"seq", r.seq},
      {"action", r.action},
      {"resource", r.resource},
      {"decision", r.decision},
      {"reason", r.reason},
      {"tokenName", r.token_name},
      {"nodeName", r.node_name},
      {"prevHash", r.prev_hash},
  };
  return j;
}

// Fills `r` from `j`; throws json exceptions on a missing field or a wrong type.
absl::Status FillRecord(const json& j, AuditRecord& r) {
  r.audit_id = j.at("auditID").get<std::string>();
  r.stage = j.at("stage").get<std::string>();
  r.request_uri = j.at("requestURI").get<std::string>();
  r.verb = j.at("verb").get<std::string>();
  r.username = j.at("user").at("username").get<std::string>();
  r.groups = j.at("user").at("groups").get<std::vector<std::string>>();
  r.source_ips = j.at("sourceIPs").get<std::vector<std::string>>();
  r.user_agent = j.at("userAgent").get<std::string>();
  r.object_resource = j.at("objectRef").at("resource").get<std::string>();
  r.object_namespace = j.at("objectRef").at("namespace").get<std::string>();
  r.object_name = j.at("objectRef").at("name").get<std::string>();
  r.response_code = j.at("responseStatus").at("code").get<int>();
  absl::StatusOr<int64_t> t =
      ParseTime(j.at("requestReceivedTimestamp").get<std::string>(), "requestReceivedTimestamp");
  if (!t.ok()) return t.status();
  r.request_received_ms = *t;
  t = ParseTime(j.at("stageTimestamp").get<std::string>(), "stageTimestamp");
  if (!t.ok()) return t.status();
  r.stage_ms = *t;
  r.annotations = j.at("annotations").get<std::map<std::string, std::string>>();
  r.seq = j.at("seq").get<int64_t>();
  r.action = j.at("action").get<std::string>();
  r.resource = j.at("resource").get<std::string>();
  r.decision = j.at("decision").get<std::string>();
  r.reason = j.at("reason").get<std::string>();
  r.token_name = j.at("tokenName").get<std::string>();
  r.node_name = j.at("nodeName").get<std::string>();
  r.prev_hash = j.at("prevHash").get<std::string>();
  r.hash = j.at("hash").get<std::string>();
  return absl::OkStatus();
}

// The first key of `got` that `want` lacks or holds otherwise (one level deep), for messages.
std::string FirstDifference(const json& got, const json& want) {
  for (const auto& [k, v] : got.items()) {
    if (!want.contains(k)) return Cat("unknown field ", k);
    if (want[k] != v) return Cat("field ", k, " is not in canonical form");
  }
  for (const auto& [k, v] : want.items()) {
    if (!got.contains(k)) return Cat("missing field ", k);
  }
  return "not in canonical form";
}

json DigestJson(const AuditDigest& d) {
  return json{{"seq", d.seq},
              {"headHash", d.head_hash},
              {"time", FormatTime(d.time_ms)},
              {"keyId", d.key_id}};
}

std::string Base64(const unsigned char* p, size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
  out.resize(len);
  return out;
}

bool Unbase64(const std::string& in, std::string& out) {
  if (in.empty() || in.size() % 4 != 0) return false;
  out.assign(in.size() / 4 * 3 + 1, '\0');
  int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(in.data()),
                            static_cast<int>(in.size()));
  if (len < 0) return false;
  size_t pad = in.ends_with("==") ? 2 : in.ends_with("=") ? 1 : 0;
  out.resize(len - pad);
  return true;
}

}  // namespace

std::string EncodeRecord(const AuditRecord& r) { return CanonicalRecord(r, true); }

std::string RecordHash(const AuditRecord& r) { return Sha256Hex(CanonicalRecord(r, false)); }

PreparedRecord PrepareRecord(const AuditRecord& r) {
  Cuts cuts;
  PreparedRecord p;
  p.text = CanonicalRecord(r, false, &cuts);
  p.hash_at = cuts.hash;
  p.prev_hash_at = cuts.prev_hash;
  p.seq_at = cuts.seq;
  return p;
}

// The hash is over the text with prevHash's and seq's values in place and no "hash" member: it
// is taken over the pieces, and the text is then written once, with the member.
std::string ChainRecord(const PreparedRecord& p, int64_t seq, const std::string& prev_hash,
                        AuditRecord& r) {
  r.seq = seq;
  r.prev_hash = prev_hash;
  char seq_buf[24];  // an int64 in decimal: at most 20 characters
  const std::string_view seq_text(seq_buf,
                                  std::to_chars(seq_buf, std::end(seq_buf), seq).ptr - seq_buf);
  const std::string_view text(p.text);
  const std::string_view to_hash_member = text.substr(0, p.hash_at);
  const std::string_view to_prev_hash = text.substr(p.hash_at, p.prev_hash_at - p.hash_at);
  const std::string_view to_seq = text.substr(p.prev_hash_at, p.seq_at - p.prev_hash_at);
  const std::string_view rest = text.substr(p.seq_at);
  // prevHash is a hash (hex: nothing to escape) or the genesis hash.
  r.hash = Sha256Hex({to_hash_member, to_prev_hash, "\"", prev_hash, "\"", to_seq, seq_text, rest});
  static constexpr std::string_view kHashKey = ",\"hash\":\"";
  std::string out;
  out.reserve(text.size() + kHashKey.size() + r.hash.size() + 1 + prev_hash.size() + 2 +
              seq_text.size());
  out.append(to_hash_member).append(kHashKey).append(r.hash).append(1, '"');
  out.append(to_prev_hash).append(1, '"').append(prev_hash).append(1, '"');
  out.append(to_seq).append(seq_text).append(rest);
  return out;
}

std::string HashAndEncodeRecord(AuditRecord& r) {
  const std::string prev_hash = r.prev_hash;
  return ChainRecord(PrepareRecord(r), r.seq, prev_hash, r);
}

absl::StatusOr<AuditRecord> DecodeRecord(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("audit record: not a JSON object");
  }
  AuditRecord r;
  try {
    if (absl::Status s = FillRecord(j, r); !s.ok()) {
      return absl::InvalidArgumentError(Cat("audit record: ", s.message()));
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(Cat("audit record: ", e.what()));
  }
  // Byte for byte what this record encodes to, so that its hash is over what was stored.
  std::string canonical = EncodeRecord(r);
  if (Canonical(j) != canonical) {
    json want = RecordJson(r);
    want["hash"] = r.hash;
    return absl::InvalidArgumentError(Cat("audit record: ", FirstDifference(j, want)));
  }
  return r;
}

// ---- keys ----

AuditKey::AuditKey(std::shared_ptr<evp_pkey_st> key, bool has_private)
    : key_(std::move(key)), has_private_(has_private) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key_.get(), &der);
  if (n > 0) key_id_ = Sha256Hex(std::string(reinterpret_cast<char*>(der), n));
  OPENSSL_free(der);
}

absl::StatusOr<AuditKey> AuditKey::FromPem(const std::string& pem) {
  auto read = [&](auto fn) {
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    EVP_PKEY* k = fn(b);
    BIO_free(b);
    return k;
  };
  bool has_private = true;
  EVP_PKEY* k = read([](BIO* b) { return PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr); });
  if (!k) {
    has_private = false;
    k = read([](BIO* b) { return PEM_read_bio_PUBKEY(b, nullptr, nullptr, nullptr); });
  }
  if (!k) {
    k = read([](BIO* b) -> EVP_PKEY* {
      X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
      if (!cert) return nullptr;
      EVP_PKEY* pub = X509_get_pubkey(cert);
      X509_free(cert);
      return pub;
    });
  }
  if (!k) {
    return absl::InvalidArgumentError("not a PEM private key, public key or certificate");
  }
  std::shared_ptr<evp_pkey_st> key(k, PkeyFree());
  char group[64] = {0};
  size_t len = 0;
  if (!EVP_PKEY_is_a(k, "EC") ||
      EVP_PKEY_get_utf8_string_param(k, "group", group, sizeof group, &len) != 1 ||
      std::string(group) != "prime256v1") {
    return absl::InvalidArgumentError("the audit key must be an ECDSA P-256 key");
  }
  return AuditKey(std::move(key), has_private);
}

absl::StatusOr<AuditKey> AuditKey::FromPemFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(Cat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<AuditKey> key = FromPem(text.str());
  if (!key.ok()) return absl::InvalidArgumentError(Cat(path, ": ", key.status().message()));
  return key;
}

AuditKey AuditKey::Generate() {
  return AuditKey(std::shared_ptr<evp_pkey_st>(EVP_EC_gen("P-256"), PkeyFree()), true);
}

std::string AuditKey::PublicPem() const {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(b, key_.get());
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

absl::StatusOr<std::string> AuditKey::Sign(const std::string& data) const {
  if (!has_private_) return absl::FailedPreconditionError("the audit key has no private part");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t len = 0;
  std::string sig;
  bool ok = EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key_.get()) == 1 &&
            EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                           data.size()) == 1;
  if (ok) {
    sig.resize(len);
    ok = EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                        reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
    sig.resize(len);
  }
  EVP_MD_CTX_free(ctx);
  if (!ok) return absl::InternalError("OpenSSL: cannot sign the audit digest");
  return Base64(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

bool AuditKey::Verify(const std::string& data, const std::string& signature_base64) const {
  std::string sig;
  if (!Unbase64(signature_base64, sig)) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key_.get()) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                             reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// ---- digests ----

std::string EncodeDigest(const AuditDigest& d) {
  json j = DigestJson(d);
  j["signature"] = d.signature;
  return Canonical(j);
}

absl::StatusOr<AuditDigest> DecodeDigest(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("audit digest: not a JSON object");
  }
  AuditDigest d;
  try {
    d.seq = j.at("seq").get<int64_t>();
    d.head_hash = j.at("headHash").get<std::string>();
    absl::StatusOr<int64_t> t = ParseTime(j.at("time").get<std::string>(), "time");
    if (!t.ok()) return absl::InvalidArgumentError(Cat("audit digest: ", t.status().message()));
    d.time_ms = *t;
    d.key_id = j.at("keyId").get<std::string>();
    d.signature = j.at("signature").get<std::string>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(Cat("audit digest: ", e.what()));
  }
  json want = json::parse(EncodeDigest(d));
  if (want != j) return absl::InvalidArgumentError(Cat("audit digest: ", FirstDifference(j, want)));
  return d;
}

absl::StatusOr<AuditDigest> SignDigest(int64_t seq, const std::string& head_hash, int64_t time_ms,
                                       const AuditKey& key) {
  AuditDigest d{seq, head_hash, time_ms, key.key_id(), ""};
  absl::StatusOr<std::string> sig = key.Sign(Canonical(DigestJson(d)));
  if (!sig.ok()) return sig.status();
  d.signature = *sig;
  return d;
}

bool DigestSignatureValid(const AuditDigest& d, const AuditKey& key) {
  return d.key_id == key.key_id() && key.Verify(Canonical(DigestJson(d)), d.signature);
}

// ---- verification ----

namespace {

VerifyReport Bad(VerifyReport r, int64_t seq, std::string what) {
  r.ok = false;
  r.first_bad_seq = seq;
  r.what = std::move(what);
  return r;
}

// Decodes and checks every digest into `by_seq`; a report with !ok on the first bad one.
VerifyReport LoadDigests(const std::vector<std::string>& texts, const AuditKey& key,
                         std::map<int64_t, AuditDigest>& by_seq) {
  VerifyReport report;
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<AuditDigest> d = DecodeDigest(texts[i]);
    if (!d.ok())
      return Bad(report, 0, Cat("digest ", i + 1, " does not decode: ", d.status().message()));
    if (!DigestSignatureValid(*d, key)) {
      return Bad(report, d->seq,
                 Cat("the digest for seq ", d->seq,
                     " is not signed by this server's key (forged, altered or another key's)"));
    }
    auto [it, inserted] = by_seq.emplace(d->seq, *d);
    if (!inserted && it->second.head_hash != d->head_hash) {
      return Bad(report, d->seq, Cat("two signed digests for seq ", d->seq, " disagree"));
    }
  }
  return report;
}

// Where the log starts: record 1 after the genesis hash, or record F after the digest at F-1.
VerifyReport CheckStart(VerifyReport report, const AuditRecord& first,
                        const std::map<int64_t, AuditDigest>& digests) {
  if (first.seq < 1) return Bad(report, 1, Cat("the first record has seq ", first.seq));
  if (first.seq == 1) {
    if (first.prev_hash != kGenesisHash) {
      return Bad(report, 1, "record 1 does not start a log (its prevHash is not the genesis hash)");
    }
    return report;
  }
  auto anchor = digests.find(first.seq - 1);
  if (anchor == digests.end()) {
    auto below = digests.lower_bound(first.seq - 1);
    int64_t missing = below == digests.begin() ? 1 : std::prev(below)->first + 1;
    return Bad(report, missing,
               Cat("the log starts at seq ", first.seq, " but no signed digest anchors seq ",
                   first.seq - 1, ": records from seq ", missing, " were removed"));
  }
  if (anchor->second.head_hash != first.prev_hash) {
    return Bad(
        report, first.seq,
        Cat("record ", first.seq, " does not follow the signed digest for seq ", first.seq - 1));
  }
  return report;
}

// Checks record `r` (after `prev`, the previous one, when there is one).
VerifyReport CheckRecord(VerifyReport report, const AuditRecord* prev, const AuditRecord& r,
                         const std::map<int64_t, AuditDigest>& digests) {
  if (prev && r.seq <= prev->seq) {
    return Bad(
        report, r.seq,
        Cat("record ", r.seq, " comes after record ", prev->seq, " (inserted or reordered)"));
  }
  if (prev && r.seq > prev->seq + 1) {
    return Bad(report, prev->seq + 1,
               Cat("records ", prev->seq + 1, " to ", r.seq - 1, " are missing (deleted)"));
  }
  if (RecordHash(r) != r.hash) {
    return Bad(report, r.seq, Cat("record ", r.seq, " was modified: its hash does not match"));
  }
  if (prev && r.prev_hash != prev->hash) {
    return Bad(report, r.seq,
               Cat("record ", r.seq, " does not follow record ", prev->seq,
                   " (prevHash differs: a record was inserted, replaced or removed)"));
  }
  auto d = digests.find(r.seq);
  if (d != digests.end() && d->second.head_hash != r.hash) {
    return Bad(report, r.seq,
               Cat("record ", r.seq, " is not the one the signed digest for seq ", r.seq,
                   " covers (replaced)"));
  }
  return report;
}

}  // namespace

VerifyReport VerifyChain(const std::vector<std::string>& records,
                         const std::vector<std::string>& digests, const AuditKey& key) {
  std::map<int64_t, AuditDigest> by_seq;
  VerifyReport report = LoadDigests(digests, key, by_seq);
  if (!report.ok) return report;
  AuditRecord prev;
  for (size_t i = 0; i < records.size(); ++i) {
    absl::StatusOr<AuditRecord> r = DecodeRecord(records[i]);
    if (!r.ok()) {
      return Bad(report, i == 0 ? 1 : prev.seq + 1,
                 Cat("record ", i + 1, " of the log does not decode: ", r.status().message()));
    }
    if (i == 0) report = CheckStart(report, *r, by_seq);
    if (report.ok) report = CheckRecord(report, i == 0 ? nullptr : &prev, *r, by_seq);
    if (!report.ok) return report;
    if (i == 0) report.first_seq = r->seq;
    prev = std::move(*r);
    ++report.records;
  }
  report.last_seq = records.empty() ? 0 : prev.seq;
  report.signed_through = by_seq.empty() ? 0 : by_seq.rbegin()->first;
  if (report.signed_through > report.last_seq) {
    return Bad(report, report.last_seq + 1,
               Cat("the log is truncated: a signed digest covers seq ", report.signed_through,
                   " but the last record is ", report.last_seq));
  }
  report.unsigned_records = report.last_seq - std::max(report.signed_through, report.first_seq - 1);
  report.what = Cat(report.records, " records verified (seq ", report.first_seq, " to ",
                    report.last_seq, "), signed through seq ", report.signed_through, "; ",
                    report.unsigned_records, " not yet signed");
  return report;
}

}  // namespace gpucloud::server
