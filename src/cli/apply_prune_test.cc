// apply --prune's decision (WhatToPrune), the label selectors of -l, and what apply keeps of a
// Secret to tell "unchanged" without its values (SecretDigest, SecretIsUnchanged). Pure.
#include "cli/apply_prune.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/secret_apply.h"

namespace gpucloud::cli {
namespace {

using Labels = std::map<std::string, std::string>;

const ResourceType* Jobs() { return FindResourceType("jobs"); }
const ResourceType* Secrets() { return FindResourceType("secrets"); }
const std::string kMark(kLastAppliedLabel);

LabelSelector Selector(const std::string& text) {
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : LabelSelector();
}

TEST(LabelSelector, TermsAsTheServerTakesThem) {
  struct Case {
    std::string selector;
    Labels labels;
    bool matches;
  };
  for (const Case& c : std::vector<Case>{
           {"", {}, true},
           {"app=a", {{"app", "a"}}, true},
           {"app==a", {{"app", "a"}}, true},
           {"app=a", {{"app", "b"}}, false},
           {"app=a", {}, false},
           {"app!=a", {}, true},
           {"app!=a", {{"app", "a"}}, false},
           {"app", {{"app", ""}}, true},
           {"!app", {{"app", ""}}, false},
           {"!app", {{"team", "x"}}, true},
           {"app=a,team=x", {{"app", "a"}}, false},
           {"app=a,team=x", {{"app", "a"}, {"team", "x"}}, true},
           {"example.com/app=a", {{"example.com/app", "a"}}, true},
       }) {
    EXPECT_EQ(Selector(c.selector).Matches(c.labels), c.matches) << c.selector;
  }
  for (const char* bad : {"=a", "a b=c", "app=a b", "!", "a=b=c"}) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Parse(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(std::string(s.status().message()).find("label selector: bad term"),
              std::string::npos);
  }
}

TEST(WhatToPrune, OnlyMarkedSelectedAndNotApplied) {
  const std::vector<ObjectRef> applied = {
      {Jobs(), "default", "keep"},
      {Jobs(), "default", "grid"},  // a job array: its elements are grid-0, grid-1
      {Secrets(), "default", "hf"},
  };
  const Labels app_a_marked = {{"app", "a"}, {kMark, "true"}};
  struct Case {
    std::string name;
    ListedObject listed;
    bool pruned;
  };
  const std::vector<Case> cases = {
      {"applied before, gone from the files", {{Jobs(), "default", "old"}, app_a_marked}, true},
      {"still in the files", {{Jobs(), "default", "keep"}, app_a_marked}, false},
      {"not applied by gpuctl", {{Jobs(), "default", "manual"}, {{"app", "a"}}}, false},
      {"without the selector's label", {{Jobs(), "default", "other"}, {{kMark, "true"}}}, false},
      {"of another namespace", {{Jobs(), "team-b", "old"}, app_a_marked}, false},
      {"an element of an applied array",
       {{Jobs(), "default", "grid-0"},
        {{"app", "a"}, {kMark, "true"}, {"gpucloud.io/array", "grid"}}},
       false},
      {"a Secret gone from the files",
       {{Secrets(), "default", "old-token"}, {{"app", "a"}, {kMark, "h1-00"}}},
       true},
      {"the applied Secret", {{Secrets(), "default", "hf"}, app_a_marked}, false},
  };
  for (const Case& c : cases) {
    std::vector<ObjectRef> got = WhatToPrune(applied, {c.listed}, Selector("app=a"));
    EXPECT_EQ(got.size(), c.pruned ? 1u : 0u) << c.name;
    if (c.pruned && !got.empty()) {
      EXPECT_EQ(got[0], c.listed.ref) << c.name;
    }
  }
}

TEST(WhatToPrune, AnArraysElementsArePrunedAsTheArrayOnce) {
  const std::vector<ObjectRef> applied = {{Jobs(), "default", "keep"}};
  auto element = [](const std::string& name) {
    return ListedObject{{Jobs(), "default", name}, {{kMark, "true"}, {"gpucloud.io/array", "sw"}}};
  };
  std::vector<ListedObject> listed = {element("sw-0"),
                                      element("sw-1"),
                                      {{Jobs(), "default", "keep"}, {{kMark, "true"}}},
                                      {{Jobs(), "default", "b"}, {{kMark, "true"}}}};
  EXPECT_EQ(WhatToPrune(applied, listed, LabelSelector()),
            (std::vector<ObjectRef>{{Jobs(), "default", "sw"}, {Jobs(), "default", "b"}}));
  // A Secret's namespace is touched as a job's is; a queue's apply touches no namespace.
  EXPECT_EQ(WhatToPrune({{Secrets(), "default", "s"}}, listed, LabelSelector()).size(), 3u);
  const ResourceType* queues = FindResourceType("queues");
  EXPECT_TRUE(WhatToPrune({{queues, "", "q"}}, listed, LabelSelector()).empty());
  // A cluster-scoped kind only when one of its kind was applied.
  const ListedObject old_queue{{queues, "", "old"}, {{kMark, "true"}}};
  EXPECT_TRUE(WhatToPrune(applied, {old_queue}, LabelSelector()).empty());
  EXPECT_EQ(WhatToPrune({{queues, "", "q"}}, {old_queue}, LabelSelector()),
            std::vector<ObjectRef>{old_queue.ref});
}

manifest::SecretObject Secret(std::map<std::string, std::string> values,
                              std::string type = "Opaque") {
  manifest::SecretObject s;
  s.metadata.name = "hf";
  s.type = std::move(type);
  s.values = std::move(values);
  return s;
}

TEST(SecretDigest, KeyedByTheTokenAndEveryValue) {
  const std::string token(64, 'a');
  const std::string d = SecretDigest(Secret({{"token", "hf_1"}}), token);
  EXPECT_TRUE(d.starts_with("h1-")) << d;
  EXPECT_EQ(d.size(), 59u);
  EXPECT_TRUE(ValidateLabelValue(d).ok());
  EXPECT_EQ(SecretDigest(Secret({{"token", "hf_1"}}), token), d);
  EXPECT_NE(SecretDigest(Secret({{"token", "hf_2"}}), token), d);
  EXPECT_NE(SecretDigest(Secret({{"token", "hf_1"}}), std::string(64, 'b')), d);
  EXPECT_NE(SecretDigest(Secret({{"token", "hf_1"}}, "kubernetes.io/dockerconfigjson"), token), d);
  // The parts' lengths are in the message: moving a byte from key to value changes it.
  EXPECT_NE(SecretDigest(Secret({{"ab", "c"}}), token), SecretDigest(Secret({{"a", "bc"}}), token));
  EXPECT_EQ(SecretDigest(Secret({{"token", "hf_1"}}), ""), "");
}

TEST(SecretIsUnchanged, SameTypeLabelsAndSizes) {
  const manifest::SecretObject s = Secret({{"token", "hf_1"}});
  const std::string digest = SecretDigest(s, "t");
  const Labels labels = AppliedSecretLabels(s, digest);
  auto live = [&](const Labels& l, int64_t bytes) {
    return nlohmann::json{{"metadata", {{"name", "hf"}, {"labels", l}}},
                          {"type", "Opaque"},
                          {"status", {{"data", {{"token", {{"bytes", bytes}}}}}}}};
  };
  EXPECT_TRUE(SecretIsUnchanged(live(labels, 4), s, labels, digest));
  EXPECT_FALSE(SecretIsUnchanged(live(labels, 5), s, labels, digest));  // written by another
  EXPECT_FALSE(SecretIsUnchanged(live({{kMark, "h1-other"}}, 4), s, labels, digest));
  EXPECT_FALSE(SecretIsUnchanged(live(labels, 4), s, labels, ""));  // no token: never known
  // What diff shows of it: sizes, never a value.
  const std::string view = SecretDiffView(live(labels, 4)).dump();
  EXPECT_NE(view.find("*** (4 bytes)"), std::string::npos) << view;
  EXPECT_EQ(SecretDiffView(s, labels).dump().find("hf_1"), std::string::npos);
}

}  // namespace
}  // namespace gpucloud::cli
