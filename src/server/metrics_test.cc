#include "server/metrics.h"

#include <gtest/gtest.h>

namespace gpucloud::server {
namespace {

TEST(ApiMetrics, HistogramBucketsAreCumulative) {
  ApiMetrics m;
  m.Observe("GET", "jobs", 200, 0.0003);  // first bucket
  m.Observe("GET", "jobs", 200, 0.02);    // le 0.025
  m.Observe("GET", "jobs", 404, 5.0);     // only +Inf
  std::string text = m.Render(7);
  EXPECT_NE(
      text.find("gpucloud_api_requests_total{method=\"GET\",resource=\"jobs\",code=\"200\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("le=\"0.0005\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.01\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.025\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpucloud_api_request_duration_seconds_count{method=\"GET\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpucloud_store_revision 7\n"), std::string::npos);
}

TEST(ApiMetrics, MadeUpMethodsShareOneSeries) {
  ApiMetrics m;
  for (int i = 0; i < 100; ++i) m.Observe("FOO" + std::to_string(i), "jobs", 401, 0.001);
  m.Observe("PATCH", "jobs", 401, 0.001);
  m.Observe("get", "jobs", 401, 0.001);  // methods are case-sensitive (RFC 9110 9.1)
  std::string text = m.Render(0);
  EXPECT_NE(
      text.find(
          "gpucloud_api_requests_total{method=\"OTHER\",resource=\"jobs\",code=\"401\"} 101\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("gpucloud_api_request_duration_seconds_count{method=\"OTHER\"} 101\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("method=\"PATCH\""), std::string::npos) << text;
  EXPECT_EQ(text.find("FOO"), std::string::npos) << text;
  EXPECT_EQ(text.find("method=\"get\""), std::string::npos) << text;
}

TEST(ApiMetrics, MethodLabels) {
  for (const char* known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    EXPECT_EQ(MethodLabel(known), known);
  }
  EXPECT_EQ(MethodLabel("PROPFIND"), "OTHER");
  EXPECT_EQ(MethodLabel(""), "OTHER");
}

TEST(ApiMetrics, ResourcesFromPaths) {
  EXPECT_EQ(ResourceOfPath("/apis/gpucloud/v1/namespaces/a/jobs/x"), "jobs");
  EXPECT_EQ(ResourceOfPath("/apis/gpucloud/v1/queues"), "queues");
  EXPECT_EQ(ResourceOfPath("/metrics"), "metrics");
  EXPECT_EQ(ResourceOfPath("/apis/gpucloud/v1/namespaces/a/jobsx"), "other");
}

}  // namespace
}  // namespace gpucloud::server
