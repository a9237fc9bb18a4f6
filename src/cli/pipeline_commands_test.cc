// The pipeline commands against a fake daemon: an HTTP server on the state
// directory's unix socket that answers as the API contract says and records
// what it was asked.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "http/server.h"

namespace gpuherd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using nlohmann::json;

constexpr TimeMs kStart = 1'700'000'000'000;

json Node(const std::string& id, const std::string& key, const std::string& state) {
  return {{"id", id}, {"key", key}, {"step", "train"}, {"matrix", {{"lr", id == "train[lr=0.1]" ? "0.1" : "0.3"}}},
          {"state", state}, {"attempts", 1}, {"job_id", key == "train/0" ? 11 : 12}, {"gpus", {0}},
          {"started", kStart}, {"ended", state == "completed" ? kStart + 36'000 : 0}, {"reason", ""},
          {"latest_metrics", {{"step", 2}, {"loss", 0.5}}}, {"best", json::object()}};
}

class PipelineCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuherd-pipecli-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    http::ServerOptions options;
    options.unix_path = dir_ + "/gpuherd.sock";
    options.tcp_port = -1;
    auto server = http::Server::Start(options, [this](const http::Request& r) { return Handle(r); });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server.value());
  }
  void TearDown() override {
    server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  // The run is running for the first `running_polls` GETs, then ends with `outcome`.
  http::Response Handle(const http::Request& r) {
    std::lock_guard lock(mu_);
    requests_.push_back(r.method + " " + r.target);
    http::Response response;
    if (r.method == "POST" && r.path == "/v1/pipelines") {
      posted_ = json::parse(r.body);
      if (!refusal_.empty()) return http::ErrorResponse(400, refusal_);
      response.status = 201;
      response.body = json{{"id", 7}, {"nodes", 2}}.dump();
    } else if (r.path == "/v1/pipelines/7") {
      bool done = ++polls_ > running_polls_;
      json p = {{"id", 7}, {"name", "toy"}, {"state", done ? outcome_ : "running"},
                {"outcome", done ? outcome_ : ""}, {"created", kStart}, {"finished", done ? kStart + 60'000 : 0},
                {"run_dir", dir_ + "/run"}, {"params", {{"steps", "2"}}},
                {"nodes", {Node("train[lr=0.3]", "train/0", done ? "completed" : "running"),
                           Node("train[lr=0.1]", "train/1", done ? "completed" : "waiting")}}};
      response.body = p.dump();
    } else if (r.path == "/v1/pipelines/7/metrics") {
      json lines = json::array();
      for (int step = 1; step <= 2; ++step) {
        lines.push_back({{"node", "train[lr=0.3]"}, {"attempt", 1}, {"step", step}, {"time", kStart + step},
                         {"values", {{"loss", 1.0 / step}}}});
      }
      response.body = json{{"metrics", lines}}.dump();
    } else if (r.path == "/v1/jobs/11" || r.path == "/v1/jobs/12") {
      response.body = json{{"id", 11}, {"gpu_twentieths", 10}}.dump();
    } else if (r.path == "/v1/pipelines") {
      response.body = json{{"pipelines", json::array()}}.dump();
    } else if (r.method == "POST" && r.path == "/v1/pipelines/7/cancel") {
      response.body = json{{"state", "cancelled"}}.dump();
    } else {
      response = http::ErrorResponse(404, "no pipeline run " + r.path);
    }
    return response;
  }

  // Runs `gpuherd --home DIR args...` in this process; stdout is captured.
  int Run(std::vector<std::string> args) {
    CLI::App app{"gpuherd"};
    app.require_subcommand(1);
    app.fallthrough();
    CommandContext ctx;
    ctx.home = dir_;
    AddRunCommand(app, &ctx);
    AddPipelineCommands(app, &ctx);
    AddReportCommand(app, &ctx);
    std::vector<std::string> argv_storage = {"gpuherd"};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    std::fflush(stdout);
    const std::string capture = dir_ + "/stdout";
    int saved = ::dup(STDOUT_FILENO);
    FILE* file = std::fopen(capture.c_str(), "w");
    ::dup2(::fileno(file), STDOUT_FILENO);
    int code = 0;
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
      code = ctx.exit_code;
    } catch (const CLI::ParseError& e) {
      code = 2;
    }
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
    std::fclose(file);
    out_ = ReadFile(capture);
    return code;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string WritePipeline(const std::string& text) {
    std::string path = dir_ + "/p.yaml";
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
  std::unique_ptr<http::Server> server_;
  std::mutex mu_;
  std::vector<std::string> requests_;
  json posted_;
  int polls_ = 0;
  int running_polls_ = 0;
  std::string outcome_ = "succeeded";
  std::string refusal_;  // the daemon's 400 to POST /v1/pipelines, when set
  std::string out_;
};

constexpr const char* kPipeline = R"(name: toy
params: {steps: 2}
steps:
  train:
    matrix: {lr: [0.3, 0.1]}
    run: python3 train.py --lr ${{ matrix.lr }} --steps ${{ params.steps }}
)";

TEST_F(PipelineCommandsTest, RunSubmitsTheFileAndPrintsTheId) {
  std::string path = WritePipeline(kPipeline);
  EXPECT_EQ(Run({"run", path, "-p", "steps=5"}), 0);
  EXPECT_EQ(out_, "7\n");
  EXPECT_EQ(posted_["yaml"], kPipeline);
  EXPECT_EQ(posted_["source"], path);
  EXPECT_EQ(posted_["base_dir"], dir_);
  EXPECT_EQ(posted_["params"], json({{"steps", "5"}}));
}

// The daemon checks the file (its errors name the file and line); the CLI
// sends it unexpanded and exits 2 on the refusal, printing no id.
TEST_F(PipelineCommandsTest, InvalidFileIsCheckedByTheDaemonAndExitsTwo) {
  const std::string bad = "name: toy\nsteps:\n  train: {run: x, needs: [nothing]}\n";
  const std::string path = WritePipeline(bad);
  refusal_ = "p.yaml:3: step 'train' needs 'nothing', which is not a step";
  EXPECT_EQ(Run({"run", path}), 2);
  EXPECT_EQ(out_, "");
  EXPECT_THAT(requests_, ::testing::ElementsAre("POST /v1/pipelines"));
  EXPECT_EQ(posted_["yaml"], bad);
  EXPECT_EQ(posted_["source"], path);
}

// What only the CLI can see is still checked before anything is sent.
TEST_F(PipelineCommandsTest, UnreadableFileAndMalformedOverrideExitTwoWithoutSubmitting) {
  EXPECT_EQ(Run({"run", dir_ + "/missing.yaml"}), 2);
  EXPECT_EQ(Run({"run", WritePipeline(kPipeline), "-p", "steps"}), 2);
  EXPECT_THAT(requests_, IsEmpty());
}

TEST_F(PipelineCommandsTest, WaitFollowsTheRunAndExitsByOutcome) {
  running_polls_ = 2;
  EXPECT_EQ(Run({"run", WritePipeline(kPipeline), "--wait"}), 0);
  EXPECT_THAT(out_, StartsWith("7\n"));
  EXPECT_THAT(out_, HasSubstr("train[lr=0.3] running on GPU 0"));
  EXPECT_THAT(out_, HasSubstr("train[lr=0.3] completed after 36s, step 2 loss=0.5"));
  EXPECT_THAT(out_, HasSubstr("pipeline 7 succeeded"));
  EXPECT_EQ(polls_, 3);

  polls_ = 0;
  outcome_ = "failed";
  EXPECT_EQ(Run({"run", WritePipeline(kPipeline), "--wait"}), 1);
  EXPECT_THAT(out_, HasSubstr("pipeline 7 did not succeed"));
}

TEST_F(PipelineCommandsTest, ShowAndCancel) {
  EXPECT_EQ(Run({"pipeline", "show", "7"}), 0);
  EXPECT_THAT(out_, HasSubstr("pipeline 7 toy: succeeded, 2/2 done"));
  EXPECT_THAT(out_, HasSubstr("params: steps=2"));
  EXPECT_THAT(out_, HasSubstr("train[lr=0.3]  completed   11  0"));  // its job, for `gpuherd logs 11`
  EXPECT_EQ(Run({"pipeline", "cancel", "7"}), 0);
  EXPECT_EQ(out_, "pipeline 7: cancelled\n");
  EXPECT_EQ(Run({"pipeline", "show", "8"}), 1);
}

TEST_F(PipelineCommandsTest, ListingAsksForAStateOfAnyAge) {
  EXPECT_EQ(Run({"pipelines"}), 0);
  EXPECT_EQ(Run({"pipelines", "--state", "failed"}), 0);
  EXPECT_EQ(Run({"pipelines", "--state", "stopped"}), 2);  // not a run's state: refused before asking
  EXPECT_THAT(requests_, ::testing::ElementsAre("GET /v1/pipelines?all=0", "GET /v1/pipelines?all=0&state=failed"));
}

TEST_F(PipelineCommandsTest, ReportCsvUsesTheJobsGpuShare) {
  EXPECT_EQ(Run({"report", "7", "--format", "csv"}), 0);
  // train/0: 0.5 GPU for 36 s = 0.005 GPU-hours; loss 1 then 0.5.
  EXPECT_THAT(out_, HasSubstr("train[lr=0.3],train/0,train,completed,1,0.3,36,0.5,0.005,0.5,0.5\n"));
}

TEST_F(PipelineCommandsTest, ReportHtmlGoesToTheRunFolder) {
  std::filesystem::create_directories(dir_ + "/run");
  EXPECT_EQ(Run({"report", "7"}), 0);
  EXPECT_EQ(out_, dir_ + "/run/report.html\n");
  EXPECT_THAT(ReadFile(dir_ + "/run/report.html"), HasSubstr("\"curves\":{\"loss\":[[1.0,2.0],[1.0,0.5]]}"));
}

}  // namespace
}  // namespace gpuherd::cli
