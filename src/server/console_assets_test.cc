#include "server/console_assets.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace gpucloud::server {
namespace {

Response Get(std::string_view path, std::string_view accept = "", std::string_view etag = "") {
  std::optional<Response> r = ServeConsole("GET", path, accept, etag, false);
  EXPECT_TRUE(r.has_value()) << path;
  return r.value_or(Response{});
}

TEST(ConsoleAssets, TheIndexIsServedWithAStrictPolicy) {
  Response r = Get("/ui/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<title>gpucloud console</title>"), std::string::npos);
  EXPECT_NE(r.headers["Content-Security-Policy"].find("script-src 'self'"), std::string::npos);
  EXPECT_NE(r.headers["Content-Security-Policy"].find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(r.headers["X-Content-Type-Options"], "nosniff");
  EXPECT_EQ(r.headers["Cache-Control"], "no-cache");
  EXPECT_EQ(r.headers.count("Content-Encoding"), 0u);
  EXPECT_EQ(Get("/ui/index.html").body, r.body);
}

TEST(ConsoleAssets, GzipWhenAcceptedAndNotWhenRefused) {
  Response plain = Get("/ui/js/app.js");
  Response gz = Get("/ui/js/app.js", "gzip, deflate, br");
  EXPECT_EQ(gz.headers["Content-Encoding"], "gzip");
  EXPECT_EQ(gz.content_type, "text/javascript; charset=utf-8");
  ASSERT_GE(gz.body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz.body[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz.body[1]), 0x8b);
  EXPECT_LT(gz.body.size(), plain.body.size());
  EXPECT_EQ(Get("/ui/js/app.js", "gzip;q=0").headers.count("Content-Encoding"), 0u);
  EXPECT_EQ(Get("/ui/js/app.js", "gzip;q=0.5").headers["Content-Encoding"], "gzip");
}

TEST(ConsoleAssets, AnUnchangedFileIs304) {
  Response first = Get("/ui/app.css");
  std::string etag = first.headers["ETag"];
  ASSERT_FALSE(etag.empty());
  Response again = Get("/ui/app.css", "", etag);
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(Get("/ui/app.css", "", "\"0000000000000000\"").status, 200);
  EXPECT_NE(Get("/ui/js/app.js").headers["ETag"], etag);
}

TEST(ConsoleAssets, UnknownFilesMethodsAndOtherPaths) {
  EXPECT_EQ(Get("/ui/nope.js").status, 404);
  EXPECT_EQ(Get("/ui/../../etc/passwd").status, 404);  // names, never files on disk
  EXPECT_EQ(Get("/ui").status, 301);
  EXPECT_EQ(Get("/ui").headers["Location"], "/ui/");
  std::optional<Response> post = ServeConsole("POST", "/ui/", "", "", false);
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->status, 405);
  // A browser without a token at the root goes to the console; API clients are untouched.
  EXPECT_EQ(Get("/").status, 302);
  EXPECT_FALSE(ServeConsole("GET", "/", "", "", true).has_value());
  EXPECT_FALSE(ServeConsole("GET", "/apis/gpucloud/v1/jobs", "", "", false).has_value());
  EXPECT_FALSE(ServeConsole("GET", "/uix", "", "", false).has_value());
}

// Every file index.html and the modules load is built in (a file added to web/console but
// missing from the build would be a 404 in the browser), and Chart.js comes from Debian.
TEST(ConsoleAssets, EveryFileThePagesLoadIsEmbedded) {
  std::set<std::string> have;
  for (const EmbeddedAsset& a : EmbeddedAssets()) have.insert(std::string(a.path));
  EXPECT_TRUE(have.count("vendor/chart.min.js"));
  std::string index = Get("/ui/").body;
  std::regex ref(R"re((?:src|href)="([^"#:]+)")re");
  int refs = 0;
  for (std::sregex_iterator it(index.begin(), index.end(), ref), end; it != end; ++it, ++refs) {
    EXPECT_TRUE(have.count((*it)[1].str())) << (*it)[1].str();
  }
  EXPECT_GE(refs, 3);  // the style sheet, the icon, the application
  // Chart.js is loaded by dom.js when a page first draws a chart.
  EXPECT_NE(Get("/ui/js/dom.js").body.find("'vendor/chart.min.js'"), std::string::npos);
  std::string app = Get("/ui/js/app.js").body;
  std::regex module(R"re(import\('\./([a-z]+\.js)'\))re");
  int modules = 0;
  for (std::sregex_iterator it(app.begin(), app.end(), module), end; it != end; ++it, ++modules) {
    EXPECT_TRUE(have.count("js/" + (*it)[1].str())) << (*it)[1].str();
  }
  EXPECT_GE(modules, 8);
}

}  // namespace
}  // namespace gpucloud::server
