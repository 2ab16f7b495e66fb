// CSV reading for trace files, on libcsv (RFC 4180: quoted fields, embedded commas and quotes).
// Stateless; thread-safe.
#ifndef GPUCLOUD_SIM_CSV_H_
#define GPUCLOUD_SIM_CSV_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucloud::sim {

struct CsvRow {
  int line = 0;  // 1-based row number, which is the line number when no field spans lines
  std::vector<std::string> fields;
};

// Every non-blank row of `text`, in order; InvalidArgument (with the row) on malformed quoting.
absl::StatusOr<std::vector<CsvRow>> ParseCsv(std::string_view text);

}  // namespace gpucloud::sim

#endif  // GPUCLOUD_SIM_CSV_H_
