// A problem found in a manifest, located by file, document, line, column and field path, e.g.
//   job.yaml:14:9: spec.tasks[0].replicas: must be >= 1, got 0
// In a file of several documents the 1-based document index follows the location:
//   jobs.yaml:40:9: [doc 3] spec.tasks[0].replicas: must be >= 1, got 0
// Value type; thread-compatible.
#ifndef GPUCLOUD_MANIFEST_DIAGNOSTIC_H_
#define GPUCLOUD_MANIFEST_DIAGNOSTIC_H_

#include <string>

namespace gpucloud::manifest {

struct Diagnostic {
  std::string file;
  int document = 0;        // 1-based index of the document in its file
  int document_count = 1;  // documents in the file; the index is printed when > 1
  int line = 0;            // 1-based; 0 when unknown
  int column = 0;          // 1-based; 0 when unknown
  std::string path;        // field path, e.g. "spec.tasks[0].replicas"; empty for the document
  std::string message;
  bool warning = false;

  std::string ToString() const;
};

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_DIAGNOSTIC_H_
