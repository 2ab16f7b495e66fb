// The HTTP side of the etcd backend (etcd_store.h): JSON requests to the gRPC gateway of one
// of the cluster's members, and its streamed watch answers. Internal to the store library.
//
// Each request makes its own connection (loopback and LAN connects are cheap next to etcd's
// fsync), closed when the answer is read; with TLS (etcd_tls.h) each is a TLS 1.3 session made
// from the one TlsContext the Http was given (ConnectTo() in etcd_http.cc). Errors: Unavailable
// when etcd cannot be reached or does not answer within the timeout, and when a TLS handshake
// fails (the message says with which member, and OpenSSL's reason: an unknown CA, an expired or
// misnamed certificate, the member refusing ours; in TLS 1.3 that refusal arrives after the
// handshake, with the first answer, and reads the same); the gateway's own errors keep etcd's
// gRPC code (absl's codes are gRPC's) and message, prefixed "etcd: "; Internal for an answer
// that is not JSON. Http is thread-safe (its one mutable field, the member in use, is atomic;
// the TlsContext is only read once made); a WatchStream belongs to one thread.
#ifndef GPUCLOUD_STORE_ETCD_HTTP_H_
#define GPUCLOUD_STORE_ETCD_HTTP_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/etcd_tls.h"

namespace gpucloud::store::etcd {

std::string Base64(const std::string& bytes);
// InvalidArgument when `text` is not base64.
absl::StatusOr<std::string> FromBase64(const std::string& text);
// An int64 as the gateway writes it: a string ("12"), a number, or absent (0).
int64_t JsonInt(const nlohmann::json& object, const char* field);

// One open /v3/watch answer: the messages of the stream, one at a time.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // The next message's "result" object; DeadlineExceeded when none came by `deadline`,
  // Unavailable when the stream ended or broke, the gateway's error when it sent one.
  virtual absl::StatusOr<nlohmann::json> Next(absl::Time deadline) = 0;
};

// One member's client address.
struct Member {
  std::string host;
  std::string port;
};

// "host:port[,host:port...]" as members; InvalidArgument naming the bad entry.
absl::StatusOr<std::vector<Member>> ParseMembers(const std::string& endpoints);

// The client side of TLS to the members (an OpenSSL context with the CA, the client certificate
// and the verification settings), made once and shared by every connection of one Http.
struct TlsContext;
// nullptr when `options` has TLS off. InvalidArgument as CheckEtcdTls says.
absl::StatusOr<std::shared_ptr<TlsContext>> MakeTlsContext(const EtcdTlsOptions& options);

// Requests to one of several members: the one that answered last, else the next that accepts a
// connection. A request that was sent and not answered fails (Unavailable) and is never resent
// to another member, since it may have been applied; the next request starts with the next
// member. A call, connecting included, takes at most the timeout: each member gets a share of
// it to accept a connection (one that does not is where the next call starts after it), then
// the request has what is left. Connections are kept alive between requests (up to kMaxIdle idle
// ones, each reused within kIdleReuse of its last answer, and only while the member has not closed
// it): a request costs a round trip, not a connect and, with TLS, a handshake too. Watches have
// connections of their own. Thread-safe.
class Http {
 public:
  // `tls`: nullptr for plain HTTP; else every connection is TLS with it.
  Http(std::vector<Member> members, absl::Duration timeout,
       std::shared_ptr<TlsContext> tls = nullptr);
  ~Http();
  // POSTs `body` to `path` ("/v3/kv/range") and returns the answer's JSON.
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) const;
  // Opens a watch with `create_request` (the WatchCreateRequest's fields).
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const nlohmann::json& create_request) const;

 private:
  struct Connection;
  // A connection to the current member, or the first of the others that accepts one by
  // `deadline`; it becomes the current member. Unavailable naming every member tried when none
  // does.
  absl::StatusOr<Connection> Connect(absl::Time deadline) const;
  // An idle connection to the current member that is still open, else a new one (Connect).
  absl::StatusOr<Connection> Take(absl::Time deadline) const;
  // Keeps `c`, answered just now, for the next request.
  void GiveBack(Connection c) const;
  // A request to `member` went unanswered: unless another request moved on already, the next
  // one starts with the member after it.
  void Failed(size_t member) const;

  const std::vector<Member> members_;
  const absl::Duration timeout_;
  const std::shared_ptr<TlsContext> tls_;
  mutable std::atomic<size_t> current_{0};
  mutable std::mutex idle_mu_;
  // Newest last. Pointers: a Connection must not be move-assigned (its io_context would go
  // before the streams that use it: erasing from a vector of them corrupted the heap).
  mutable std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace gpucloud::store::etcd

#endif  // GPUCLOUD_STORE_ETCD_HTTP_H_
