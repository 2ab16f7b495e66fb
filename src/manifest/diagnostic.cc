#include "manifest/diagnostic.h"

#include "core/text.h"

namespace gpucloud::manifest {

std::string Diagnostic::ToString() const {
  std::string out = file;
  if (line > 0) out += Cat(":", line, ":", column);
  out += ": ";
  if (document_count > 1) out += Cat("[doc ", document, "] ");
  if (warning) out += "warning: ";
  if (!path.empty()) out += Cat(path, ": ");
  out += message;
  return out;
}

}  // namespace gpucloud::manifest
