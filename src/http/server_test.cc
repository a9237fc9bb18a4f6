#include "http/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/client.h"

namespace gpuherd::http {
namespace {

namespace net = boost::asio;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string ErrorText(const std::string& body) {
  nlohmann::json json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("error") || !json["error"].is_string()) return "";
  return json["error"].get<std::string>();
}

// Sends raw bytes over TCP and returns everything the server sends back
// until it closes the connection.
std::string RawExchange(int port, const std::string& bytes) {
  net::io_context io;
  Tcp::socket socket(io);
  socket.connect(Tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  net::write(socket, net::buffer(bytes));
  std::string reply;
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(reply), ec);
  return reply;
}

using UnixSocket = net::local::stream_protocol::socket;

// Reads until the server closes the connection (or the read fails).
template <class Socket>
std::string ReadToEnd(Socket& socket) {
  std::string reply;
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(reply), ec);
  return reply;
}

// Polls `done` for up to 5 s.
template <class Predicate>
bool Eventually(Predicate done) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuherd-http-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    socket_path_ = dir_ + "/gpuherd.sock";
  }
  void TearDown() override {
    if (server_) server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  ServerOptions Options() {
    ServerOptions options;
    options.unix_path = socket_path_;
    return options;
  }

  void StartServer(ServerOptions options, Handler handler) {
    auto server = Server::Start(options, std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server.value());
  }

  Client UnixClient(DurationMs timeout = 10000) {
    return Client(Endpoint{.unix_path = socket_path_}, timeout);
  }
  Client TcpClient(DurationMs timeout = 10000) {
    return Client(Endpoint{.unix_path = "", .host = "127.0.0.1", .port = server_->tcp_port()},
                      timeout);
  }

  // A connection that sends nothing; the server has admitted it once
  // connection_stats().open counts it.
  std::unique_ptr<UnixSocket> IdleUnix() {
    auto socket = std::make_unique<UnixSocket>(io_);
    socket->connect(net::local::stream_protocol::endpoint(socket_path_));
    return socket;
  }
  std::unique_ptr<Tcp::socket> IdleTcp() {
    auto socket = std::make_unique<Tcp::socket>(io_);
    socket->connect(Tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->tcp_port()));
    return socket;
  }
  bool OpenBecomes(int open) {
    return Eventually([&] { return server_->connection_stats().open == open; });
  }

  static Response Echo(const Request& request) {
    Response response;
    response.body = request.method + " " + request.path;
    return response;
  }

  net::io_context io_;
  std::string dir_;
  std::string socket_path_;
  std::unique_ptr<Server> server_;
};

TEST_F(HttpServerTest, BothListenersAnswer) {
  StartServer(Options(), Echo);
  EXPECT_GT(server_->tcp_port(), 0);

  auto over_unix = UnixClient().Request("GET", "/v1/health");
  ASSERT_TRUE(over_unix.ok()) << over_unix.status().ToString();
  EXPECT_EQ(over_unix->status, 200);
  EXPECT_EQ(over_unix->body, "GET /v1/health");
  EXPECT_EQ(over_unix->headers["content-type"], "application/json");

  auto over_tcp = TcpClient().Request("DELETE", "/v1/jobs/7");
  ASSERT_TRUE(over_tcp.ok()) << over_tcp.status().ToString();
  EXPECT_EQ(over_tcp->status, 200);
  EXPECT_EQ(over_tcp->body, "DELETE /v1/jobs/7");
}

TEST_F(HttpServerTest, SocketFileIsWorldWritable) {
  StartServer(Options(), Echo);
  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

TEST_F(HttpServerTest, HandlerSeesDecodedRequestAndPeerCredentials) {
  std::mutex mu;
  std::vector<Request> seen;
  StartServer(Options(), [&](const Request& request) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(request);
    Response response;
    response.status = 201;
    response.headers.emplace_back("X-Job-Id", "42");
    return response;
  });

  const std::string target = "/v1/jobs/my%20job?name=hello+world&amp=%26&flag&empty=";
  auto response = UnixClient().Request("POST", target, R"({"gpus": 2})",
                                       {{"Authorization", "Bearer t0ken"}, {"X-Trace", "a"}});
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->headers["x-job-id"], "42");
  auto tcp_response = TcpClient().Request("GET", "/v1/gpus");
  ASSERT_TRUE(tcp_response.ok()) << tcp_response.status().ToString();

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  const Request& via_unix = seen[0];
  EXPECT_EQ(via_unix.method, "POST");
  EXPECT_EQ(via_unix.target, target);
  EXPECT_EQ(via_unix.path, "/v1/jobs/my job");
  EXPECT_EQ(via_unix.query.at("name"), "hello world");
  EXPECT_EQ(via_unix.query.at("amp"), "&");
  EXPECT_EQ(via_unix.query.at("flag"), "");
  EXPECT_EQ(via_unix.query.at("empty"), "");
  EXPECT_EQ(via_unix.query.size(), 4u);
  EXPECT_EQ(via_unix.headers.at("authorization"), "Bearer t0ken");
  EXPECT_EQ(via_unix.headers.at("x-trace"), "a");
  EXPECT_EQ(via_unix.headers.at("content-type"), "application/json");
  EXPECT_EQ(via_unix.body, R"({"gpus": 2})");
  EXPECT_TRUE(via_unix.via_unix_socket);
  ASSERT_TRUE(via_unix.peer_uid.has_value());
  EXPECT_EQ(*via_unix.peer_uid, getuid());
  ASSERT_TRUE(via_unix.peer_gid.has_value());
  EXPECT_EQ(*via_unix.peer_gid, getgid());
  ASSERT_TRUE(via_unix.peer_pid.has_value());
  EXPECT_EQ(*via_unix.peer_pid, getpid());

  const Request& via_tcp = seen[1];
  EXPECT_EQ(via_tcp.path, "/v1/gpus");
  EXPECT_TRUE(via_tcp.query.empty());
  EXPECT_FALSE(via_tcp.via_unix_socket);
  EXPECT_FALSE(via_tcp.peer_uid.has_value());
  EXPECT_FALSE(via_tcp.peer_gid.has_value());
  EXPECT_FALSE(via_tcp.peer_pid.has_value());
}

TEST_F(HttpServerTest, HandlerExceptionBecomesJson500) {
  StartServer(Options(), [](const Request&) -> Response {
    throw std::runtime_error("database is locked");
  });
  auto response = UnixClient().Request("GET", "/v1/jobs");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 500);
  EXPECT_EQ(response->headers["content-type"], "application/json");
  EXPECT_THAT(ErrorText(response->body), HasSubstr("database is locked"));
  Status status = StatusFromResponse(*response);
  EXPECT_EQ(status.code(), Code::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("database is locked"));

  // The server survives and keeps answering.
  auto again = TcpClient().Request("GET", "/v1/jobs");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 500);
}

TEST_F(HttpServerTest, OversizedBodyGets413) {
  ServerOptions options = Options();
  options.max_body_bytes = 1024;
  std::atomic<int> calls{0};
  StartServer(options, [&](const Request& request) {
    ++calls;
    return Echo(request);
  });

  auto fits = UnixClient().Request("POST", "/v1/jobs", std::string(1024, 'x'));
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->status, 200);

  auto too_big = UnixClient().Request("POST", "/v1/jobs", std::string(4096, 'x'));
  ASSERT_TRUE(too_big.ok()) << too_big.status().ToString();
  EXPECT_EQ(too_big->status, 413);
  EXPECT_THAT(ErrorText(too_big->body), HasSubstr("1024 bytes"));

  // Announced but never sent: rejected on the header alone.
  std::string reply = RawExchange(server_->tcp_port(),
                                  "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n"
                                  "Content-Length: 10000000\r\n\r\nabc");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 413"));
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(HttpServerTest, GarbageGets400) {
  std::atomic<int> calls{0};
  StartServer(Options(), [&](const Request& request) {
    ++calls;
    return Echo(request);
  });
  std::string reply = RawExchange(server_->tcp_port(), "this is not http at all\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(reply, HasSubstr("application/json"));
  EXPECT_THAT(reply, HasSubstr("\"error\""));

  reply = RawExchange(server_->tcp_port(), "GET /v1/jobs/%zz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(reply, HasSubstr("percent-encoding"));

  reply = RawExchange(server_->tcp_port(), "GET jobs HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400"));
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer(Options(), Echo);
  std::string reply = RawExchange(server_->tcp_port(),
                                  "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                  "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(reply, HasSubstr("GET /a"));
  EXPECT_THAT(reply, HasSubstr("GET /b"));
  EXPECT_LT(reply.find("GET /a"), reply.find("GET /b"));
}

TEST_F(HttpServerTest, ExpectContinueGetsInterimResponse) {
  StartServer(Options(), [](const Request& request) {
    Response response;
    response.body = "got " + request.body;
    return response;
  });
  net::io_context io;
  Tcp::socket socket(io);
  socket.connect(Tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->tcp_port()));
  net::write(socket, net::buffer(std::string("POST /v1/jobs HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 5\r\nExpect: 100-continue\r\n"
                                             "Connection: close\r\n\r\n")));
  std::string reply;
  net::read_until(socket, net::dynamic_buffer(reply), "\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 100 Continue"));
  net::write(socket, net::buffer(std::string("hello")));
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(reply), ec);
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr("got hello"));
}

TEST_F(HttpServerTest, HeadResponseHasNoBody) {
  StartServer(Options(), Echo);
  std::string reply = RawExchange(server_->tcp_port(),
                                  "HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(reply, HasSubstr("Content-Length: 7"));
  EXPECT_THAT(reply, Not(HasSubstr("HEAD /a")));
}

TEST_F(HttpServerTest, StaleSocketFileIsReplaced) {
  // A socket file nobody listens on, as a killed daemon leaves behind.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path_.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
  ASSERT_TRUE(std::filesystem::exists(socket_path_));

  StartServer(Options(), Echo);
  auto response = UnixClient().Request("GET", "/v1/health");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
}

TEST_F(HttpServerTest, SecondServerOnSameSocketIsRefused) {
  StartServer(Options(), Echo);
  ServerOptions second = Options();
  second.tcp_port = -1;
  auto refused = Server::Start(second, Echo);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("another gpuherd daemon is listening on " + socket_path_));

  // The first server keeps its socket.
  auto response = UnixClient().Request("GET", "/v1/health");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
}

TEST_F(HttpServerTest, RegularFileAtSocketPathIsLeftAlone) {
  { std::ofstream(socket_path_) << "precious"; }
  auto refused = Server::Start(Options(), Echo);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("is not a socket"));
  EXPECT_TRUE(std::filesystem::is_regular_file(socket_path_));
}

TEST_F(HttpServerTest, PortInUseIsRefused) {
  StartServer(Options(), Echo);
  ServerOptions second;
  second.tcp_port = server_->tcp_port();
  auto refused = Server::Start(second, Echo);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("port " + std::to_string(server_->tcp_port()) + " on 127.0.0.1"));
  EXPECT_THAT(refused.status().message(), HasSubstr("already in use"));
}

TEST_F(HttpServerTest, BadOptionsAreRejected) {
  ServerOptions none;
  none.tcp_port = -1;
  EXPECT_EQ(Server::Start(none, Echo).status().code(), Code::kInvalidArgument);
  ServerOptions no_threads = Options();
  no_threads.threads = 0;
  EXPECT_EQ(Server::Start(no_threads, Echo).status().code(), Code::kInvalidArgument);
  ServerOptions long_path;
  long_path.unix_path = dir_ + "/" + std::string(200, 's');
  auto refused = Server::Start(long_path, Echo);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("longer than"));
}

TEST_F(HttpServerTest, BadConnectionLimitsAreRejected) {
  ServerOptions reserve_too_big = Options();
  reserve_too_big.limits.total = 8;
  reserve_too_big.limits.reserved = 8;
  EXPECT_EQ(Server::Start(reserve_too_big, Echo).status().code(), Code::kInvalidArgument);
  ServerOptions negative = Options();
  negative.limits.per_user = -1;
  EXPECT_EQ(Server::Start(negative, Echo).status().code(), Code::kInvalidArgument);
  ServerOptions no_head_timeout = Options();
  no_head_timeout.head_timeout = 0;
  EXPECT_EQ(Server::Start(no_head_timeout, Echo).status().code(), Code::kInvalidArgument);
}

TEST_F(HttpServerTest, PerUserLimitOnUnixSocketAnswers503AndFreesSlotsOnClose) {
  ServerOptions options = Options();
  options.limits.per_user = 3;
  StartServer(options, Echo);
  std::vector<std::unique_ptr<UnixSocket>> held;
  for (int i = 0; i < 3; ++i) held.push_back(IdleUnix());
  ASSERT_TRUE(OpenBecomes(3));

  auto over = IdleUnix();
  std::string reply = ReadToEnd(*over);  // the server closes it at once
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(reply, HasSubstr("Connection: close"));
  std::string body = reply.substr(reply.find("\r\n\r\n") + 4);
  EXPECT_THAT(ErrorText(body), HasSubstr("uid " + std::to_string(getuid()) + " already holds 3, the limit per user"));
  // The client reads the 503 as a status, with the message.
  auto refused = UnixClient().Request("GET", "/x");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(ErrorText(refused->body), HasSubstr("the limit per user"));
  ConnectionStats stats = server_->connection_stats();
  EXPECT_EQ(stats.refused_per_user, 2u);
  EXPECT_EQ(stats.refused_total, 0u);
  EXPECT_EQ(stats.open, 3);
  // TCP is counted apart from the uid.
  auto tcp = TcpClient().Request("GET", "/over-tcp");
  ASSERT_TRUE(tcp.ok()) << tcp.status().ToString();
  EXPECT_EQ(tcp->status, 200);

  held.pop_back();  // closing one gives its slot back
  ASSERT_TRUE(OpenBecomes(2));
  auto served = UnixClient().Request("GET", "/again");
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(served->body, "GET /again");
  EXPECT_EQ(server_->connection_stats().refused_per_user, 2u);
}

TEST_F(HttpServerTest, PerAddressLimitOverTcp) {
  ServerOptions options = Options();
  options.limits.per_address = 2;
  StartServer(options, Echo);
  auto first = IdleTcp();
  auto second = IdleTcp();
  ASSERT_TRUE(OpenBecomes(2));
  auto over = IdleTcp();
  std::string reply = ReadToEnd(*over);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(reply, HasSubstr("127.0.0.1 already holds 2, the limit per address"));
  EXPECT_EQ(server_->connection_stats().refused_per_address, 1u);
  // The unix socket is counted by uid, apart from the address.
  auto over_unix = UnixClient().Request("GET", "/unix");
  ASSERT_TRUE(over_unix.ok()) << over_unix.status().ToString();
  EXPECT_EQ(over_unix->status, 200);

  first.reset();
  ASSERT_TRUE(OpenBecomes(1));
  auto served = TcpClient().Request("GET", "/tcp");
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_EQ(served->status, 200);
}

TEST_F(HttpServerTest, TotalLimitLeavesTheReserveToReservedUids) {
  ServerOptions options = Options();
  options.limits.per_user = 0;
  options.limits.per_address = 0;
  options.limits.total = 4;
  options.limits.reserved = 2;
  options.limits.reserved_for = {getuid()};  // this test's user plays root
  StartServer(options, Echo);
  // TCP has no uid: it gets the unreserved slots only.
  auto tcp1 = IdleTcp();
  auto tcp2 = IdleTcp();
  ASSERT_TRUE(OpenBecomes(2));
  auto over = IdleTcp();
  std::string reply = ReadToEnd(*over);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(reply, HasSubstr("limit of 4 open connections"));
  EXPECT_EQ(server_->connection_stats().refused_total, 1u);
  // The reserved uid still gets in over the socket, up to the total.
  auto admin = UnixClient().Request("GET", "/admin");
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  EXPECT_EQ(admin->status, 200);
  ASSERT_TRUE(OpenBecomes(2));
  auto unix1 = IdleUnix();
  auto unix2 = IdleUnix();
  ASSERT_TRUE(OpenBecomes(4));
  auto full = UnixClient().Request("GET", "/admin");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->status, 503);
  EXPECT_EQ(server_->connection_stats().refused_total, 2u);
}

TEST_F(HttpServerTest, TotalLimitRefusesUsersWithoutTheReserve) {
  ServerOptions options = Options();
  options.limits.per_user = 0;
  options.limits.total = 3;
  options.limits.reserved = 1;
  options.limits.reserved_for = {getuid() + 1};  // someone else is the admin
  StartServer(options, Echo);
  auto a = IdleUnix();
  auto b = IdleUnix();
  ASSERT_TRUE(OpenBecomes(2));
  auto refused = UnixClient().Request("GET", "/x");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(ErrorText(refused->body), HasSubstr("the last 1 kept for admins"));
  EXPECT_EQ(server_->connection_stats().refused_total, 1u);
}

TEST_F(HttpServerTest, SilentConnectionIsClosedAfterTheHeadTimeout) {
  ServerOptions options = Options();
  options.head_timeout = 200;
  StartServer(options, Echo);
  auto silent = IdleUnix();
  ASSERT_TRUE(OpenBecomes(1));
  auto start = Clock::now();
  EXPECT_EQ(ReadToEnd(*silent), "");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(OpenBecomes(0));
}

TEST_F(HttpServerTest, TricklingHeadIsClosedAfterTheHeadTimeout) {
  ServerOptions options = Options();
  options.head_timeout = 300;
  StartServer(options, Echo);
  auto slow = IdleTcp();
  std::atomic<bool> closed{false};
  std::thread reader([&] {
    ReadToEnd(*slow);
    closed = true;
  });
  // A byte every 50 ms never completes the head: the deadline is not moved.
  auto start = Clock::now();
  const std::string head = "GET /slow HTTP/1.1\r\nHost: localhost\r\nX-Padding: ";
  boost::system::error_code ec;
  for (size_t i = 0; !closed && Clock::now() - start < std::chrono::seconds(3); ++i) {
    char byte = i < head.size() ? head[i] : 'a';
    net::write(*slow, net::buffer(&byte, 1), ec);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader.join();
  EXPECT_TRUE(closed.load());
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_TRUE(OpenBecomes(0));
}

TEST_F(HttpServerTest, BodyMayTakeLongerThanTheHeadTimeout) {
  ServerOptions options = Options();
  options.head_timeout = 100;
  StartServer(options, [](const Request& request) {
    Response response;
    response.body = request.body;
    return response;
  });
  auto socket = IdleTcp();
  net::write(*socket, net::buffer(std::string("POST /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                              "Content-Length: 5\r\n\r\nhe")));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  net::write(*socket, net::buffer(std::string("llo")));
  std::string reply = ReadToEnd(*socket);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(reply, HasSubstr("\r\n\r\nhello"));
}

TEST_F(HttpServerTest, ConcurrentClientsAreAllAnswered) {
  std::atomic<int> calls{0};
  StartServer(Options(), [&](const Request& request) {
    ++calls;
    Response response;
    response.body = request.path + "?" + request.query.at("i");
    return response;
  });
  constexpr int kThreads = 8;
  constexpr int kRequests = 50;
  std::atomic<int> good{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client = t % 2 == 0 ? UnixClient() : TcpClient();
      for (int i = 0; i < kRequests; ++i) {
        std::string path = "/t" + std::to_string(t);
        auto response = client.Request("GET", path + "?i=" + std::to_string(i));
        if (!response.ok()) {
          failures[t] = response.status().ToString();
          continue;
        }
        if (response->status == 200 && response->body == path + "?" + std::to_string(i)) ++good;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& failure : failures) EXPECT_EQ(failure, "");
  EXPECT_EQ(good.load(), kThreads * kRequests);
  EXPECT_EQ(calls.load(), kThreads * kRequests);
}

TEST_F(HttpServerTest, StreamDeliversChunksInOrder) {
  ServerOptions options = Options();
  options.stream_poll_interval = 5;
  StartServer(options, [](const Request&) {
    Response response;
    response.content_type = "text/plain";
    response.body = "head\n";
    auto step = std::make_shared<int>(0);
    response.stream = [step](std::string* chunk) {
      int n = (*step)++;
      if (n % 3 == 1) return true;  // nothing ready this time
      if (n >= 30) return false;
      *chunk = "line " + std::to_string(n) + "\n";
      return true;
    };
    return response;
  });
  std::string expected = "head\n";
  for (int n = 0; n < 30; ++n) {
    if (n % 3 != 1) expected += "line " + std::to_string(n) + "\n";
  }

  for (Client client : {UnixClient(), TcpClient()}) {
    std::string received;
    Status status = client.Stream("/v1/jobs/1/logs?follow=1", {}, [&](std::string_view piece) {
      received.append(piece);
      return true;
    });
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(received, expected);
  }
}

TEST_F(HttpServerTest, StreamEndsWhenClientGoesAway) {
  ServerOptions options = Options();
  options.stream_poll_interval = 5;
  auto producer_alive = std::make_shared<std::atomic<bool>>(false);
  StartServer(options, [producer_alive](const Request&) {
    struct Sentinel {
      std::shared_ptr<std::atomic<bool>> alive;
      ~Sentinel() { *alive = false; }
    };
    *producer_alive = true;
    auto sentinel = std::make_shared<Sentinel>(Sentinel{producer_alive});
    Response response;
    response.stream = [sentinel, n = 0](std::string* chunk) mutable {
      if (++n % 2 == 0) *chunk = "tick\n";  // endless
      return true;
    };
    return response;
  });
  int pieces = 0;
  Status status = UnixClient().Stream("/v1/events?follow=1", {}, [&](std::string_view) {
    return ++pieces < 3;
  });
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(pieces, 3);
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (*producer_alive && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(*producer_alive) << "the server kept producing for a client that left";
}

TEST_F(HttpServerTest, StreamErrorStatusBecomesStatus) {
  StartServer(Options(), [](const Request&) { return ErrorResponse(404, "no job 9"); });
  bool called = false;
  Status status = UnixClient().Stream("/v1/jobs/9/logs", {}, [&](std::string_view) {
    called = true;
    return true;
  });
  EXPECT_EQ(status.code(), Code::kNotFound);
  EXPECT_EQ(status.message(), "no job 9");
  EXPECT_FALSE(called);
}

TEST_F(HttpServerTest, StopIsPromptWithIdleKeepAliveClient) {
  StartServer(Options(), Echo);
  net::io_context io;
  Tcp::socket idle(io);
  idle.connect(Tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->tcp_port()));
  net::write(idle, net::buffer(std::string("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")));
  std::string reply;
  net::read_until(idle, net::dynamic_buffer(reply), "GET /a");

  auto start = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(std::filesystem::exists(socket_path_));
  boost::system::error_code ec;
  char byte;
  idle.read_some(net::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec) << "the idle connection should have been closed";

  server_->Stop();  // a second Stop is harmless
}

TEST_F(HttpServerTest, StopFinishesRequestInFlight) {
  std::atomic<bool> entered{false};
  StartServer(Options(), [&](const Request& request) {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Echo(request);
  });
  Result<ClientResponse> response = Status(Code::kInternal, "not run");
  std::thread client([&] { response = UnixClient().Request("POST", "/v1/slow"); });
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->Stop();
  client.join();
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /v1/slow");
}

TEST_F(HttpServerTest, StopEndsStreams) {
  ServerOptions options = Options();
  options.stream_poll_interval = 5;
  std::atomic<bool> streaming{false};
  StartServer(options, [&](const Request&) {
    Response response;
    response.stream = [&streaming](std::string* chunk) {
      streaming = true;
      return true;  // follows forever, never has anything
    };
    return response;
  });
  Status status = Status(Code::kInternal, "not run");
  std::thread client([&] {
    status = UnixClient().Stream("/v1/events", {}, [](std::string_view) { return true; });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = Clock::now();
  server_->Stop();
  client.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST_F(HttpServerTest, UnixOnlyServerHasNoPort) {
  ServerOptions options = Options();
  options.tcp_port = -1;
  StartServer(options, Echo);
  EXPECT_EQ(server_->tcp_port(), -1);
  EXPECT_EQ(server_->unix_path(), socket_path_);
  auto response = UnixClient().Request("GET", "/x");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
}

TEST_F(HttpServerTest, ClientTimesOutOnSlowHandler) {
  StartServer(Options(), [](const Request& request) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return Echo(request);
  });
  auto start = Clock::now();
  auto response = UnixClient(/*timeout=*/200).Request("GET", "/v1/slow");
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1200));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Code::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("did not answer within 200ms"));
}

TEST(HttpClientTest, ErrorsWhenNothingListens) {
  std::string missing = "/tmp/gpuherd-no-such-dir/gpuherd.sock";
  auto response = Client(Endpoint{.unix_path = missing}).Request("GET", "/v1/health");
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), Code::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("cannot reach the gpuherd daemon at"));
  EXPECT_THAT(response.status().message(), HasSubstr(missing));
  EXPECT_THAT(response.status().message(), HasSubstr("is `gpuherd daemon` running?"));

  // A port that was just free: connection refused.
  int port = 0;
  {
    net::io_context io;
    Tcp::acceptor acceptor(io, Tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    port = acceptor.local_endpoint().port();
  }
  auto refused = Client(Endpoint{.unix_path = "", .host = "127.0.0.1", .port = port})
                     .Request("GET", "/v1/health");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("connection refused"));
  EXPECT_THAT(refused.status().message(), HasSubstr("127.0.0.1:" + std::to_string(port)));

  Status stream = Client(Endpoint{.unix_path = missing})
                      .Stream("/v1/events", {}, [](std::string_view) { return true; });
  EXPECT_EQ(stream.code(), Code::kUnavailable);
}

TEST(HttpClientTest, RejectsMalformedRequests) {
  Client client(Endpoint{.unix_path = "/tmp/unused.sock"});
  EXPECT_EQ(client.Request("GET", "no-slash").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client.Request("GET", "/a\r\nX: y").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client.Request("GET", "/a", "", {{"X-Bad", "a\nb"}}).status().code(),
            Code::kInvalidArgument);
}

TEST(HttpClientTest, StatusFromResponseFollowsHttpStatus) {
  EXPECT_TRUE(StatusFromResponse({.status = 204, .body = "", .headers = {}}).ok());
  Status not_found =
      StatusFromResponse({.status = 404, .body = R"({"error": "no job 7"})", .headers = {}});
  EXPECT_EQ(not_found.code(), Code::kNotFound);
  EXPECT_EQ(not_found.message(), "no job 7");
  EXPECT_EQ(StatusFromResponse({.status = 401, .body = "{}", .headers = {}}).code(),
            Code::kUnauthenticated);
  Status plain = StatusFromResponse({.status = 502, .body = "bad gateway\n", .headers = {}});
  EXPECT_EQ(plain.code(), Code::kInternal);
  EXPECT_EQ(plain.message(), "bad gateway");
  EXPECT_THAT(StatusFromResponse({.status = 400, .body = "", .headers = {}}).message(),
              HasSubstr("HTTP 400"));
}

}  // namespace
}  // namespace gpuherd::http
