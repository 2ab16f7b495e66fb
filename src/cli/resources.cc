#include "cli/resources.h"

#include <algorithm>

#include "api/paths.h"
#include "core/text.h"

namespace gpucloud::cli {

const std::vector<ResourceType>& ObjectResourceTypes() {
  static const std::vector<ResourceType> kTypes = {
      {"jobs", "job", "Job", true},
      {"nodes", "node", "Node", false},
      {"queues", "queue", "Queue", false},
      {"nodepools", "nodepool", "NodePool", false},
      {"runtimeclasses", "runtimeclass", "RuntimeClass", false},
      {"inferenceservices", "inferenceservice", "InferenceService", true},
      {"secrets", "secret", "Secret", true, /*plain_collection=*/true},
      {"namespaces", "namespace", "Namespace", false},
      {"serviceaccounts", "serviceaccount", "ServiceAccount", true, /*plain_collection=*/true},
  };
  return kTypes;
}

std::string ResourceType::Collection(std::string_view ns) const {
  return namespaced ? api::NamespacedPath(ns, plural) : api::ClusterScopedPath(plural);
}

const ResourceType* FindResourceType(std::string_view word) {
  std::string w = ToLower(word);
  if (w.ends_with(".gpucloud")) w.resize(w.size() - std::string_view(".gpucloud").size());
  if (w == "ns") w = "namespaces";  // kubectl's short names
  if (w == "sa") w = "serviceaccounts";
  if (w == "isvc" || w == "services" || w == "service" || w == "svc") w = "inferenceservices";
  for (const ResourceType& t : ObjectResourceTypes()) {
    if (w == t.plural || w == t.singular || w == ToLower(t.kind)) return &t;
  }
  return nullptr;
}

namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string Suggest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(ToLower(word), c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (!best.empty() || word.size() < 3) return best;
  for (const std::string& c : candidates) {
    if (c.starts_with(ToLower(word))) return c;
  }
  return "";
}

std::string UnknownMessage(std::string_view what, std::string_view word, std::string_view context,
                           const std::vector<std::string>& candidates) {
  std::string message = Cat("unknown ", what, " \"", word, "\" for \"", context, "\"");
  if (std::string s = Suggest(word, candidates); !s.empty())
    message += Cat("; did you mean \"", s, "\"?");
  return message;
}

namespace {

absl::StatusOr<const ResourceType*> TypeOf(std::string_view word, std::string_view context,
                                           const std::vector<std::string>& also_known) {
  if (const ResourceType* t = FindResourceType(word)) return t;
  // A type gpuctl knows elsewhere (users, tokens, ...) takes neither TYPE/NAME nor a list of
  // types: say so, rather than suggest the word itself.
  if (std::find(also_known.begin(), also_known.end(), ToLower(word)) != also_known.end()) {
    return absl::InvalidArgumentError(Cat(context, ": ", word, " are named after the type alone (",
                                          context, " ", ToLower(word), " [NAME...])"));
  }
  std::vector<std::string> candidates;
  for (const ResourceType& t : ObjectResourceTypes()) candidates.emplace_back(t.plural);
  candidates.insert(candidates.end(), also_known.begin(), also_known.end());
  return absl::InvalidArgumentError(UnknownMessage("resource type", word, context, candidates));
}

constexpr std::string_view kMixed = "give every argument as TYPE/NAME, or a TYPE and then NAMEs";

// Adds `name` (empty: all of them) to the request for `type`, kept in order of first mention.
void AddRequest(const ResourceType* type, const std::string& name,
                std::vector<ResourceRequest>& requests) {
  auto it = std::find_if(requests.begin(), requests.end(),
                         [type](const ResourceRequest& r) { return r.type == type; });
  if (it == requests.end()) it = requests.insert(requests.end(), ResourceRequest{type, {}});
  if (!name.empty()) it->names.push_back(name);
}

}  // namespace

absl::StatusOr<std::vector<ResourceRequest>> ParseResourceArgs(
    const std::vector<std::string>& args, std::string_view context,
    const std::vector<std::string>& also_known) {
  std::vector<ResourceRequest> requests;
  if (args.empty()) return absl::InvalidArgumentError(Cat(context, ": give a resource type"));
  if (args[0].find('/') != std::string::npos) {
    for (const std::string& a : args) {
      size_t slash = a.find('/');
      if (slash == std::string::npos) {
        return absl::InvalidArgumentError(Cat(context, ": \"", a, "\": ", kMixed));
      }
      if (a.size() == slash + 1) {
        return absl::InvalidArgumentError(Cat(context, ": \"", a, "\" names no object"));
      }
      absl::StatusOr<const ResourceType*> t = TypeOf(a.substr(0, slash), context, also_known);
      if (!t.ok()) return t.status();
      AddRequest(*t, a.substr(slash + 1), requests);
    }
    return requests;
  }
  for (const std::string& word : SplitAny(args[0], ",")) {
    absl::StatusOr<const ResourceType*> t = TypeOf(word, context, also_known);
    if (!t.ok()) return t.status();
    AddRequest(*t, "", requests);
  }
  if (args.size() > 1 && requests.size() > 1) {
    return absl::InvalidArgumentError(
        Cat(context, ": names after several types: name each object as TYPE/NAME"));
  }
  // A NAME holding a '/' is no TYPE/NAME here: it is refused as a name (not a DNS label).
  for (size_t i = 1; i < args.size(); ++i) requests[0].names.push_back(args[i]);
  return requests;
}

}  // namespace gpucloud::cli
