// gpuherd run FILE [-p key=value]... [--wait] [--json]: sends a pipeline file
// to the daemon (which checks and expands it), and with --wait follows it to the end.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/pipeline_format.h"
#include "cli/table.h"
#include "core/yaml.h"
#include "pipeline/plan.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

// Exit codes: validation errors are usage errors (2), as in CLI11's parser;
// Ctrl-C during --wait leaves with 130, the shell's code for SIGINT.
constexpr int kInvalidExit = 2;
constexpr int kInterruptedExit = 130;
constexpr DurationMs kPollMs = 1000;

volatile std::sig_atomic_t interrupted = 0;
void OnInterrupt(int) { interrupted = 1; }

TimeMs WallNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The file is read once, here, and sent as it is: the daemon parses and
// expands it (its errors name the file and line, as `source` is the path
// given here). Only what the daemon cannot see is checked here: that the
// file can be read, and that each -p is key=value.
Result<json> Prepare(const std::string& path, const std::vector<std::string>& overrides) {
  auto text = ReadTextFile(path, YamlLimits().max_bytes);
  if (!text.ok()) return InvalidArgument(text.status().Annotate("cannot read the pipeline file").message());
  std::map<std::string, std::string> params;
  for (const std::string& o : overrides) {
    auto kv = pipeline::ParseOverride(o);
    if (!kv.ok()) return InvalidArgument(fmt::format("-p {}: {}", o, kv.status().message()));
    params[kv->first] = kv->second;
  }
  // Relative paths in the file (scripts, data) are the file's folder's.
  std::error_code ec;
  const std::string base_dir = std::filesystem::absolute(path, ec).parent_path().lexically_normal().string();
  if (ec) return InvalidArgument(fmt::format("cannot resolve the folder of {}: {}", path, ec.message()));
  return json{{"yaml", std::move(text).value()}, {"source", path}, {"base_dir", base_dir}, {"params", params}};
}

// Redraws the progress table in place on a terminal; elsewhere prints one
// line per change, which reads well in a log.
class ProgressView {
 public:
  explicit ProgressView(bool color) : tty_(::isatty(STDOUT_FILENO)), color_(color) {}

  void Show(const json& pipeline, TimeMs now) {
    if (tty_) {
      std::string frame = ProgressTable(pipeline, now, color_);
      // Back to the first line of the previous frame, then clear below it.
      if (lines_ > 0) std::printf("\x1b[%dF\x1b[J", lines_);
      std::fputs(frame.c_str(), stdout);
      lines_ = static_cast<int>(std::count(frame.begin(), frame.end(), '\n'));
    } else {
      for (const std::string& line : ProgressChanges(previous_, pipeline, now)) {
        std::printf("%s %s\n", FormatTimeUtc(now).c_str(), Printable(line).c_str());
      }
      previous_ = pipeline;
    }
    std::fflush(stdout);
  }

  // The last frame in full where lines were printed instead.
  void Finish(const json& pipeline, TimeMs now) {
    if (!tty_) std::fputs(ProgressTable(pipeline, now, color_).c_str(), stdout);
  }

 private:
  bool tty_;
  bool color_;
  int lines_ = 0;
  json previous_;
};

// Follows the run until it ends or Ctrl-C; returns the exit code.
int Wait(CommandContext* ctx, DaemonClient& client, int64_t id, bool json_output) {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;  // no SA_RESTART: a sleep ends at once
  sigemptyset(&action.sa_mask);
  struct sigaction previous = {};
  ::sigaction(SIGINT, &action, &previous);
  ProgressView view(ctx->color());
  const std::string target = "/v1/pipelines/" + std::to_string(id);
  json pipeline;
  while (!interrupted) {
    auto reply = client.Get(target);
    if (!reply.ok()) {
      ::sigaction(SIGINT, &previous, nullptr);
      ctx->Fail(reply.status());
      return 1;
    }
    pipeline = *reply;
    TimeMs now = pipeline.value("now", WallNow());
    if (!json_output) view.Show(pipeline, now);
    if (PipelineFinished(pipeline)) {
      ::sigaction(SIGINT, &previous, nullptr);
      if (json_output) {
        std::printf("%s\n", pipeline.dump(2).c_str());
      } else {
        view.Finish(pipeline, now);
        std::printf("pipeline %lld %s; the report: gpuherd report %lld\n", static_cast<long long>(id),
                    PipelineSucceeded(pipeline) ? "succeeded" : "did not succeed", static_cast<long long>(id));
      }
      return PipelineSucceeded(pipeline) ? 0 : 1;
    }
    for (DurationMs slept = 0; slept < kPollMs && !interrupted; slept += 100) ::usleep(100'000);
  }
  ::sigaction(SIGINT, &previous, nullptr);
  std::fprintf(stderr,
               "\npipeline %lld keeps running. Follow it: gpuherd pipeline show %lld; "
               "cancel it: gpuherd pipeline cancel %lld\n",
               static_cast<long long>(id), static_cast<long long>(id), static_cast<long long>(id));
  return kInterruptedExit;
}

}  // namespace

void AddRunCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::string file;
    std::vector<std::string> params;
    bool wait = false, json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("run", "Run a pipeline file: a graph of jobs with sweeps and retries");
  cmd->add_option("file", f->file, "Pipeline YAML (see examples/pipelines/README.md)")->required();
  cmd->add_option("-p,--param", f->params, "Override a parameter: key=value (repeatable)");
  cmd->add_flag("--wait", f->wait, "Show progress until the run ends; exit 0 if it succeeded, 1 if not");
  cmd->add_flag("--json", f->json, "Print {\"id\": N, \"nodes\": M} (with --wait: the finished run)");
  cmd->callback([ctx, f] {
    auto submission = Prepare(f->file, f->params);
    if (!submission.ok()) {
      ctx->Fail(submission.status());
      ctx->exit_code = kInvalidExit;
      return;
    }
    DaemonClient client(ctx->dir());
    auto reply = client.Post("/v1/pipelines", *submission);
    if (!reply.ok()) {
      if (reply.status().code() == Code::kUnavailable) {
        // The daemon checks the file: without one, nothing was checked.
        ctx->Fail(reply.status().Annotate(
            "no daemon answered, so " + f->file + " was neither checked nor run; start one with `gpuherd daemon`"));
        return;
      }
      ctx->Fail(reply.status());  // the daemon's message names the file and line
      if (reply.status().code() == Code::kInvalidArgument) ctx->exit_code = kInvalidExit;
      return;
    }
    int64_t id = reply->value("id", int64_t{0});
    if (f->json && !f->wait) {
      std::printf("%s\n", reply->dump().c_str());
      return;
    }
    if (!f->json) {
      // The id alone on stdout, so that ID=$(gpuherd run f.yaml) stays a
      // script's way to get it; what to do next is for the person.
      std::printf("%lld\n", static_cast<long long>(id));
      std::fflush(stdout);
      std::fputs(RunStartedLines(id, reply->value("nodes", int64_t{0})).c_str(), stderr);
    }
    if (f->wait) ctx->exit_code = Wait(ctx, client, id, f->json);
  });
}

}  // namespace gpuherd::cli
