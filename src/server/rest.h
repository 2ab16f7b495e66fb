// RestApi: the control plane's REST resources over the store, independent of the transport
// (the HTTPS server hands it parsed requests; tests call it directly). Kubernetes-style paths:
//   /apis/gpucloud/v1/namespaces/{ns}/jobs[/{name}]      Jobs (namespaced)
//   /apis/gpucloud/v1/queues[/{name}]                     Queues (cluster-wide)
//   /apis/gpucloud/v1/nodepools[/{name}]                  NodePools (cluster-wide)
// POST on a collection creates (409 if it exists); PUT on an item applies (creates or updates;
// with metadata.resourceVersion it is a compare-and-swap, 409 when stale; applying what is
// already stored writes nothing); GET reads an item or lists a collection (labelSelector=k=v,
// k!=v, k); GET with watch=true&resourceVersion=R returns the changes after R as
// newline-delimited JSON events (ADDED, MODIFIED, DELETED), or 410 when R was compacted;
// DELETE removes (optionally ?resourceVersion=R). Bodies are YAML or JSON manifests, validated
// like `gpuctl validate`; a bad one gets 422 naming the field and line, and nothing is written.
// Errors are Kubernetes Status objects. A tenant (non-admin) reads and writes only its own
// namespace; cluster-wide objects are written by admins only. A 2xx answer to a write means
// the store committed it to disk.
// Thread-safe (the store is; the uid generator is guarded).
#ifndef GPUCLOUD_SERVER_REST_H_
#define GPUCLOUD_SERVER_REST_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "store/store.h"

namespace gpucloud::server {

struct Identity {
  std::string user;
  std::string namespace_;  // the tenant's namespace; ignored for admins
  bool admin = false;
};

struct Request {
  std::string method;  // "GET", "POST", "PUT", "DELETE"
  std::string path;
  std::map<std::string, std::string> query;
  std::string body;
  Identity who;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

inline constexpr size_t kMaxBodyBytes = 1 << 20;

class RestApi {
 public:
  // Borrows `store` and `clock`. `uid_seed` seeds object uids (tests fix it).
  RestApi(store::Store& store, const Clock& clock, uint64_t uid_seed);
  Response Handle(const Request& request);

 private:
  struct Route;
  Response Create(const Request& r, const Route& route);
  Response Apply(const Request& r, const Route& route);
  Response Read(const Request& r, const Route& route);
  Response List(const Request& r, const Route& route);
  Response Watch(const Request& r, const Route& route);
  Response Delete(const Request& r, const Route& route);
  std::string NewUid();

  store::Store& store_;
  const Clock& clock_;
  absl::Mutex mu_;
  Rng rng_;
};

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_REST_H_
