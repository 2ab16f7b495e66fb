// Strict, located reading of a parsed YAML tree (yaml-cpp) into typed fields, in the manner of
// `kubectl --validate=strict`: every field read is checked for its type, every key that no
// reader asked for is an "unknown field" error, duplicate keys are errors, and every error
// carries the field path and the line and column of the offending key or value.
// Scalars follow the YAML 1.2 core schema: a plain 4 is an integer, a quoted "4" is a string.
// Internal to the manifest library. Not thread-safe; one Sink per document.
#ifndef GPUCLOUD_MANIFEST_YAML_READER_H_
#define GPUCLOUD_MANIFEST_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "manifest/diagnostic.h"

namespace gpucloud::manifest {

// Collects the diagnostics of one document.
class Sink {
 public:
  // `first_line` is the 0-based line of the file where the document's text starts; marks from
  // yaml-cpp, which sees one document at a time, are relative to it.
  Sink(std::string file, int document, int document_count, int first_line,
       std::vector<Diagnostic>* errors, std::vector<Diagnostic>* warnings)
      : file_(std::move(file)),
        document_(document),
        document_count_(document_count),
        first_line_(first_line),
        errors_(errors),
        warnings_(warnings) {}

  void Error(const YAML::Mark& at, std::string path, std::string message);
  void Warn(const YAML::Mark& at, std::string path, std::string message);
  int error_count() const { return error_count_; }
  const std::string& file() const { return file_; }

 private:
  Diagnostic Make(const YAML::Mark& at, std::string path, std::string message) const;

  std::string file_;
  int document_;
  int document_count_;
  int first_line_;
  std::vector<Diagnostic>* errors_;
  std::vector<Diagnostic>* warnings_;
  int error_count_ = 0;
};

enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };

// The YAML 1.2 core-schema type of a scalar (or null) node.
ScalarKind ClassifyScalar(const YAML::Node& node);
// "null", "a list", "a mapping", "integer 4", "number 1.5", "boolean true", "string \"x\"".
std::string DescribeNode(const YAML::Node& node);
// A scalar shortened for messages: at most 40 characters, "..." marking a cut.
std::string Excerpt(const std::string& s);
// Would `text`, written as a plain scalar, read back as something other than a string?
bool PlainScalarIsNotString(std::string_view text);

// A value with where it came from.
struct Field {
  Field(YAML::Node v, YAML::Mark m, std::string p)
      : value(std::move(v)), mark(m), path(std::move(p)) {}
  Field(const Field&) = default;
  // yaml-cpp's Node::operator= writes through to the node it refers to; a Field must rebind
  // instead, or assigning one Field to another would change the parsed document.
  Field& operator=(const Field& other) {
    value.reset(other.value);
    mark = other.mark;
    path = other.path;
    return *this;
  }

  YAML::Node value;
  YAML::Mark mark;  // of the value, or of its key when the value is null (yaml-cpp gives no mark)
  std::string path;
};

std::string ChildPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);

// Typed scalar readers. Each reports an error naming `f.path` and returns nullopt when the value
// has the wrong type or is out of range.
std::optional<std::string> ReadString(Sink& sink, const Field& f);
std::optional<int64_t> ReadInt(Sink& sink, const Field& f, int64_t min, int64_t max);
std::optional<bool> ReadBool(Sink& sink, const Field& f);
// A quantity may be written as a number or a string ("4", 4, "500m", "16Gi"); returns its text.
std::optional<std::string> ReadQuantityText(Sink& sink, const Field& f);
std::optional<std::vector<std::string>> ReadStringList(Sink& sink, const Field& f);
// A mapping of label-like strings; keys and values are validated as Kubernetes labels when
// `labels` is true.
std::optional<std::map<std::string, std::string>> ReadStringMap(Sink& sink, const Field& f,
                                                                bool labels);
// The items of a list, each as a Field with its index path. Null when `f` is not a list.
std::optional<std::vector<Field>> ReadList(Sink& sink, const Field& f);

class MapReader;

// Reads a list of mappings: calls `read` on a MapReader for each item, then reports the item's
// unknown fields. False when `f` is not a list, an item is not a mapping, or `read` returned
// false for any item (every item is read either way).
bool ReadListOfMaps(Sink& sink, const Field& f,
                    const std::function<bool(MapReader& item, const Field& at)>& read);

// Reads one mapping. Take() each known key; Finish() reports the keys nobody took.
class MapReader {
 public:
  MapReader(Sink& sink, const Field& field);
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  // False when the node was not a mapping (an error has been reported).
  bool valid() const { return valid_; }
  const std::string& path() const { return path_; }
  const YAML::Mark& mark() const { return mark_; }
  Sink& sink() { return sink_; }

  bool Has(std::string_view key) const;
  // Every key, in document order (for free-form maps such as labels).
  std::vector<std::string> Keys() const;
  // The value of `key`, marking it known; nullopt when absent.
  std::optional<Field> Take(std::string_view key);
  // Like Take, but an absent key is an error "is required".
  std::optional<Field> Require(std::string_view key);
  // Marks `key` known and, when present, warns that gpucloud ignores it for `reason`.
  void IgnoreWithWarning(std::string_view key, std::string_view reason);
  // Marks `key` known and ignores it silently.
  void Ignore(std::string_view key);

  // Typed shortcuts: store into *out when present and valid. Return false only on error.
  bool String(std::string_view key, std::string* out);
  bool RequiredString(std::string_view key, std::string* out);
  bool Int32(std::string_view key, int32_t* out, int64_t min, int64_t max);
  bool Bool(std::string_view key, bool* out);
  bool StringList(std::string_view key, std::vector<std::string>* out);
  bool StringMap(std::string_view key, std::map<std::string, std::string>* out, bool labels);

  // Reports every key not taken as an unknown field. Call once, after all Take()s.
  void Finish();

 private:
  struct Entry {
    std::string key;
    YAML::Node value;
    YAML::Mark key_mark;
    bool taken = false;
  };
  Entry* Find(std::string_view key);

  Sink& sink_;
  std::string path_;
  YAML::Mark mark_;
  bool valid_ = false;
  std::vector<Entry> entries_;
};

}  // namespace gpucloud::manifest

#endif  // GPUCLOUD_MANIFEST_YAML_READER_H_
