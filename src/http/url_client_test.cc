#include "http/url_client.h"

#include <memory>
#include <mutex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/server.h"

namespace gpuherd::http {
namespace {

using ::testing::HasSubstr;

TEST(UrlTest, ParsesSchemeHostPortAndTarget) {
  auto url = ParseUrl("https://hooks.example.com/a/b?c=1");
  ASSERT_TRUE(url.ok());
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "hooks.example.com");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->target, "/a/b?c=1");
  url = ParseUrl("http://[::1]:9093");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "[::1]");
  EXPECT_EQ(url->port, 9093);
  EXPECT_EQ(url->target, "/");
  EXPECT_THAT(ParseUrl("ftp://x/").status().message(), HasSubstr("must start with http://"));
  EXPECT_THAT(ParseUrl("http://").status().message(), HasSubstr("has no host"));
  EXPECT_THAT(ParseUrl("http://h:70000/").status().message(), HasSubstr("port outside"));
  EXPECT_THAT(ParseUrl("http://h/a\r\nX: y").status().message(), HasSubstr("white space"));
}

TEST(UrlClientTest, PostsToAPlainHttpReceiver) {
  std::mutex mu;
  Request seen;
  ServerOptions options;
  auto server = Server::Start(options, [&](const Request& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen = request;
    Response response;
    response.status = 202;
    response.body = "{}";
    return response;
  });
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::string port = std::to_string((*server)->tcp_port());
  auto url = ParseUrl("http://127.0.0.1:" + port + "/hook?x=1");
  ASSERT_TRUE(url.ok());
  auto response = RequestUrl(*url, "POST", R"({"a":1})", {{"Content-Type", "application/json"}}, 5000);
  ASSERT_TRUE(response.ok()) << response.status().message();
  EXPECT_EQ(response->status, 202);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen.path, "/hook");
  EXPECT_EQ(seen.query.at("x"), "1");
  EXPECT_EQ(seen.body, R"({"a":1})");
  EXPECT_EQ(seen.headers.at("host"), "127.0.0.1:" + port);
}

// A plain HTTP server is not a TLS one: the handshake fails with a message,
// not a hang or a crash.
TEST(UrlClientTest, HttpsToAPlainServerFailsCleanly) {
  ServerOptions options;
  auto server = Server::Start(options, [](const Request&) { return Response{}; });
  ASSERT_TRUE(server.ok());
  auto url = ParseUrl("https://127.0.0.1:" + std::to_string((*server)->tcp_port()) + "/");
  ASSERT_TRUE(url.ok());
  auto response = RequestUrl(*url, "POST", "{}", {}, 3000);
  ASSERT_FALSE(response.ok());
  EXPECT_THAT(response.status().message(), HasSubstr("TLS handshake"));
}

}  // namespace
}  // namespace gpuherd::http
