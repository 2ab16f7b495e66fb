// Reading manifest files named on the command line: plain files, directories (their *.yaml,
// *.yml and *.json files, sorted by name, not recursive) and "-" for standard input.
// Not thread-safe only in that it reads `in`.
#ifndef GPUCLOUD_CLI_MANIFEST_FILES_H_
#define GPUCLOUD_CLI_MANIFEST_FILES_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace gpucloud::cli {

struct LoadedManifests {
  std::vector<manifest::Manifest> manifests;
  std::vector<manifest::Diagnostic> errors;
  std::vector<manifest::Diagnostic> warnings;
  std::vector<std::string> files;  // every file read, in order
  // Per file: how many objects it held, or -1 when it had errors.
  std::vector<int> objects_per_file;
};

// Reads and parses every named input. RuntimeClasses in any file apply to Jobs in all files.
LoadedManifests LoadManifests(const std::vector<std::string>& inputs, std::istream& in);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_MANIFEST_FILES_H_
