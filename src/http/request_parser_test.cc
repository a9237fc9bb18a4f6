#include "http/request_parser.h"

#include <gtest/gtest.h>

namespace gpuherd::http {
namespace {

TEST(ParseRequestTest, ReadsWhatTheHandlerSees) {
  ParsedRequest p = ParseRequest(
      "POST /v1/jobs/a%20b?all=1&x=%2F+y HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\nx-a: 2\r\n"
      "Content-Length: 4\r\n\r\nbody");
  ASSERT_TRUE(p.ok) << p.failure.message;
  EXPECT_EQ(p.request.method, "POST");
  EXPECT_EQ(p.request.target, "/v1/jobs/a%20b?all=1&x=%2F+y");
  EXPECT_EQ(p.request.path, "/v1/jobs/a b");
  EXPECT_EQ(p.request.query.at("all"), "1");
  EXPECT_EQ(p.request.query.at("x"), "/ y");
  EXPECT_EQ(p.request.headers.at("x-a"), "1, 2");
  EXPECT_EQ(p.request.headers.at("host"), "localhost");
  EXPECT_EQ(p.request.body, "body");
}

TEST(ParseRequestTest, ReadsAChunkedBody) {
  ParsedRequest p = ParseRequest(
      "POST /v1/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  ASSERT_TRUE(p.ok) << p.failure.message;
  EXPECT_EQ(p.request.body, "abcde");
}

TEST(ParseRequestTest, AnswersWhatTheServerAnswers) {
  RequestLimits limits;
  limits.max_body_bytes = 8;
  EXPECT_EQ(ParseRequest("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789", limits).failure.status, 413);
  std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(kMaxHeaderBytes, 'a') + "\r\n\r\n";
  EXPECT_EQ(ParseRequest(huge).failure.status, 431);
  EXPECT_EQ(ParseRequest("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n").failure.status, 400);
  EXPECT_EQ(ParseRequest("\x01\x02 garbage\r\n\r\n").failure.status, 400);
  ParsedRequest bad_escape = ParseRequest("GET /v1/%zz HTTP/1.1\r\n\r\n");
  EXPECT_FALSE(bad_escape.ok);
  EXPECT_EQ(bad_escape.failure.status, 400);
  EXPECT_NE(bad_escape.failure.message.find("percent-encoding"), std::string::npos);
  EXPECT_EQ(ParseRequest("GET /v1/%00 HTTP/1.1\r\n\r\n").failure.status, 400);  // an encoded NUL
  EXPECT_EQ(ParseRequest("GET relative HTTP/1.1\r\n\r\n").failure.status, 400);
}

TEST(ParseRequestTest, AnIncompleteRequestIsNotAnError) {
  for (const char* partial : {"", "GET / HTT", "GET / HTTP/1.1\r\nHost: x\r\n",
                              "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"}) {
    ParsedRequest p = ParseRequest(partial);
    EXPECT_FALSE(p.ok) << partial;
    EXPECT_EQ(p.failure.status, 0) << partial;
  }
}

}  // namespace
}  // namespace gpuherd::http
