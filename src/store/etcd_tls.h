// TLS from gpucloud to etcd's client URLs (`gpucloud server --store etcds://...`): the CA that
// signed the members' serving certificates, and the client certificate the members ask for when
// etcd runs with --client-cert-auth. The etcd store (etcd_store.h) and the lease client
// (etcd_lease.h) take these options; each client loads the files once into one TLS context.
//
// Every connection is TLS 1.3 only (etcd 3.4 built with Go >= 1.13 speaks it; etcd offers 1.2
// too, which is refused), the member's certificate is verified against `ca_file`, and its name
// against the member's host as written: a host name is sent as SNI and must be one of the
// certificate's DNS names, an IP address must be one of its IP addresses.
#ifndef GPUCLOUD_STORE_ETCD_TLS_H_
#define GPUCLOUD_STORE_ETCD_TLS_H_

#include <string>

#include "absl/status/status.h"

namespace gpucloud::store {

struct EtcdTlsOptions {
  // false: plain HTTP (etcd://), and the files below must be empty.
  bool enabled = false;
  // PEM certificates of the CAs that may sign a member's serving certificate. Required when
  // enabled.
  std::string ca_file;
  // A PEM client certificate (its chain may follow) and its PEM private key: both or neither.
  std::string cert_file;
  std::string key_file;
};

// Loads the files as a client would, so that bad options are found before anything is dialled.
// InvalidArgument naming the file and what is wrong: a file missing or unreadable, not PEM, a
// key that does not match the certificate, one of cert_file and key_file without the other,
// files given while TLS is off, or no ca_file while it is on.
absl::Status CheckEtcdTls(const EtcdTlsOptions& options);

}  // namespace gpucloud::store

#endif  // GPUCLOUD_STORE_ETCD_TLS_H_
