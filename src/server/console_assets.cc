#include "server/console_assets.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpucloud::server {
namespace {

constexpr std::string_view kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'none'";

std::string_view ContentTypeOf(std::string_view path) {
  auto ends = [&](std::string_view ext) { return path.ends_with(ext); };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".json")) return "application/json";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

// FNV-1a over the file: stable across builds of the same bytes.
std::string ETagOf(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrCat("\"", absl::Hex(h, absl::kZeroPad16), "\"");
}

const EmbeddedAsset* Find(std::string_view path) {
  for (const EmbeddedAsset& a : EmbeddedAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

bool AcceptsGzip(std::string_view accept_encoding) {
  // "gzip", "gzip;q=1", "deflate, gzip"; a "gzip;q=0" refuses it.
  size_t at = accept_encoding.find("gzip");
  if (at == std::string_view::npos) return false;
  std::string_view rest = accept_encoding.substr(at + 4);
  return !(rest.starts_with(";q=0") && !rest.starts_with(";q=0."));
}

Response Plain(int status, std::string body) {
  Response r{status, std::move(body), "text/plain; charset=utf-8"};
  r.headers["X-Content-Type-Options"] = "nosniff";
  return r;
}

}  // namespace

std::optional<Response> ServeConsole(std::string_view method, std::string_view path,
                                     std::string_view accept_encoding,
                                     std::string_view if_none_match, bool has_token) {
  if (path == "/" && !has_token && method == "GET") {
    Response r = Plain(302, "the console is at /ui/\n");
    r.headers["Location"] = "/ui/";
    return r;
  }
  if (path != "/ui" && !path.starts_with("/ui/")) return std::nullopt;
  if (method != "GET") {
    Response r = Plain(405, "the console's files are read with GET\n");
    r.headers["Allow"] = "GET";
    return r;
  }
  if (path == "/ui") {
    Response r = Plain(301, "the console is at /ui/\n");
    r.headers["Location"] = "/ui/";
    return r;
  }
  std::string_view file = path.substr(4);
  if (file.empty()) file = "index.html";
  const EmbeddedAsset* a = Find(file);
  if (a == nullptr)
    return Plain(
        404, absl::StrCat("no console file ", absl::string_view(file.data(), file.size()), "\n"));
  static const auto* etags = [] {
    auto* m = new std::vector<std::string>;
    for (const EmbeddedAsset& e : EmbeddedAssets()) m->push_back(ETagOf(e.raw));
    return m;
  }();
  const std::string& etag = (*etags)[a - EmbeddedAssets().data()];
  Response r;
  r.content_type = std::string(ContentTypeOf(file));
  r.headers["Content-Security-Policy"] = std::string(kPolicy);
  r.headers["X-Content-Type-Options"] = "nosniff";
  r.headers["X-Frame-Options"] = "DENY";
  r.headers["Referrer-Policy"] = "no-referrer";
  r.headers["Cache-Control"] = "no-cache";
  r.headers["Vary"] = "Accept-Encoding";
  r.headers["ETag"] = etag;
  if (!if_none_match.empty() && if_none_match.find(etag) != std::string_view::npos) {
    r.status = 304;
    return r;
  }
  if (AcceptsGzip(accept_encoding)) {
    r.headers["Content-Encoding"] = "gzip";
    r.body = std::string(a->gzip);
  } else {
    r.body = std::string(a->raw);
  }
  return r;
}

}  // namespace gpucloud::server
