#include "agent/assignment_events.h"

#include <gtest/gtest.h>

#include "core/text.h"

namespace gpucloud::agent {
namespace {

api::Assignment Sample() {
  api::Assignment a;
  a.name = "team-a.train.0";
  a.namespace_ = "team-a";
  a.job = "train";
  a.job_uid = "uid-1";
  a.attempt = 2;
  a.command = {"sh", "-c", "echo \"resourceVersion\":\"99999999\""};
  a.env = {{"resourceVersion", "99999999"}, {"\"resourceVersion\":\"", "\"99999999\""}};
  return a;
}

std::string Event(const std::string& type, const api::Assignment& a, int64_t rev) {
  std::string object = api::AssignmentToJson(a);
  // The server's form: the store's revision in metadata (WithRevision), then the rest.
  size_t meta = object.find("\"metadata\"");
  size_t brace = object.find('{', meta);
  object.insert(brace + 1, Cat("\"resourceVersion\": \"", rev, "\", "));
  return Cat("{\"type\":\"", type, "\",\"object\":", object, "}");
}

TEST(AssignmentEvents, HostileFieldsDoNotMoveTheRevision) {
  // Every free-form field says "resourceVersion": "99999999"; the event's revision is 42.
  AssignmentEvent e = ParseAssignmentEvent(Event("MODIFIED", Sample(), 42));
  ASSERT_EQ(e.type, AssignmentEvent::Type::kPut) << e.error;
  EXPECT_EQ(e.revision, 42);
  ASSERT_TRUE(e.assignment.has_value());
  EXPECT_EQ(e.assignment->command, Sample().command);
  EXPECT_EQ(e.assignment->env, Sample().env);
}

TEST(AssignmentEvents, BookmarksDeletesAndJunk) {
  AssignmentEvent b = ParseAssignmentEvent(
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"77\"}}}");
  EXPECT_EQ(b.type, AssignmentEvent::Type::kBookmark);
  EXPECT_EQ(b.revision, 77);
  AssignmentEvent d = ParseAssignmentEvent(Event("DELETED", Sample(), 43));
  EXPECT_EQ(d.type, AssignmentEvent::Type::kDeleted);
  EXPECT_EQ(d.name, "team-a.train.0");
  EXPECT_EQ(d.revision, 43);
  for (const char* junk :
       {"", "[]", "{", "{\"type\":1,\"object\":{}}", "{\"type\":\"ADDED\",\"object\":[]}",
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{}}}", "\"resourceVersion\":\"5\"",
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":5}}}"}) {
    AssignmentEvent j = ParseAssignmentEvent(junk);
    EXPECT_EQ(j.revision, 0) << junk;
    if (j.type != AssignmentEvent::Type::kBookmark) {
      EXPECT_EQ(j.type, AssignmentEvent::Type::kIgnored) << junk;
    }
  }
  AssignmentEvent bad = ParseAssignmentEvent(
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}");
  EXPECT_EQ(bad.type, AssignmentEvent::Type::kPut);
  EXPECT_FALSE(bad.assignment.has_value());
  EXPECT_FALSE(bad.error.empty());
}

TEST(AssignmentEvents, RevisionsAreDigitsOnly) {
  EXPECT_EQ(ParseRevision("123"), 123);
  EXPECT_EQ(ParseRevision("-1"), 0);
  EXPECT_EQ(ParseRevision("12a"), 0);
  EXPECT_EQ(ParseRevision("9999999999999999999999"), 0);
  EXPECT_EQ(ParseRevision(""), 0);
}

}  // namespace
}  // namespace gpucloud::agent
