// AuditedStore: the store the REST API writes through, so that every mutation made while a
// request is served is committed together with that request's audit record, without the API's
// handlers knowing; and the pieces the HTTPS front uses to say which request a thread serves.
// 1. The front builds the request's record (AuditRecordFor: who, from where, the verb, URI and
//    object, a new request id; never the body) and opens an AuditScope around RestApi::Handle on
//    the thread that calls it (a thread-local "current request").
// 2. AuditedStore::Txn, inside a scope, commits its ops through AuditLog::CommitWith with a copy
//    of the scope's record: stage "Committed" (gpucloud's own stage: the response is not known
//    yet), responseStatus.code 0, and from a request's second Txn on the annotation
//    "gpucloud.io/txn" = "2", "3", ...; a create's objectRef.name (not in its path) is read from
//    the key the Txn writes under the object's prefix. The record's key has the transaction's
//    revision as its mod_revision. A failed Txn writes neither its ops nor the record. Such a
//    request needs no other record.
// 3. After the answer, FinishAuditRequest records (AuditLog::Record, buffered) the requests
//    that committed nothing — reads, denials, 4xx and 5xx — with stage "ResponseComplete", the
//    response code and what authorization decided; except a node's successful heartbeat
//    (Kubernetes' level None: once a second from every agent, and it writes nothing).
// 4. Outside a scope (the controller, the compactor) Txn goes straight to the store,
//    unaudited.
// 5. Keys under the audit prefix are not the API's: Get of one is NotFound, a List, Count or
//    Changes of a prefix that covers them leaves them out, and a Txn on one is InvalidArgument.
// Thread-safe (the base store and the log are; the current request is per thread).
#ifndef GPUCLOUD_SERVER_AUDITED_STORE_H_
#define GPUCLOUD_SERVER_AUDITED_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/audit_chain.h"
#include "server/audit_log.h"
#include "server/rest.h"
#include "store/store.h"

namespace gpucloud::server {

inline constexpr char kAuditCommittedStage[] = "Committed";

// The request a thread is serving, as the audit log sees it.
struct AuditRequest {
  AuditRecord record;  // from AuditRecordFor; seq, hashes and stage filled when committed
  int committed = 0;   // Txns committed with a copy of `record`
};

// Makes `request` the current request of this thread until destroyed (scopes do not nest: the
// previous one comes back). `request` must outlive the scope.
class AuditScope {
 public:
  explicit AuditScope(AuditRequest* request);
  ~AuditScope();
  AuditScope(const AuditScope&) = delete;
  AuditScope& operator=(const AuditScope&) = delete;
  // This thread's current request, or nullptr outside a scope.
  static AuditRequest* Current();

 private:
  AuditRequest* previous_;
};

// What authorization decided for the current request (no-op outside a scope). The API calls it
// once it has decided and before it writes, so that a mutation's record carries the decision;
// Response::authorization, when set, fills the fields still empty at FinishAuditRequest.
void NoteAuditAuthorization(const Response::Authorization& decided);

// Adds an annotation to the record of the request being served on this thread (none outside
// one): gpucloud.io/estimated-hourly-cost and gpucloud.io/gpu-type of a job's create, for the
// anomaly rules.
void NoteAuditAnnotation(const std::string& key, std::string value);

// A new random request id (a UUID version 4), also answered to the client as `Audit-Id`.
std::string NewAuditId();

// The record of `r` as received at `received_ms` (Unix ms): user, groups, token or node name,
// `source_ip`, `user_agent`, verb (get, list, watch, create, update, patch, delete), URI (path
// and query), objectRef parsed from an /apis/gpucloud/v1/... path (a sub-resource such as
// cancel goes to the annotation "gpucloud.io/subresource"), and `audit_id`. Never the body.
AuditRecord AuditRecordFor(const Request& r, const std::string& source_ip,
                           const std::string& user_agent, const std::string& audit_id,
                           int64_t received_ms);

// After the answer `resp` to `request`: when it committed nothing, records it (stage
// ResponseComplete, resp.status, resp.authorization where the record has none) through
// `log.Record`, stamped now. Returns Record's error (the answer is sent anyway).
absl::Status FinishAuditRequest(AuditLog& log, AuditRequest& request, const Response& resp);

class AuditedStore : public store::Store {
 public:
  // Borrows both; `log` must be over `base` (its records go in base's transactions).
  AuditedStore(store::Store& base, AuditLog& log, std::string audit_prefix = "/audit/");

  absl::StatusOr<store::KeyValue> Get(const std::string& key) override;
  absl::StatusOr<store::ListResult> List(const std::string& prefix) override;
  // The base's page, unless the prefix covers the audit records (then List's, sliced).
  absl::StatusOr<store::ListResult> ListPage(const std::string& prefix,
                                             const std::string& after_key, int64_t limit,
                                             int64_t* remaining) override;
  absl::StatusOr<int64_t> Count(const std::string& prefix) override;
  absl::StatusOr<int64_t> Txn(const std::vector<store::Op>& ops) override;
  absl::StatusOr<std::vector<store::Event>> Changes(const std::string& prefix, int64_t after,
                                                    int limit) override;
  absl::Status Compact(int64_t revision) override { return base_.Compact(revision); }
  int64_t CompactedRevision() override { return base_.CompactedRevision(); }
  int64_t Revision() override { return base_.Revision(); }
  bool WaitForChange(int64_t after, absl::Duration timeout) override {
    return base_.WaitForChange(after, timeout);
  }

 private:
  bool Hidden(const std::string& key) const { return key.starts_with(prefix_); }
  // Whether keys under `prefix` may include audit keys.
  bool Covers(const std::string& prefix) const { return prefix_.starts_with(prefix); }

  store::Store& base_;
  AuditLog& log_;
  const std::string prefix_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_AUDITED_STORE_H_
