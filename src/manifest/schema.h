// The schema of gpucloud's API objects: every kind the gpucloud/v1 API serves as a resource
// (Job, Queue, NodePool, RuntimeClass, Namespace, Node, Secret, ServiceAccount, User, Group,
// Policy, Token) and SchedulerConfiguration (a manifest kind the API serves as no resource),
// each field with its type, a one-line description, its required flag and, where the decoder
// takes one of a few values, those values. It is data, written once here from what the
// decoders accept (decode_*.cc) and the encoders print (encode.cc, the server's status):
// `gpuctl explain` prints it offline and the server answers it as OpenAPI (/openapi/v2,
// /openapi/v3). schema_test walks every gpucloud/v1 example manifest and every object the
// encoder prints, so a key the decoder takes but the schema lacks fails a test.
//
// Built once on first use; immutable after; thread-safe. No I/O.
#ifndef GPUCLOUD_MANIFEST_SCHEMA_H_
#define GPUCLOUD_MANIFEST_SCHEMA_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::manifest {

enum class FieldType {
  kString,
  kInteger,
  kNumber,
  kBoolean,
  kQuantity,  // a number or a string with a unit: 4, "500m", 0.25, "10Gi", "2.50"
  kDuration,  // integer seconds or "1h30m" (<n>d, <n>h, <n>m, <n>s in sequence)
  kObject,    // `fields` are its keys
  kArray,     // of `item_type`; objects' keys in `fields`
  kMap,       // string keys to `item_type` values (labels, nodeSelector)
};

struct FieldSchema {
  std::string name;
  FieldType type = FieldType::kString;
  std::string description;  // one line
  bool required = false;
  bool read_only = false;  // the server's (status, uid, ...): accepted, never decided by clients
  // kArray, kMap: the elements' type (kArray: rows, arrays of strings).
  FieldType item_type = FieldType::kString;
  std::vector<std::string> enum_values;  // the one-of values (of the elements, for a kArray)
  std::vector<FieldSchema> fields;       // kObject, or elements that are kObject
  // kObject (or object elements): keys not in `fields` are accepted too (free-form maps such as
  // a policy's Condition).
  bool open = false;
  // Another shape is accepted too: an object also written as a whole number (`gpu: 4`), a list
  // also written as one element (`Action: jobs:Get`).
  bool shorthand = false;
  std::string shorthand_note;  // the other shape, for people ("or a whole number of GPUs")

  // The key `name` of this object (or of its object elements); nullptr when it has none.
  const FieldSchema* Find(std::string_view key) const;
  // Whether this field's value (its elements', for arrays and maps) holds keys.
  bool HasFields() const;
};

struct KindSchema {
  std::string kind;      // "Job"
  std::string resource;  // "jobs"; "" for a kind the API serves as no resource
  std::string singular;  // "job"
  std::vector<std::string> short_names;
  bool namespaced = false;
  std::string description;
  FieldSchema object;  // kObject: apiVersion, kind, metadata, spec (or the kind's own), status
};

inline constexpr std::string_view kSchemaGroup = "gpucloud";
inline constexpr std::string_view kSchemaVersion = "v1";

// Every kind, Job first, then in the discovery list's order.
const std::vector<KindSchema>& ApiSchema();

// The kind a user names by its kind, resource, singular or short name, in any case ("jobs",
// "Job", "np", "jobs.gpucloud"); nullptr when none.
const KindSchema* FindKindSchema(std::string_view name);

// The field at `path` below the kind's object, stepping into the elements of arrays and maps
// ({"spec", "tasks", "resources"}); the object itself for an empty path. NotFound naming the
// first unknown field and where it was looked for ("field \"colour\" does not exist in
// spec.tasks").
absl::StatusOr<const FieldSchema*> FindFieldSchema(const KindSchema& kind,
                                                   std::span<const std::string> path);

// "string", "integer", "number", "boolean", "Quantity", "Duration", "Object", "[]Object",
// "[]string", "map[string]string": as kubectl explain prints a field's type.
std::string TypeLabel(const FieldSchema& field);

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_SCHEMA_H_
