#include "cli/manifest_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include "core/text.h"

namespace gpucloud::cli {
namespace {

namespace fs = std::filesystem;

bool IsManifestFile(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

// Expands directories; returns the files to read, or an error message.
std::vector<std::string> ExpandInput(const std::string& input,
                                     std::vector<manifest::Diagnostic>* errors) {
  if (input == "-") return {input};
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    std::vector<std::string> files;
    for (const fs::directory_entry& e : fs::directory_iterator(input, ec)) {
      if (e.is_regular_file() && IsManifestFile(e.path())) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      errors->push_back({.file = input, .message = "directory holds no .yaml, .yml or .json file"});
    }
    return files;
  }
  return {input};
}

bool ReadAll(const std::string& file, std::istream& in, std::string* text, std::string* error) {
  if (file == "-") {
    text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) {
    *error = Cat("cannot read: ", std::strerror(errno));
    return false;
  }
  // Read at most one byte past the limit, so that a huge file is refused without loading it.
  text->resize(manifest::kMaxManifestBytes + 1);
  f.read(text->data(), static_cast<std::streamsize>(text->size()));
  text->resize(static_cast<size_t>(f.gcount()));
  if (f.bad()) {
    *error = Cat("cannot read: ", std::strerror(errno));
    return false;
  }
  return true;
}

// The file's Secrets into `out`, as its objects: one already read from another file is kept
// once, a different one of the same namespace and name is an error (quoting no value).
void AddSecrets(std::vector<manifest::SecretManifest> secrets, const std::string& name,
                LoadedManifests* out, LoadedManifests::File* file) {
  for (manifest::SecretManifest& s : secrets) {
    const ObjectMeta& meta = s.secret.metadata;
    auto earlier = std::find_if(out->secrets.begin(), out->secrets.end(), [&](const auto& e) {
      return e.secret.metadata.name == meta.name && e.secret.metadata.namespace_ == meta.namespace_;
    });
    if (earlier == out->secrets.end()) {
      out->secrets.push_back(std::move(s));
    } else if (!(earlier->secret == s.secret)) {
      file->valid = false;
      out->errors.push_back(
          {.file = name,
           .document = s.document,
           .path = "metadata.name",
           .message = Cat("duplicate Secret ", meta.namespace_, "/", meta.name,
                          " with different content (also in ", earlier->file, ")")});
    }
  }
}

}  // namespace

LoadedManifests LoadManifests(const std::vector<std::string>& inputs, std::istream& in) {
  LoadedManifests out;
  std::unordered_map<std::string, size_t> seen;  // object key -> index in out.manifests
  for (const std::string& input : inputs) {
    for (const std::string& file : ExpandInput(input, &out.errors)) {
      std::string name = file == "-" ? "<stdin>" : file;
      out.files.push_back({.name = name});
      LoadedManifests::File& result = out.files.back();
      std::string text, error;
      if (!ReadAll(file, in, &text, &error)) {
        out.errors.push_back({.file = name, .message = error});
        continue;
      }
      manifest::ParseResult r = manifest::ParseManifests(text, name);
      out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
      if (!r.ok()) {
        out.errors.insert(out.errors.end(), r.errors.begin(), r.errors.end());
        continue;
      }
      result.valid = true;
      for (manifest::Manifest& m : r.manifests) {
        // The same object in two files is kept once; two different objects of one name are an
        // error, as within one file.
        std::string key = manifest::ObjectKey(m.object);
        auto [it, inserted] = seen.emplace(key, out.manifests.size());
        result.objects.push_back(it->second);
        if (!inserted) {
          const manifest::Manifest& earlier = out.manifests[it->second];
          if (!(earlier.object == m.object)) {
            result.valid = false;
            out.errors.push_back(
                {.file = name,
                 .document = m.document,
                 .path = "metadata.name",
                 .message = Cat("duplicate ", key, " with different content (also in ",
                                earlier.file, ")")});
          }
          continue;
        }
        out.manifests.push_back(std::move(m));
      }
      AddSecrets(std::move(r.secrets), name, &out, &result);
    }
  }
  // Classes in one file apply to jobs in another (applying them twice changes nothing).
  std::vector<manifest::Diagnostic> rc_errors = manifest::ResolveRuntimeClasses(out.manifests);
  out.errors.insert(out.errors.end(), rc_errors.begin(), rc_errors.end());
  return out;
}

void PrintDiagnostics(const LoadedManifests& loaded, std::ostream& err) {
  for (const manifest::Diagnostic& d : loaded.warnings) err << d.ToString() << "\n";
  for (const manifest::Diagnostic& d : loaded.errors) err << d.ToString() << "\n";
}

}  // namespace gpucloud::cli
