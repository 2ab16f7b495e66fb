// The resource types gpuctl names on its command line, as kubectl names them: plural, singular
// and short forms ("jobs", "job", "vcjob"), "TYPE/NAME" arguments, several types at once
// ("jobs,nodes"), and a "did you mean" for a word that is none of them. Pure functions.
#ifndef GPUCLOUD_CLI_RESOURCES_H_
#define GPUCLOUD_CLI_RESOURCES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::cli {

struct ResourceType {
  std::string_view plural;    // "jobs": the URL's collection
  std::string_view singular;  // "job": as -o name and TYPE/NAME print it
  std::string_view kind;      // "Job"
  bool namespaced = false;
  // The collection takes no query (secrets): no -l, -w, nor -A (no list of every namespace).
  bool plain_collection = false;
  // "job.gpucloud": how apply and delete name the type in their lines, as kubectl does.
  std::string Qualified() const { return std::string(singular) + ".gpucloud"; }
  // "/apis/gpucloud/v1/namespaces/NS/jobs", "/apis/gpucloud/v1/nodes": the REST collection.
  std::string Collection(std::string_view ns) const;
};

// The types with REST collections: jobs, nodes, queues, nodepools, runtimeclasses, secrets,
// namespaces, serviceaccounts.
const std::vector<ResourceType>& ObjectResourceTypes();
// `word` as a type: its plural, singular or kind (any case), or "job.gpucloud"; nullptr if none.
const ResourceType* FindResourceType(std::string_view word);

// The candidate nearest `word` when it is a likely typo (edit distance at most 2, or a prefix
// of at least 3 letters), else "". Ties go to the first candidate.
std::string Suggest(std::string_view word, const std::vector<std::string>& candidates);
// `unknown <what> "word" for "gpuctl get"; did you mean "x"?` (the last clause only with a
// suggestion).
std::string UnknownMessage(std::string_view what, std::string_view word, std::string_view context,
                           const std::vector<std::string>& candidates);

// What a get or delete asks for: objects of one type, all of them (names empty) or those named.
struct ResourceRequest {
  const ResourceType* type = nullptr;
  std::vector<std::string> names;
};
// kubectl's argument forms: "TYPE[,TYPE...] [NAME...]" or "TYPE/NAME [TYPE/NAME...]" (requests
// of one type merged, in order of first mention). InvalidArgument with the message to print:
// an unknown type (with a suggestion from the types and `also_known`), names after several
// types, a mix of the two forms. `context` names the command in it ("gpuctl get").
absl::StatusOr<std::vector<ResourceRequest>> ParseResourceArgs(
    const std::vector<std::string>& args, std::string_view context,
    const std::vector<std::string>& also_known = {});

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_RESOURCES_H_
