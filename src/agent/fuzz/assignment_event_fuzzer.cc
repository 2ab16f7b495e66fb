// libFuzzer target: any line on the assignment watch is parsed as an event or ignored, never a
// crash, a hang or a sanitizer report; an assignment that reads prints and reads back the same.
// Build with `make fuzz` (clang, GPUCLOUD_FUZZ=ON).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/assignment_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  gpucloud::agent::AssignmentEvent e = gpucloud::agent::ParseAssignmentEvent(line);
  if (e.revision < 0) std::abort();
  if (e.assignment) {
    absl::StatusOr<gpucloud::api::Assignment> again =
        gpucloud::api::AssignmentFromJson(gpucloud::api::AssignmentToJson(*e.assignment));
    if (!again.ok()) std::abort();
  }
  return 0;
}
