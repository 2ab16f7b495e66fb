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
  // The Secrets, values in the clear (never printed); one two files hold is kept once.
  std::vector<manifest::SecretManifest> secrets;
  std::vector<manifest::Diagnostic> errors;
  std::vector<manifest::Diagnostic> warnings;
  struct File {
    std::string name;
    bool valid = false;
    std::vector<size_t> objects;  // indices into `manifests`; an object two files hold is kept once
  };
  std::vector<File> files;  // every file read, in order
};

// Reads and parses every named input. RuntimeClasses in any file apply to Jobs in all files. The
// same object (or Secret) in two files is kept once; two different ones of one name are an error.
LoadedManifests LoadManifests(const std::vector<std::string>& inputs, std::istream& in);
// The warnings, then the errors, one located line each.
void PrintDiagnostics(const LoadedManifests& loaded, std::ostream& err);

}  // namespace gpucloud::cli

#endif  // GPUCLOUD_CLI_MANIFEST_FILES_H_
