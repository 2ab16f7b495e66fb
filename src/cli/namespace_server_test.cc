// gpuctl's namespace and service-account commands against a real server that makes no namespace
// on first use (CTest label `integration`): create namespace with an owner and labels, get and
// describe them, a create into a namespace that does not exist refused with the server's 404,
// create and list service accounts, a delete of a namespace that still holds objects refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/gpuctl_fixture.h"
#include "server/identity_book.h"

namespace gpucloud::cli {
namespace {

class NamespaceServerTest : public GpuctlServerFixture {
 protected:
  NamespaceServerTest() : GpuctlServerFixture("gpuctl-ns", 1'700'000'000'000) {}
  void Attach(server::RestApi& api) override {
    api.SetNamespaceProvisioning(server::NamespaceProvisioning::kExplicit);
    book_ = std::make_unique<server::IdentityBook>(*store_, clock_, api.authorizer());
    ASSERT_TRUE(book_->Load().ok());
    api.AttachIdentities(book_.get());
  }
  std::unique_ptr<server::IdentityBook> book_;
};

TEST_F(NamespaceServerTest, CreateGetAndAWriteIntoAMissingNamespace) {
  Ran made = Gpuctl({"create", "namespace", "team-x", "--owner", "alice", "-l", "team=x"});
  ASSERT_EQ(made.code, 0) << made.err;
  EXPECT_EQ(made.out, "namespace team-x created\n");
  ASSERT_EQ(Gpuctl({"create", "ns", "team-w"}).code, 0);

  Ran listed = Gpuctl({"get", "namespaces", "-l", "team=x"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("team-x"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("Active, owner alice"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("team-w"), std::string::npos) << listed.out;
  Ran one = Gpuctl({"get", "ns", "team-x", "-o", "json"});
  ASSERT_EQ(one.code, 0) << one.err;
  nlohmann::json doc = nlohmann::json::parse(one.out);
  EXPECT_EQ(doc["spec"]["owner"], "alice");
  EXPECT_EQ(doc["metadata"]["labels"]["team"], "x");

  Ran missing = Gpuctl({"run", "--gpus", "1", "-n", "team-y", "--", "true"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("namespaces \"team-y\" not found"), std::string::npos) << missing.err;
  EXPECT_EQ(Gpuctl({"run", "--gpus", "1", "-n", "team-x", "--", "true"}).code, 0);

  Ran bad = Gpuctl({"create", "namespace", "team-z", "-l", "novalue"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("KEY=VALUE"), std::string::npos) << bad.err;
  EXPECT_EQ(Gpuctl({"create", "namespace", "Team_Z"}).code, 2);
  EXPECT_NE(Gpuctl({"get", "ns", "team-z"}).code, 0);  // neither was made
}

TEST_F(NamespaceServerTest, ServiceAccountsAndANamespaceThatStillHoldsThem) {
  ASSERT_EQ(Gpuctl({"create", "namespace", "team-x"}).code, 0);
  Ran sa = Gpuctl({"create", "serviceaccount", "trainer", "-n", "team-x"});
  ASSERT_EQ(sa.code, 0) << sa.err;
  EXPECT_EQ(sa.out, "serviceaccount trainer created\n");
  Ran nowhere = Gpuctl({"create", "sa", "trainer", "-n", "team-q"});
  EXPECT_NE(nowhere.code, 0);
  EXPECT_NE(nowhere.err.find("not found"), std::string::npos) << nowhere.err;

  Ran listed = Gpuctl({"get", "sa", "-n", "team-x"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("trainer"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("no policies"), std::string::npos) << listed.out;

  Ran held = Gpuctl({"delete", "namespace", "team-x"});
  EXPECT_NE(held.code, 0);
  EXPECT_NE(held.err.find("1 service accounts"), std::string::npos) << held.err;
  ASSERT_EQ(Gpuctl({"delete", "sa", "trainer", "-n", "team-x"}).code, 0);
  Ran gone = Gpuctl({"delete", "namespace", "team-x"});
  EXPECT_EQ(gone.code, 0) << gone.err;
  EXPECT_NE(Gpuctl({"get", "ns", "team-x"}).code, 0);
}

}  // namespace
}  // namespace gpucloud::cli
