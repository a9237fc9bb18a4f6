#include "daemon/idempotency.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;

http::Request Post(const std::string& target, const std::string& body, const std::string& key) {
  http::Request r;
  r.method = "POST";
  r.target = target;
  r.path = target;
  r.body = body;
  if (!key.empty()) r.headers["idempotency-key"] = key;
  return r;
}

TEST(IdempotencyKeyOfTest, AcceptsBoundedKeysOnMutationsOnly) {
  EXPECT_FALSE(IdempotencyKeyOf(Post("/v1/jobs", "{}", ""))->has_value());
  auto good = IdempotencyKeyOf(Post("/v1/jobs", "{}", "3f2a-9c:01_x.y"));
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(**good, "3f2a-9c:01_x.y");
  EXPECT_TRUE(IdempotencyKeyOf(Post("/v1/jobs", "{}", std::string(kMaxIdempotencyKeyBytes, 'a'))).ok());
  for (const std::string& bad : {std::string(kMaxIdempotencyKeyBytes + 1, 'a'), std::string("a b"),
                                 std::string("k1, k2"), std::string("\x1b[31m"), std::string("a\0b", 3),
                                 std::string("caf\xc3\xa9")}) {
    auto refused = IdempotencyKeyOf(Post("/v1/jobs", "{}", bad));
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << bad;
  }
  http::Request get = Post("/v1/jobs", "", "bad key!");
  get.method = "GET";
  EXPECT_FALSE(IdempotencyKeyOf(get)->has_value());  // reads ignore it
}

TEST(RequestFingerprintTest, NamesMethodTargetAndBody) {
  const std::string a = RequestFingerprint(Post("/v1/jobs", R"({"command":["a"]})", "k"));
  EXPECT_EQ(a.rfind("POST /v1/jobs sha256:", 0), 0u) << a;
  EXPECT_EQ(a, RequestFingerprint(Post("/v1/jobs", R"({"command":["a"]})", "other")));
  EXPECT_NE(a, RequestFingerprint(Post("/v1/jobs", R"({"command":["b"]})", "k")));
  EXPECT_NE(a, RequestFingerprint(Post("/v1/jobs/1/cancel", R"({"command":["a"]})", "k")));
}

class IdempotencyKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpuherd_idempotency_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    auto store = store::Store::Open((dir_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    state_.store = std::move(store).value();
    state_.clock = &clock_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A handler that counts how often it acted.
  http::Response Act(int status = 201) {
    ++acted_;
    http::Response r;
    r.status = status;
    r.body = "{\"id\": " + std::to_string(acted_) + "}";
    return r;
  }

  void Commit() {
    ASSERT_TRUE(state_.store->Commit(&state_.batch).ok());
    state_.batch = store::WriteBatch();
  }

  static bool Replayed(const http::Response& r) {
    for (const auto& [name, value] : r.headers) {
      if (name == kReplayedHeader && value == "true") return true;
    }
    return false;
  }

  fs::path dir_;
  host::FakeClock clock_{1'700'000'000'000};
  DaemonState state_;
  IdempotencyKeys keys_{&state_};
  int acted_ = 0;
};

TEST_F(IdempotencyKeysTest, ARepeatedKeyGetsTheFirstOutcomeWithoutActing) {
  const http::Request submit = Post("/v1/jobs", R"({"command":["true"]})", "k1");
  http::Response first = keys_.Run(1000, "k1", submit, [&] { return Act(); });
  EXPECT_EQ(first.status, 201);
  EXPECT_FALSE(Replayed(first));
  // Before the commit: the retry waited behind its first attempt in one turn.
  http::Response same_turn = keys_.Run(1000, "k1", submit, [&] { return Act(); });
  EXPECT_EQ(same_turn.body, first.body);
  EXPECT_TRUE(Replayed(same_turn));
  Commit();
  http::Response later = keys_.Run(1000, "k1", submit, [&] { return Act(); });
  EXPECT_EQ(later.status, 201);
  EXPECT_EQ(later.body, first.body);
  EXPECT_TRUE(Replayed(later));
  EXPECT_EQ(acted_, 1);
}

TEST_F(IdempotencyKeysTest, KeysBelongToOneUserAndOneRequest) {
  const http::Request submit = Post("/v1/jobs", R"({"command":["true"]})", "k1");
  keys_.Run(1000, "k1", submit, [&] { return Act(); });
  Commit();
  // Another user's key of the same name is theirs alone.
  http::Response theirs = keys_.Run(1001, "k1", submit, [&] { return Act(); });
  EXPECT_FALSE(Replayed(theirs));
  EXPECT_EQ(acted_, 2);
  // The same key for another request is refused, and nothing is done.
  http::Response other = keys_.Run(1000, "k1", Post("/v1/jobs", R"({"command":["false"]})", "k1"),
                                   [&] { return Act(); });
  EXPECT_EQ(other.status, 422);
  EXPECT_NE(other.body.find("POST /v1/jobs"), std::string::npos) << other.body;
  EXPECT_EQ(acted_, 2);
}

TEST_F(IdempotencyKeysTest, ServerErrorsAreNotKeptAndKeysExpire) {
  const http::Request submit = Post("/v1/jobs", "{}", "k2");
  EXPECT_EQ(keys_.Run(7, "k2", submit, [&] { return Act(503); }).status, 503);
  Commit();
  EXPECT_EQ(keys_.Run(7, "k2", submit, [&] { return Act(); }).status, 201);
  Commit();
  EXPECT_EQ(acted_, 2);
  clock_.Advance(kIdempotencyKeyLifetime + 1);
  http::Response after = keys_.Run(7, "k2", submit, [&] { return Act(); });
  EXPECT_FALSE(Replayed(after));
  EXPECT_EQ(acted_, 3);
  // The expiry of old keys rides on this turn's commit.
  EXPECT_GT(state_.batch.idempotency_expire_before, 0);
  Commit();
}

TEST_F(IdempotencyKeysTest, AnOverlongOutcomeIsKeptAsANote) {
  const http::Request submit = Post("/v1/jobs", "{}", "k3");
  keys_.Run(7, "k3", submit, [&] {
    http::Response r;
    r.body = std::string(kMaxKeptOutcomeBytes + 1, 'x');
    return r;
  });
  Commit();
  http::Response again = keys_.Run(7, "k3", submit, [&] { return Act(); });
  EXPECT_TRUE(Replayed(again));
  EXPECT_LT(again.body.size(), 200u);
  EXPECT_EQ(acted_, 0);
}

}  // namespace
}  // namespace gpuherd::daemon
