#include "cli/explain.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ostream>
#include <vector>

#include "cli/gpuctl.h"
#include "cli/resources.h"
#include "core/text.h"
#include "manifest/schema.h"

namespace gpucloud::cli {
namespace {

using manifest::FieldSchema;
using manifest::KindSchema;

constexpr size_t kWidth = 80;

// `text` in lines of at most `width` characters (longer words stand alone), each but the first
// after `indent` spaces; as kubectl's wrap and indent.
std::string Wrap(std::string_view text, size_t width, size_t indent) {
  std::string out, line;
  for (const std::string& word : SplitAny(text, " ")) {
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += Cat(out.empty() ? "" : Cat("\n", std::string(indent, ' ')), line);
      line.clear();
    }
    line += Cat(line.empty() ? "" : " ", word);
  }
  if (!line.empty()) out += Cat(out.empty() ? "" : Cat("\n", std::string(indent, ' ')), line);
  return out;
}

std::string Description(const FieldSchema& f) {
  return f.shorthand_note.empty() ? f.description : Cat(f.description, " (", f.shorthand_note, ")");
}

// Whether kubectl shows the field's values: a string's (a list's are its elements', which it
// does not show).
bool Enumerated(const FieldSchema& f) {
  return !f.enum_values.empty() && f.type != manifest::FieldType::kArray;
}

// The object's keys in name order, as kubectl lists properties.
std::vector<const FieldSchema*> SortedFields(const FieldSchema& f) {
  std::vector<const FieldSchema*> out;
  for (const FieldSchema& c : f.fields) out.push_back(&c);
  std::sort(out.begin(), out.end(),
            [](const FieldSchema* a, const FieldSchema* b) { return a->name < b->name; });
  return out;
}

// "  name\t<type> -required-" (and "enum: a, b, c, d, ...." under it), then, unless `brief`,
// the description; with `recursive`, the fields below it, each level two more spaces in.
void FieldList(const FieldSchema& f, size_t level, bool recursive, std::string& out) {
  const size_t pad = level * 2;
  for (const FieldSchema* c : SortedFields(f)) {
    out += Cat(std::string(pad, ' '), c->name, "\t<", manifest::TypeLabel(*c), ">",
               c->required ? " -required-" : "");
    if (Enumerated(*c)) {
      std::vector<std::string> shown(
          c->enum_values.begin(),
          c->enum_values.begin() + std::min<size_t>(4, c->enum_values.size()));
      out += Cat("\n", std::string(pad, ' '), "enum: ", Join(shown, ", "),
                 c->enum_values.size() > 4 ? ", ...." : "");
    }
    out += "\n";
    if (!recursive) {
      out +=
          Cat(std::string(pad + 2, ' '), Wrap(Description(*c), kWidth - 2 - pad, pad + 2), "\n\n");
    } else if (c->HasFields()) {
      FieldList(*c, level + 1, recursive, out);
    }
  }
}

std::vector<std::string> ResourceNames() {
  std::vector<std::string> names;
  for (const KindSchema& k : manifest::ApiSchema()) {
    names.push_back(k.resource.empty() ? k.singular : k.resource);
  }
  return names;
}

}  // namespace

absl::StatusOr<std::string> Explain(std::string_view target, bool recursive) {
  std::vector<std::string> path = SplitAny(target, ".");
  std::string resource = path.empty() ? "" : path[0];
  size_t skip = 1;
  // "jobs.gpucloud.spec": the group after the resource, as kubectl takes it.
  if (path.size() > 1 && path[1] == manifest::kSchemaGroup) skip = 2;
  const KindSchema* kind = manifest::FindKindSchema(resource);
  if (kind == nullptr) {
    return absl::NotFoundError(
        UnknownMessage("resource type", resource, "gpuctl explain", ResourceNames()));
  }
  std::vector<std::string> fields(path.begin() + std::min(skip, path.size()), path.end());
  absl::StatusOr<const FieldSchema*> field = manifest::FindFieldSchema(*kind, fields);
  if (!field.ok()) return field.status();
  std::string out = Cat("GROUP:      ", manifest::kSchemaGroup, "\nKIND:       ", kind->kind,
                        "\nVERSION:    ", manifest::kSchemaVersion, "\n\n");
  const FieldSchema& f = **field;
  if (!fields.empty()) {
    out += Cat("FIELD: ", f.name, " <", manifest::TypeLabel(f), ">\n");
    // kubectl: the values one a line, then one blank line (two without values).
    if (Enumerated(f)) out += Cat("ENUM:\n    ", Join(f.enum_values, "\n    "));
    out += "\n\n";
  }
  out += Cat("DESCRIPTION:\n    ", Wrap(Description(f), kWidth - 4, 4), "\n    \n");
  if (f.HasFields() && !f.fields.empty()) {
    out += "FIELDS:\n";
    FieldList(f, 1, recursive, out);
  }
  return out + "\n";  // kubectl's template ends so
}

ExplainCommand::ExplainCommand(CLI::App& app)
    : command_(app.add_subcommand(
          "explain",
          "The fields of a kind, offline: explain jobs, explain job.spec.tasks [--recursive]")) {
  command_->add_option("resource", target_, "RESOURCE[.FIELD.PATH], e.g. job.spec.tasks")
      ->required();
  command_->add_flag("--recursive", recursive_, "every field below, by name and type");
}

bool ExplainCommand::parsed() const { return command_->parsed(); }

int ExplainCommand::Run(std::ostream& out, std::ostream& err) const {
  absl::StatusOr<std::string> text = Explain(target_, recursive_);
  if (!text.ok()) {
    err << "gpuctl explain: " << text.status().message() << "\n";
    return kExitInvalid;
  }
  out << *text;
  return kExitOk;
}

}  // namespace gpucloud::cli
