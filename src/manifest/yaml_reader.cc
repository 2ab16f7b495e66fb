#include "manifest/yaml_reader.h"

#include <limits>

#include "core/object_meta.h"
#include "core/text.h"
#include "manifest/manifest.h"

namespace gpucloud::manifest {
namespace {

bool IsDigits(std::string_view s, std::string_view allowed) {
  if (s.empty()) return false;
  for (char c : s) {
    if (allowed.find(c) == std::string_view::npos) return false;
  }
  return true;
}

bool LooksLikeInt(std::string_view s) {
  if (s.starts_with("0x")) return IsDigits(s.substr(2), "0123456789abcdefABCDEF");
  if (s.starts_with("0o")) return IsDigits(s.substr(2), "01234567");
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return IsDigits(s, "0123456789");
}

// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  or .inf / .nan
bool LooksLikeFloat(std::string_view s) {
  for (std::string_view special :
       {".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", ".nan", ".NaN", ".NAN"}) {
    if (s == special) return true;
  }
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t e = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, e);
  if (e != std::string_view::npos) {
    std::string_view exp = s.substr(e + 1);
    if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.remove_prefix(1);
    if (!IsDigits(exp, "0123456789")) return false;
  }
  size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return IsDigits(mantissa, "0123456789");
  std::string_view whole = mantissa.substr(0, dot);
  std::string_view frac = mantissa.substr(dot + 1);
  if (whole.empty()) return IsDigits(frac, "0123456789");
  return IsDigits(whole, "0123456789") && (frac.empty() || IsDigits(frac, "0123456789"));
}

ScalarKind ClassifyPlain(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return ScalarKind::kNull;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return ScalarKind::kBool;
  }
  if (LooksLikeInt(s)) return ScalarKind::kInt;
  if (LooksLikeFloat(s)) return ScalarKind::kFloat;
  return ScalarKind::kString;
}

}  // namespace

std::string Excerpt(const std::string& s) {
  if (s.size() <= 40) return s;
  return s.substr(0, 37) + "...";
}

Diagnostic Sink::Make(const YAML::Mark& at, std::string path, std::string message) const {
  Diagnostic d;
  d.file = file_;
  d.document = document_;
  d.document_count = document_count_;
  if (at.line >= 0 && at.column >= 0 && !at.is_null()) {
    d.line = first_line_ + at.line + 1;
    d.column = at.column + 1;
  }
  d.path = std::move(path);
  d.message = std::move(message);
  return d;
}

void Sink::Error(const YAML::Mark& at, std::string path, std::string message) {
  ++error_count_;
  errors_->push_back(Make(at, std::move(path), std::move(message)));
}

void Sink::Warn(const YAML::Mark& at, std::string path, std::string message) {
  Diagnostic d = Make(at, std::move(path), std::move(message));
  d.warning = true;
  warnings_->push_back(std::move(d));
}

ScalarKind ClassifyScalar(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return ScalarKind::kNull;
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return ScalarKind::kString;
  return ClassifyPlain(node.Scalar());
}

bool PlainScalarIsNotString(std::string_view text) {
  return ClassifyPlain(text) != ScalarKind::kString;
}

std::string DescribeNode(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  switch (ClassifyScalar(node)) {
    case ScalarKind::kNull:
      return "null";
    case ScalarKind::kBool:
      return Cat("boolean ", node.Scalar());
    case ScalarKind::kInt:
      return Cat("integer ", node.Scalar());
    case ScalarKind::kFloat:
      return Cat("number ", node.Scalar());
    case ScalarKind::kString:
      break;
  }
  return Cat("string \"", Excerpt(node.Scalar()), "\"");
}

std::string ChildPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return Cat(parent, ".", key);
}

std::string IndexPath(std::string_view parent, size_t index) {
  return Cat(parent, "[", index, "]");
}

std::optional<std::string> ReadString(Sink& sink, const Field& f) {
  if (!f.value.IsScalar() || ClassifyScalar(f.value) != ScalarKind::kString) {
    std::string hint;
    if (f.value.IsScalar()) hint = Cat(" (quote it: \"", f.value.Scalar(), "\")");
    sink.Error(f.mark, f.path, Cat("must be a string, got ", DescribeNode(f.value), hint));
    return std::nullopt;
  }
  // yaml-cpp 0.7 decodes the escapes "\_" and "\N" to single Latin-1 bytes, not UTF-8.
  if (FirstInvalidUtf8(f.value.Scalar()) != std::string_view::npos) {
    sink.Error(f.mark, f.path,
               "must be valid UTF-8 (yaml-cpp 0.7 decodes the escapes \\_ and \\N to Latin-1; "
               "write the characters themselves)");
    return std::nullopt;
  }
  // JSON's "\u0000" and YAML's "\0" decode to NUL, which exec and C strings would truncate at.
  if (f.value.Scalar().find('\0') != std::string::npos) {
    sink.Error(f.mark, f.path, "contains a NUL character");
    return std::nullopt;
  }
  return f.value.Scalar();
}

std::optional<int64_t> ReadInt(Sink& sink, const Field& f, int64_t min, int64_t max) {
  if (!f.value.IsScalar() || ClassifyScalar(f.value) != ScalarKind::kInt) {
    sink.Error(f.mark, f.path, Cat("must be an integer, got ", DescribeNode(f.value)));
    return std::nullopt;
  }
  const std::string& s = f.value.Scalar();
  int64_t v = 0;
  bool overflow = false;
  if (s.starts_with("0x") || s.starts_with("0o")) {
    int base = s[1] == 'x' ? 16 : 8;
    for (char c : s.substr(2)) {
      int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      if (v > (std::numeric_limits<int64_t>::max() - d) / base) overflow = true;
      if (!overflow) v = v * base + d;
    }
  } else {
    std::string_view digits = s;
    bool negative = digits[0] == '-';
    if (digits[0] == '-' || digits[0] == '+') digits.remove_prefix(1);
    for (char c : digits) {
      if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) overflow = true;
      if (!overflow) v = v * 10 + (c - '0');
    }
    if (negative) v = -v;
  }
  if (overflow) {
    sink.Error(f.mark, f.path, Cat("must be <= ", max, ", got ", Excerpt(s)));
    return std::nullopt;
  }
  if (v < min) {
    sink.Error(f.mark, f.path, Cat("must be >= ", min, ", got ", v));
    return std::nullopt;
  }
  if (v > max) {
    sink.Error(f.mark, f.path, Cat("must be <= ", max, ", got ", v));
    return std::nullopt;
  }
  return v;
}

std::optional<bool> ReadBool(Sink& sink, const Field& f) {
  if (!f.value.IsScalar() || ClassifyScalar(f.value) != ScalarKind::kBool) {
    sink.Error(f.mark, f.path, Cat("must be true or false, got ", DescribeNode(f.value)));
    return std::nullopt;
  }
  return f.value.Scalar()[0] == 't' || f.value.Scalar()[0] == 'T';
}

std::optional<std::string> ReadQuantityText(Sink& sink, const Field& f) {
  ScalarKind kind = ClassifyScalar(f.value);
  if (!f.value.IsScalar() || kind == ScalarKind::kNull || kind == ScalarKind::kBool) {
    sink.Error(f.mark, f.path, Cat("must be a quantity, got ", DescribeNode(f.value)));
    return std::nullopt;
  }
  return f.value.Scalar();
}

std::optional<std::vector<Field>> ReadList(Sink& sink, const Field& f) {
  if (!f.value.IsSequence()) {
    sink.Error(f.mark, f.path, Cat("must be a list, got ", DescribeNode(f.value)));
    return std::nullopt;
  }
  std::vector<Field> items;
  size_t i = 0;
  for (const YAML::Node& item : f.value) {
    YAML::Mark mark = item.IsNull() ? f.mark : item.Mark();
    items.push_back(Field{item, mark, IndexPath(f.path, i++)});
  }
  return items;
}

std::optional<std::vector<std::string>> ReadStringList(Sink& sink, const Field& f) {
  std::optional<std::vector<Field>> items = ReadList(sink, f);
  if (!items) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (const Field& item : *items) {
    std::optional<std::string> s = ReadString(sink, item);
    ok = ok && s.has_value();
    if (s) out.push_back(std::move(*s));
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::map<std::string, std::string>> ReadStringMap(Sink& sink, const Field& f,
                                                                bool labels) {
  MapReader map(sink, f);
  if (!map.valid()) return std::nullopt;
  std::map<std::string, std::string> out;
  bool ok = true;
  const std::vector<std::string> keys = map.Keys();
  if (labels && keys.size() > kMaxLabels) {
    sink.Error(f.mark, f.path,
               Cat("must have at most ", kMaxLabels, " entries, got ", keys.size()));
    ok = false;
  }
  size_t bytes = 0;  // of keys and values, bounded for annotations
  // Every key is known in a free-form map; read them in document order.
  for (const std::string& key : keys) {
    std::optional<Field> v = map.Take(key);
    if (key.find('\0') != std::string::npos) {
      sink.Error(v ? v->mark : map.mark(), f.path, "a key contains a NUL character");
      ok = false;
      continue;
    }
    std::string path = ChildPath(f.path, key);
    if (!v) {  // a null value
      v = Field{YAML::Node(YAML::NodeType::Null), map.mark(), path};
    }
    std::optional<std::string> s = ReadString(sink, *v);
    if (!s) {
      ok = false;
      continue;
    }
    if (labels) {
      if (absl::Status st = ValidateLabelKey(key); !st.ok()) {
        sink.Error(v->mark, path, std::string(st.message()));
        ok = false;
        continue;
      }
      if (absl::Status st = ValidateLabelValue(*s); !st.ok()) {
        sink.Error(v->mark, path, std::string(st.message()));
        ok = false;
        continue;
      }
    }
    bytes += key.size() + s->size();
    out[key] = std::move(*s);
  }
  if (!labels && bytes > kMaxAnnotationBytes) {
    sink.Error(f.mark, f.path,
               Cat("must be at most ", kMaxAnnotationBytes,
                   " bytes of keys and values in all, got ", bytes));
    ok = false;
  }
  map.Finish();
  if (!ok) return std::nullopt;
  return out;
}

bool ReadListOfMaps(Sink& sink, const Field& f,
                    const std::function<bool(MapReader& item, const Field& at)>& read) {
  std::optional<std::vector<Field>> items = ReadList(sink, f);
  if (!items) return false;
  bool ok = true;
  for (const Field& item : *items) {
    MapReader m(sink, item);
    if (!m.valid()) {
      ok = false;
      continue;
    }
    ok = read(m, item) && ok;
    m.Finish();
  }
  return ok;
}

MapReader::MapReader(Sink& sink, const Field& field)
    : sink_(sink), path_(field.path), mark_(field.mark) {
  if (!field.value.IsMap()) {
    sink_.Error(mark_, path_,
                Cat(path_.empty() ? "the document " : "", "must be a mapping, got ",
                    DescribeNode(field.value)));
    return;
  }
  valid_ = true;
  for (auto it = field.value.begin(); it != field.value.end(); ++it) {
    // Copies: yaml-cpp's iterator hands out a temporary pair, so references to it dangle.
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    if (!key.IsScalar()) {
      sink_.Error(key.Mark(), path_, Cat("keys must be strings, got ", DescribeNode(key)));
      valid_ = false;
      continue;
    }
    if (FirstInvalidUtf8(key.Scalar()) != std::string_view::npos) {
      sink_.Error(key.Mark(), path_, "keys must be valid UTF-8");
      valid_ = false;
      continue;
    }
    if (Find(key.Scalar()) != nullptr) {
      sink_.Error(key.Mark(), ChildPath(path_, key.Scalar()), "duplicate field");
      valid_ = false;
      continue;
    }
    entries_.push_back(Entry{key.Scalar(), value, key.Mark()});
  }
}

MapReader::Entry* MapReader::Find(std::string_view key) {
  for (Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::vector<std::string> MapReader::Keys() const {
  std::vector<std::string> keys;
  keys.reserve(entries_.size());
  for (const Entry& e : entries_) keys.push_back(e.key);
  return keys;
}

bool MapReader::Has(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key && !e.value.IsNull()) return true;
  }
  return false;
}

std::optional<Field> MapReader::Take(std::string_view key) {
  Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  e->taken = true;
  if (e->value.IsNull()) return std::nullopt;  // `key:` with no value means absent, as in kubectl
  return Field{e->value, e->value.Mark(), ChildPath(path_, key)};
}

std::optional<Field> MapReader::Require(std::string_view key) {
  Entry* e = Find(key);
  std::optional<Field> f = Take(key);
  if (!f) {
    sink_.Error(e != nullptr ? e->key_mark : mark_, ChildPath(path_, key),
                e != nullptr ? "is required, got null" : "is required");
  }
  return f;
}

void MapReader::IgnoreWithWarning(std::string_view key, std::string_view reason) {
  Entry* e = Find(key);
  if (e == nullptr) return;
  e->taken = true;
  sink_.Warn(e->key_mark, ChildPath(path_, key), Cat("ignored: ", reason));
}

void MapReader::Ignore(std::string_view key) {
  if (Entry* e = Find(key)) e->taken = true;
}

bool MapReader::String(std::string_view key, std::string* out) {
  std::optional<Field> f = Take(key);
  if (!f) return true;
  std::optional<std::string> s = ReadString(sink_, *f);
  if (s) *out = std::move(*s);
  return s.has_value();
}

bool MapReader::RequiredString(std::string_view key, std::string* out) {
  std::optional<Field> f = Require(key);
  if (!f) return false;
  std::optional<std::string> s = ReadString(sink_, *f);
  if (s) *out = std::move(*s);
  return s.has_value();
}

bool MapReader::Int32(std::string_view key, int32_t* out, int64_t min, int64_t max) {
  std::optional<Field> f = Take(key);
  if (!f) return true;
  std::optional<int64_t> v = ReadInt(sink_, *f, min, max);
  if (v) *out = static_cast<int32_t>(*v);
  return v.has_value();
}

bool MapReader::Bool(std::string_view key, bool* out) {
  std::optional<Field> f = Take(key);
  if (!f) return true;
  std::optional<bool> v = ReadBool(sink_, *f);
  if (v) *out = *v;
  return v.has_value();
}

bool MapReader::StringList(std::string_view key, std::vector<std::string>* out) {
  std::optional<Field> f = Take(key);
  if (!f) return true;
  std::optional<std::vector<std::string>> v = ReadStringList(sink_, *f);
  if (v) *out = std::move(*v);
  return v.has_value();
}

bool MapReader::StringMap(std::string_view key, std::map<std::string, std::string>* out,
                          bool labels) {
  std::optional<Field> f = Take(key);
  if (!f) return true;
  std::optional<std::map<std::string, std::string>> v = ReadStringMap(sink_, *f, labels);
  if (v) *out = std::move(*v);
  return v.has_value();
}

void MapReader::Finish() {
  for (const Entry& e : entries_) {
    if (!e.taken) sink_.Error(e.key_mark, ChildPath(path_, e.key), "unknown field");
  }
}

}  // namespace gpucloud::manifest
