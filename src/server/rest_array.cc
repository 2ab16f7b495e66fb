// Job arrays in the REST API (server/job_arrays.h): a POST (or the PUT of an absent job) whose
// spec.array asks for indices creates every element in one store transaction, all or nothing;
// a cancel or delete of the array's name, when no job has that name, stops or deletes every
// element in one transaction.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job_array.h"
#include "core/text.h"
#include "manifest/manifest.h"
#include "server/events.h"
#include "server/job_arrays.h"
#include "server/job_status.h"
#include "server/log_store.h"
#include "server/rest.h"
#include "server/rest_util.h"

namespace gpucloud::server {
namespace {

// The array's answer: a Status with what was done to how many elements.
Response ArrayStatus(int code, std::string_view reason, std::string message,
                     const std::string& array, int64_t elements, int64_t revision) {
  Response out = Status(code, reason, std::move(message));
  Json j = Json::parse(out.body);
  j["details"] = Json{{"name", array}, {"kind", "jobs"}, {"elements", elements}};
  if (revision > 0) j["details"]["resourceVersion"] = std::to_string(revision);
  out.body = j.dump() + "\n";
  return out;
}

// Whether the store holds exactly `elements` under `prefix` (their array's jobs, by label), each
// as asked: the same metadata and spec, less what the server set (uid, revision, creation).
bool AllAsAsked(store::Store& store, const std::string& prefix, const std::string& array,
                const std::vector<Job>& elements) {
  absl::StatusOr<store::ListResult> list = store.List(Cat(prefix, array, "-"));
  if (!list.ok()) return false;
  std::map<std::string, const Job*> want;
  for (const Job& e : elements) want[Cat(prefix, e.metadata.name)] = &e;
  size_t found = 0;
  for (const store::KeyValue& kv : list->items) {
    manifest::ParseResult p = manifest::ParseManifests(kv.value, kv.key);
    const Job* job =
        p.ok() && p.manifests.size() == 1 ? std::get_if<Job>(&p.manifests[0].object) : nullptr;
    if (job == nullptr || !job->metadata.labels.contains(std::string(kArrayLabel)) ||
        job->metadata.labels.at(std::string(kArrayLabel)) != array) {
      continue;  // not of this array
    }
    auto it = want.find(kv.key);
    if (it == want.end()) return false;
    Job stored = *job;
    stored.metadata.uid.clear();
    stored.metadata.resource_version = 0;
    stored.metadata.creation_unix_seconds = it->second->metadata.creation_unix_seconds;
    if (!(stored == *it->second)) return false;
    ++found;
  }
  return found == elements.size();
}

}  // namespace

Response RestApi::CreateArray(const Request& r, const Route& route, const Job& request,
                              const std::string& warning, bool apply) {
  Route self{route.resource, route.namespace_, request.metadata.name};
  // A job of the array's own name would make `cancel NAME` ambiguous.
  absl::StatusOr<store::KeyValue> same = store_.Get(self.Key());
  if (same.ok()) {
    return FromStatus(absl::AlreadyExistsError(
        Cat(self.Key(), " already exists: an array may not have the name of a job")));
  }
  if (!absl::IsNotFound(same.status())) return FromStatus(same.status());
  std::vector<Job> elements = ArrayElements(request);
  const int64_t n = static_cast<int64_t>(elements.size());
  if (apply && AllAsAsked(store_, route.Prefix(), self.name, elements)) {
    return ArrayStatus(
        200, "Unchanged",
        Cat("job array ", route.namespace_, "/", self.name, ": its ", n, " jobs are as asked"),
        self.name, n, 0);
  }
  if (max_jobs_per_namespace_ > 0) {
    absl::StatusOr<int64_t> held = store_.Count(route.Prefix());
    if (!held.ok()) return FromStatus(held.status());
    if (*held + n > max_jobs_per_namespace_) {
      return Status(403, "QuotaExceeded",
                    Cat("namespace ", route.namespace_, " holds ", *held, " jobs, its quota is ",
                        max_jobs_per_namespace_, ": the array's ", n,
                        " jobs do not fit; delete finished jobs first"));
    }
  }
  const int64_t now = clock_.NowMillis();
  const int32_t parallelism = request.spec.array->parallelism;
  std::vector<store::Op> ops;
  ops.reserve(elements.size());
  for (size_t i = 0; i < elements.size(); ++i) {
    Job& e = elements[i];
    e.metadata.uid = NewUid();
    e.metadata.creation_unix_seconds = now / 1000;
    e.metadata.resource_version = 0;
    Json doc = Json::parse(manifest::ToJson(manifest::Object(e)));
    doc["status"] = Json{{"phase", api::PhaseName(api::JobPhase::kPending)}, {"submittedMs", now}};
    // Beyond the parallelism, an element waits from the start (the gate admits lowest first).
    if (parallelism > 0 && static_cast<int64_t>(i) >= parallelism) {
      doc["status"]["reason"] = kArrayParallelismReason;
      doc["status"]["message"] = ArrayParallelismMessage(*e.spec.array);
    }
    ops.push_back({store::Op::Kind::kPut, Cat(route.Prefix(), e.metadata.name), doc.dump(2), 0});
  }
  const std::string what =
      Cat("job array ", route.namespace_, "/", self.name, ": ", n, n == 1 ? " job " : " jobs ",
          elements.front().metadata.name, n > 1 ? Cat(" .. ", elements.back().metadata.name) : "");
  if (DryRun(r)) {
    for (const store::Op& op : ops) {
      if (store_.Get(op.key).ok()) {
        return FromStatus(absl::AlreadyExistsError(Cat(op.key, " already exists")));
      }
    }
    return ArrayStatus(201, "Created", what + " would be created (dry run)", self.name, n, 0);
  }
  absl::StatusOr<int64_t> rev = store_.Txn(ops);
  if (!rev.ok()) return FromStatus(rev.status());  // a name taken: 409, and nothing written
  if (kick_) kick_();
  Response out = ArrayStatus(201, "Created", what + " created", self.name, n, *rev);
  if (!warning.empty()) out.headers["Warning"] = warning;
  return out;
}

std::optional<Response> RestApi::CancelArray(const Request& r, const Route& route,
                                             bool and_delete) {
  for (int tries = 0; tries < 5; ++tries) {
    absl::StatusOr<store::ListResult> list = store_.List(Cat(route.Key(), "-"));
    if (!list.ok()) return FromStatus(list.status());
    std::vector<store::Op> ops;
    std::vector<std::string> deleted;
    int64_t elements = 0, ended = 0, stopping = 0;
    for (const store::KeyValue& kv : list->items) {
      Json doc = Json::parse(kv.value, nullptr, false);
      const Json* labels =
          doc.is_object() && doc["metadata"].is_object() ? &doc["metadata"]["labels"] : nullptr;
      if (labels == nullptr || !labels->is_object() ||
          labels->value(std::string(kArrayLabel), "") != route.name) {
        continue;  // a job named like an element, not of this array
      }
      ++elements;
      absl::StatusOr<JobStatus> decoded = JobStatusFromJson(doc);
      if (!decoded.ok()) {
        return FromStatus(absl::InternalError(Cat(kv.key, ": ", decoded.status().message())));
      }
      const JobStatus& s = *decoded;
      const bool holds_nothing = HoldsNothing(doc);
      if (and_delete && holds_nothing) {
        ops.push_back({store::Op::Kind::kDelete, kv.key, "", kv.mod_revision});
        const std::string name = doc["metadata"].value("name", "");
        for (const std::string& k : EventKeysOf(store_, route.namespace_, name)) {
          ops.push_back({store::Op::Kind::kDelete, k, "", std::nullopt});
        }
        deleted.push_back(name);
        continue;
      }
      if (s.Terminal()) {
        ++ended;
        continue;
      }
      ++stopping;
      if (s.cancel_requested && (!and_delete || s.delete_requested)) continue;
      doc["status"]["cancelRequested"] = true;
      if (and_delete) doc["status"]["deleteRequested"] = true;
      ops.push_back({store::Op::Kind::kPut, kv.key, doc.dump(2), kv.mod_revision});
    }
    if (elements == 0) return std::nullopt;
    const std::string array = Cat("job array ", route.namespace_, "/", route.name);
    if (!and_delete && stopping == 0) {
      return Status(409, "Conflict",
                    Cat(array, ": every one of its ", elements, " jobs has already ended"));
    }
    std::string what =
        and_delete ? Cat(array, ": ", deleted.size(), " of ", elements, " jobs deleted",
                         stopping > 0 ? Cat(", ", stopping, " being stopped, then deleted") : "")
                   : Cat(array, ": ", stopping, " of ", elements, " jobs being stopped",
                         ended > 0 ? Cat(" (", ended, " had ended)") : "");
    const int code = stopping > 0 ? 202 : 200;
    const char* reason = and_delete ? (stopping > 0 ? "Deleting" : "Deleted") : "Cancelling";
    if (DryRun(r)) return ArrayStatus(code, reason, what + " (dry run)", route.name, elements, 0);
    int64_t revision = 0;
    if (!ops.empty()) {
      absl::StatusOr<int64_t> rev = store_.Txn(ops);
      if (absl::IsAborted(rev.status()) || absl::IsNotFound(rev.status())) continue;
      if (!rev.ok()) return FromStatus(rev.status());
      revision = *rev;
    }
    if (logs_ != nullptr) {
      for (const std::string& name : deleted) logs_->RemoveJob(route.namespace_, name);
    }
    if (kick_) kick_();
    return ArrayStatus(code, reason, what, route.name, elements, revision);
  }
  return Status(409, "Conflict", Cat(route.Key(), "-*: the array's jobs keep changing; retry"));
}

}  // namespace gpucloud::server
