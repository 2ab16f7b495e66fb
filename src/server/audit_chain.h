// The audit log's records, their hash chain and the signed digests over it (pure: no I/O but
// reading a key file). After AWS CloudTrail's log file validation, in a form that fits one store.
//
// 1. A record is one API request, in the shape of a Kubernetes audit.k8s.io/v1 Event (stage
//    ResponseComplete, level Metadata) plus gpucloud's top-level fields: seq (1, 2, ...), the
//    IAM action and resource, the decision and the statement behind it, the token or node name,
//    prevHash and hash. Its JSON form is canonical: keys sorted, no whitespace, every field
//    present; a decoder refuses anything else (unknown or missing fields, wrong types), so one
//    record has exactly one encoding.
// 2. hash = lowercase hex SHA-256 of the canonical JSON without "hash"; that JSON holds seq and
//    prevHash, the hash of record seq-1 (kGenesisHash for seq 1): a chain.
// 3. A digest {seq, headHash, time, keyId} is signed (ECDSA P-256, SHA-256, DER, base64) with the
//    server's key over its canonical JSON without "signature": "record seq had hash headHash".
// 4. VerifyChain walks the records in order and checks each hash, each seq step and prevHash
//    link, each digest's signature and that every digest's headHash is the hash of its record.
//    A log that retention cut starts at seq F > 1: a digest at seq F-1 must hold F's prevHash
//    (the anchor), else the start was cut by someone else. A digest beyond the last record means
//    the log was truncated. Records after the newest digest are valid but not yet signed.
// Everything here is thread-safe (AuditKey is immutable once made).
#ifndef GPUCLOUD_SERVER_AUDIT_CHAIN_H_
#define GPUCLOUD_SERVER_AUDIT_CHAIN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace gpucloud::server {

// prevHash of the first record of a log.
inline constexpr char kGenesisHash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

struct AuditRecord {
  int64_t seq = 0;  // assigned by the AuditLog when the record is committed
  // Kubernetes audit.k8s.io/v1 Event fields.
  std::string audit_id;  // auditID: the request id
  std::string stage = "ResponseComplete";
  std::string request_uri;
  std::string verb;  // get, list, watch, create, update, patch, delete
  std::string username;
  std::vector<std::string> groups;
  std::vector<std::string> source_ips;
  std::string user_agent;
  std::string object_resource;  // objectRef.resource: "jobs"
  std::string object_namespace;
  std::string object_name;
  int response_code = 0;            // responseStatus.code
  int64_t request_received_ms = 0;  // requestReceivedTimestamp (Unix ms)
  int64_t stage_ms = 0;             // stageTimestamp (Unix ms)
  std::map<std::string, std::string> annotations;
  // gpucloud's fields.
  std::string action;      // "jobs:Create"
  std::string resource;    // "gpucloud:job/team-a/train"
  std::string decision;    // "allow" or "deny"
  std::string reason;      // the policy and Sid that decided
  std::string token_name;  // the bearer token's name, if any
  std::string node_name;   // the node, for a node's client certificate
  std::string prev_hash;
  std::string hash;
  bool operator==(const AuditRecord&) const = default;
};

// The canonical JSON of `r` (one line, hash included as it is).
std::string EncodeRecord(const AuditRecord& r);
// InvalidArgument, naming the field, unless `json` is a record in canonical form (what
// EncodeRecord gives byte for byte, whitespace aside).
absl::StatusOr<AuditRecord> DecodeRecord(const std::string& json);
// The SHA-256 hex over r's canonical JSON without "hash" (r.hash is ignored).
std::string RecordHash(const AuditRecord& r);
// Sets r.hash = RecordHash(r) and returns EncodeRecord(r), encoding the record once
// (ChainRecord(PrepareRecord(r), r.seq, r.prev_hash, r): r.prev_hash must be a hash in hex).
std::string HashAndEncodeRecord(AuditRecord& r);
// A record's canonical JSON made before its place in the chain is known (seq, prevHash and hash
// left out), so that whoever chains records in order spends no time encoding them.
// One text and the offsets where the missing values go (hash_at <= prev_hash_at <= seq_at).
struct PreparedRecord {
  std::string text;         // the canonical JSON without "hash" and the values of prevHash, seq
  size_t hash_at = 0;       // where the "hash" member goes
  size_t prev_hash_at = 0;  // where prevHash's value goes
  size_t seq_at = 0;        // where seq's value goes
};
PreparedRecord PrepareRecord(const AuditRecord& r);
// From p = PrepareRecord(r) (r's other fields unchanged since): sets r.seq, r.prev_hash (a hash
// in hex, as every prevHash is) and r.hash = RecordHash(r), and returns EncodeRecord(r).
std::string ChainRecord(const PreparedRecord& p, int64_t seq, const std::string& prev_hash,
                        AuditRecord& r);

// An ECDSA P-256 key: a private one signs digests, a public one (or a certificate's) verifies.
class AuditKey {
 public:
  // A PEM private key, public key or certificate, read from text or a file. InvalidArgument
  // when it is none of those or not an EC P-256 key; NotFound for a file that cannot be read.
  static absl::StatusOr<AuditKey> FromPem(const std::string& pem);
  static absl::StatusOr<AuditKey> FromPemFile(const std::string& path);
  // A new random private key (tests, tools).
  static AuditKey Generate();

  bool has_private_key() const { return has_private_; }
  // SHA-256 hex of the public key's DER (SubjectPublicKeyInfo): names the key in digests.
  const std::string& key_id() const { return key_id_; }
  std::string PublicPem() const;
  // Base64 DER ECDSA signature over SHA-256(data). FailedPrecondition without a private key.
  absl::StatusOr<std::string> Sign(const std::string& data) const;
  bool Verify(const std::string& data, const std::string& signature_base64) const;

 private:
  AuditKey(std::shared_ptr<evp_pkey_st> key, bool has_private);
  std::shared_ptr<evp_pkey_st> key_;
  bool has_private_ = false;
  std::string key_id_;
};

struct AuditDigest {
  int64_t seq = 0;        // the record it covers (and, through the chain, all before it)
  std::string head_hash;  // that record's hash
  int64_t time_ms = 0;    // when it was signed
  std::string key_id;
  std::string signature;
  bool operator==(const AuditDigest&) const = default;
};

std::string EncodeDigest(const AuditDigest& d);
absl::StatusOr<AuditDigest> DecodeDigest(const std::string& json);
// A digest of (seq, head_hash) signed now by `key`. FailedPrecondition without a private key.
absl::StatusOr<AuditDigest> SignDigest(int64_t seq, const std::string& head_hash, int64_t time_ms,
                                       const AuditKey& key);
// Whether d.signature is `key`'s over d's other fields (and d.key_id names `key`).
bool DigestSignatureValid(const AuditDigest& d, const AuditKey& key);

struct VerifyReport {
  bool ok = true;
  int64_t first_bad_seq = 0;  // when !ok: the first record (seq) that is wrong or missing
  std::string what;           // when !ok: what is wrong; when ok: a summary
  int64_t records = 0;        // records checked
  int64_t first_seq = 0;      // the first and last record's seq (0 when none)
  int64_t last_seq = 0;
  int64_t signed_through = 0;    // the newest digest's seq
  int64_t unsigned_records = 0;  // records after it: valid, but no digest vouches for them yet
};

// Checks a whole log: `records` and `digests` are canonical JSON texts (as stored or exported),
// records in the order of the log, digests in any order. Stops at the first problem.
VerifyReport VerifyChain(const std::vector<std::string>& records,
                         const std::vector<std::string>& digests, const AuditKey& key);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUDIT_CHAIN_H_
