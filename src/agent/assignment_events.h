// One line of the server's assignment watch, read as a JSON object (never by searching its
// text: tenants' fields may hold anything, "resourceVersion" keys included). Pure functions.
// Thread-safe.
#ifndef GPUCLOUD_AGENT_ASSIGNMENT_EVENTS_H_
#define GPUCLOUD_AGENT_ASSIGNMENT_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/wire.h"

namespace gpucloud::agent {

struct AssignmentEvent {
  enum class Type { kIgnored, kBookmark, kPut, kDeleted };
  Type type = Type::kIgnored;
  int64_t revision = 0;  // the event's metadata.resourceVersion; 0 when absent or not a number
  std::string name;      // kDeleted: the assignment's name
  std::optional<api::Assignment> assignment;  // kPut (ADDED or MODIFIED) that reads as one
  std::string error;                          // kPut that does not read as an assignment
};

// Never throws; anything that is not an event is kIgnored.
AssignmentEvent ParseAssignmentEvent(std::string_view line);

// A revision as the server writes it ("123"): digits only, at most 18; otherwise 0.
int64_t ParseRevision(std::string_view text);

}  // namespace gpucloud::agent

#endif  // GPUCLOUD_AGENT_ASSIGNMENT_EVENTS_H_
