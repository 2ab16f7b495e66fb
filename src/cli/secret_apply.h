// `gpuctl apply`, `delete -f` and `diff -f` of a Secret manifest (manifest.h's SecretObject),
// whose values gpuctl never prints and the server never answers.
//
// The server's Secret shows each key's size, never its value, so apply cannot compare values.
// It labels the Secret with kLastAppliedLabel (apply_prune.h) set to SecretDigest: an HMAC of
// the type and values under a key derived from the caller's bearer token. The label tells
// nothing of the values to whoever reads it without that token (a plain hash of a short
// password could be guessed), and a second apply by the same caller of the same values finds
// the same digest: "unchanged", nothing written. Another caller's apply (another token), a
// caller without a token (a client certificate), or values of other sizes than the server
// holds: "configured", the Secret written again. A write by another client that changes the
// values but keeps the label and the sizes is not seen.
//
// Lines as kubectl prints a v1 Secret's: "secret/NAME created|configured|unchanged|deleted".
// No message holds a value; the server's messages hold none either. Reentrant.
#ifndef GPUCLOUD_CLI_SECRET_APPLY_H_
#define GPUCLOUD_CLI_SECRET_APPLY_H_

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/client.h"
#include "manifest/manifest.h"
#include "nlohmann/json.hpp"

namespace gpucloud::cli {

enum class DryRun { kNone, kClient, kServer };
// "", " (dry run)" or " (server dry run)", as kubectl ends its lines.
std::string_view DryRunSuffix(DryRun mode);

// "h1-" and 56 hex digits of HMAC-SHA256(K, type and values), K = HMAC-SHA256(token, a fixed
// label); "" when `token` is empty. Pure.
std::string SecretDigest(const manifest::SecretObject& secret, std::string_view token);

// The labels apply writes: the file's and kLastAppliedLabel (the digest, or "true" without one).
std::map<std::string, std::string> AppliedSecretLabels(const manifest::SecretObject& secret,
                                                       const std::string& digest);

// Whether `live` (the server's Secret, without values) is what applying `secret` with
// `labels` would write: the same type, the same labels (the digest among them, which must not
// be empty) and the same keys of the same sizes. Pure.
bool SecretIsUnchanged(const nlohmann::json& live, const manifest::SecretObject& secret,
                       const std::map<std::string, std::string>& labels, const std::string& digest);

// What diff shows of a Secret: apiVersion, kind, metadata (name, namespace, labels), type and
// `data` as "*** (N bytes)" per key, from the server's object or from a file's (with `labels`).
nlohmann::json SecretDiffView(const nlohmann::json& live);
nlohmann::json SecretDiffView(const manifest::SecretObject& secret,
                              const std::map<std::string, std::string>& labels);

// The server's object at `path` (any kind): nullopt when there is none (404); Unavailable
// naming the cause when it could not be read.
absl::StatusOr<std::optional<nlohmann::json>> ReadLive(const api::Client& client,
                                                       const std::string& path);

// The Secret's REST path.
std::string SecretPath(const manifest::SecretObject& secret);

// PUT of the Secret unless unchanged (the client's token keys the digest); prints its line, or
// says why on `err` and returns false. DryRun::kServer asks with ?dryRun=All (which the server
// refuses, naming the parameter, until its Secrets take it).
bool ApplySecret(const api::Client& client, const manifest::SecretObject& secret, DryRun mode,
                 std::ostream& out, std::ostream& err);
// DELETE; prints "secret/NAME deleted", or says why and returns false.
bool DeleteSecret(const api::Client& client, const manifest::SecretObject& secret,
                  std::ostream& out, std::ostream& err);
// The unified diff of SecretDiffView, live against the file's ("" when the same).
absl::StatusOr<std::string> DiffSecret(const api::Client& client,
                                       const manifest::SecretObject& secret);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_SECRET_APPLY_H_
