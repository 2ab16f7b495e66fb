#include "sim/csv.h"

#include <csv.h>

#include "core/text.h"

namespace gpucloud::sim {
namespace {

struct Builder {
  std::vector<CsvRow> rows;
  CsvRow current;
  int next_line = 1;
};

void OnField(void* data, size_t len, void* out) {
  auto* b = static_cast<Builder*>(out);
  b->current.fields.emplace_back(static_cast<const char*>(data), len);
}

void OnRow(int, void* out) {
  auto* b = static_cast<Builder*>(out);
  b->current.line = b->next_line++;
  bool blank =
      b->current.fields.empty() || (b->current.fields.size() == 1 && b->current.fields[0].empty());
  if (!blank) b->rows.push_back(std::move(b->current));
  b->current = CsvRow{};
}

}  // namespace

absl::StatusOr<std::vector<CsvRow>> ParseCsv(std::string_view text) {
  csv_parser p;
  if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) {
    return absl::InternalError("cannot initialize the CSV parser");
  }
  Builder b;
  size_t done = csv_parse(&p, text.data(), text.size(), OnField, OnRow, &b);
  int error = done == text.size() ? 0 : csv_error(&p);
  if (error == 0 && csv_fini(&p, OnField, OnRow, &b) != 0) error = csv_error(&p);
  csv_free(&p);
  if (error != 0) {
    return absl::InvalidArgumentError(
        Cat("row ", b.next_line, ": malformed CSV (", csv_strerror(error), ")"));
  }
  return std::move(b.rows);
}

}  // namespace gpucloud::sim
