// The join bundle: how another server of an HA control plane (several servers on one etcd) gets
// the files every server shares but the store does not hold — the CA and its key, the token book,
// the agents' bootstrap token, the audit log's signing key and the Secrets' key ring — without a
// copy of the first server's data directory. kubeadm's `upload-certs` model: a server seals those
// files under a random 256-bit *join key* (AES-256-GCM, secret_box.h) and puts the sealed bundle
// in the store; a new server given the key (`--join-key-file`) opens it and writes the files into
// its own empty data directory, then makes its own server certificate from the CA. Whoever reads
// etcd without the key learns nothing of the files. The key is kept beside the key ring
// (KEY_DIR/join.key, 0600), so that a backup that leaves the ring out (`--key-dir` elsewhere)
// leaves the key out too. Each file is written whole (WritePrivateFile, durable; ca.crt 0644, the
// others 0600). Functions are thread-safe for different directories.
#ifndef GPUCLOUD_SERVER_JOIN_BUNDLE_H_
#define GPUCLOUD_SERVER_JOIN_BUNDLE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpucloud::server {

// Where the sealed bundle lives in the store (under the server's key prefix), and the key's file
// in a data directory.
inline constexpr char kJoinBundleStoreKey[] = "/meta/joinbundle";
inline constexpr char kJoinKeyFile[] = "join.key";

// A new join key: 32 random bytes as 64 lower-case hex digits. Internal when OpenSSL's random
// generator fails.
absl::StatusOr<std::string> NewJoinKey();

// The key's 32 bytes from its text (64 hex digits; white space around them ignored).
// InvalidArgument naming `source` (a flag and file) when it is not that.
absl::StatusOr<std::string> ParseJoinKey(std::string_view text, std::string_view source);
// The same from a file: NotFound when it does not exist; InvalidArgument naming `source` when it
// cannot be read or holds no key.
absl::StatusOr<std::string> ReadJoinKeyFile(const std::string& path, std::string_view source);
// OK when `blob` opens under `key`; PermissionDenied when it does not (another key, or altered);
// DataLoss when it is not a sealed blob.
absl::Status CheckJoinBundle(std::string_view blob, std::string_view key);

// The bundle of `data_dir`'s shared files and `key_dir`'s key ring, sealed under `key`
// (ParseJoinKey's bytes). NotFound naming a file that is missing; Internal on I/O or OpenSSL
// errors.
absl::StatusOr<std::string> SealJoinBundle(const std::string& data_dir, const std::string& key_dir,
                                           std::string_view key);

// Opens `blob` with `key` and writes its files into `data_dir` (made when missing; its mode is
// left as it is), the key ring and the key itself (join.key) into `key_dir` (made 0700), ca.crt
// last: a join cut short leaves no CA, so it may be tried again. Nothing is written unless the
// whole bundle opens. FailedPrecondition when `data_dir` already holds a CA, or `key_dir` a
// different key ring (a join never replaces credentials); PermissionDenied "the join key does not
// open the bundle" for another key (or a bundle altered); DataLoss for a bundle that is not one;
// Internal on I/O errors.
absl::Status OpenJoinBundle(std::string_view blob, std::string_view key,
                            const std::string& data_dir, const std::string& key_dir);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_JOIN_BUNDLE_H_
