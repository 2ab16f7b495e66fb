// The web console's static files (web/console and Debian's Chart.js), built into the binary by
// cmake/embed_assets.cmake and served by HttpsServer at /ui/ without a token: they hold no data;
// every datum the page shows comes from the REST API with the token the user signs in with
// (docs/console.md). Each file is kept as it is and gzip-compressed; a client that accepts gzip
// gets the compressed one. Answers carry a strict Content-Security-Policy (scripts, styles and
// connections from this origin only; no frames), an ETag (a 304 when If-None-Match names it)
// and Cache-Control: no-cache, so a new server version is picked up at once.
// Thread-safe: the assets are immutable.
#ifndef GPUCLOUD_SERVER_CONSOLE_ASSETS_H_
#define GPUCLOUD_SERVER_CONSOLE_ASSETS_H_

#include <optional>
#include <string_view>
#include <vector>

#include "server/rest.h"

namespace gpucloud::server {

struct EmbeddedAsset {
  std::string_view path;  // relative to /ui/, e.g. "js/app.js"
  std::string_view raw;
  std::string_view gzip;
};

// Every embedded file, sorted by path (the generated console_assets_data.cc).
const std::vector<EmbeddedAsset>& EmbeddedAssets();

// The answer to `method` `path` when the path is the console's ("/ui", "/ui/...", or "/" from
// a browser that sent no token: a redirect to /ui/); nullopt for every other path.
// `accept_encoding` and `if_none_match` are the request's headers. An unknown file is 404, a
// method other than GET 405.
std::optional<Response> ServeConsole(std::string_view method, std::string_view path,
                                     std::string_view accept_encoding,
                                     std::string_view if_none_match, bool has_token);

}  // namespace gpucloud::server

#endif  // GPUCLOUD_SERVER_CONSOLE_ASSETS_H_
