// libFuzzer target: any byte string given to the manifest parser must produce either objects
// or diagnostics, never a crash, a hang or a sanitizer report; valid objects must print and
// parse back to themselves. Build with `make fuzz` (clang, GPUCLOUD_FUZZ=ON).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "manifest/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gpucloud::manifest::ParseResult r = gpucloud::manifest::ParseManifests(text, "fuzz.yaml");
  for (const gpucloud::manifest::Diagnostic& d : r.errors) (void)d.ToString();
  for (const gpucloud::manifest::Manifest& m : r.manifests) {
    (void)gpucloud::manifest::Summarize(m.object);
    for (bool json : {false, true}) {
      std::string printed =
          json ? gpucloud::manifest::ToJson(m.object) : gpucloud::manifest::ToYaml(m.object);
      gpucloud::manifest::ParseResult again =
          gpucloud::manifest::ParseManifests(printed, "printed.yaml");
      if (!again.ok() || again.manifests.size() != 1 || !(again.manifests[0].object == m.object)) {
        std::abort();  // round-trip broken
      }
    }
  }
  return 0;
}
