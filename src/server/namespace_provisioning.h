// What a write into a namespace that has no Namespace object gets (rest_namespaces.cc).
#ifndef GPUCLOUD_SERVER_NAMESPACE_PROVISIONING_H_
#define GPUCLOUD_SERVER_NAMESPACE_PROVISIONING_H_

namespace gpucloud::server {

// kExplicit: 404 NotFound, as Kubernetes answers (an admin creates namespaces; a user's home
// namespace is made with the user); `gpucloud server`'s default.
// kAuto: the write goes ahead and, once it succeeded (not for a dry run, nor a refused write), the
// namespace's object is made, owned by the caller (Kubernetes' NamespaceAutoProvision admission
// plugin; what `gpucloud up` uses). Not one transaction with the write: a crash between the two
// leaves a namespace without its object until the next start's migration makes it.
// kUnchecked: namespaces are not looked at (RestApi's default, for embeddings and tests of other
// things; ControlPlane always sets one of the two above).
enum class NamespaceProvisioning { kExplicit, kAuto, kUnchecked };

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_NAMESPACE_PROVISIONING_H_
