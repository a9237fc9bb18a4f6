#include "exec/slurm.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/command_runner.h"

namespace gpuherd::exec::slurm {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

BatchRequest Request() {
  BatchRequest r;
  r.argv = {"python3", "train.py", "--lr", "it's 0.1"};
  r.cwd = "/shared/runs/3";
  r.env = {{"LR", "0.1"}};
  r.gpu_twentieths = 40;
  r.cpus = 4;
  r.mem_bytes = 8ull << 30;
  r.time_limit = 90 * kMinuteMs + 1;
  r.checkpoint_grace = 120 * kSecondMs;
  r.name = "sweep/train[lr=0.1]";
  r.comment = "gpuherd pipeline=sweep node=train[lr=0.1] attempt=1";
  r.checkpoint_dir = "/shared/runs/3/.checkpoints/train/0";
  r.prior_attempts = 1;
  return r;
}

SlurmOptions Site() {
  SlurmOptions o;
  o.partition = "gpu";
  o.account = "lab";
  o.sbatch_args = {"--qos=high"};
  o.shared_dir = "/shared/gpuherd";
  return o;
}

TEST(SbatchArgsTest, ResourcesSignalRequeueAndFilesFollowTheSpec) {
  auto a = SbatchArgs(Request(), Site());
  EXPECT_EQ(a.front(), "sbatch");
  EXPECT_THAT(a, Contains("--parsable"));
  EXPECT_THAT(a, Contains("--job-name=sweep/train[lr=0.1]"));
  EXPECT_THAT(a, Contains("--comment=gpuherd pipeline=sweep node=train[lr=0.1] attempt=1"));
  EXPECT_THAT(a, Contains("--partition=gpu"));
  EXPECT_THAT(a, Contains("--account=lab"));
  EXPECT_THAT(a, Contains("--gres=gpu:2"));
  EXPECT_THAT(a, Contains("--cpus-per-task=4"));
  EXPECT_THAT(a, Contains("--mem=8192M"));
  EXPECT_THAT(a, Contains("--time=0-01:31:00"));  // rounded up to the minute
  EXPECT_THAT(a, Contains("--signal=B:USR1@120"));
  EXPECT_THAT(a, Contains("--requeue"));
  EXPECT_THAT(a, Contains("--output=/shared/gpuherd/job-%j.out"));
  EXPECT_THAT(a, Contains("--error=/shared/gpuherd/job-%j.err"));
  EXPECT_EQ(a.back(), "--qos=high");  // the site's own come last
}

TEST(SbatchArgsTest, AFractionAsksForItsShareOfShardsAndTheSignalComesAtLeastAMinuteEarly) {
  BatchRequest r = Request();
  r.gpu_twentieths = 6;  // 0.3 GPU
  r.cpus = 0;
  r.mem_bytes = 0;
  r.time_limit = 0;
  r.checkpoint_grace = 10 * kSecondMs;
  SlurmOptions o = Site();
  o.shards_per_gpu = 40;
  auto a = SbatchArgs(r, o);
  EXPECT_THAT(a, Contains("--gres=shard:12"));
  EXPECT_THAT(a, Contains("--cpus-per-task=1"));
  EXPECT_THAT(a, Contains("--signal=B:USR1@60"));
  for (const std::string& arg : a) {
    EXPECT_THAT(arg, Not(HasSubstr("--mem=")));
    EXPECT_THAT(arg, Not(HasSubstr("--time=")));
    EXPECT_THAT(arg, Not(HasSubstr("--gres=gpu")));
  }
  r.gpu_twentieths = 0;
  for (const std::string& arg : SbatchArgs(r, o)) EXPECT_THAT(arg, Not(HasSubstr("--gres")));
}

// Runs the batch script with bash as Slurm would (its variables set) and
// returns what the command saw.
struct ScriptRun {
  int exit_code = 0;
  std::string env_dump, exit_file;
};

ScriptRun RunScript(const std::string& command, int restart_count, int prior_attempts) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("slurm_script_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  BatchRequest r;
  r.argv = {"/bin/sh", "-c", command};
  r.cwd = dir.string();
  r.env = {{"QUOTED", "a 'b' $c"}};
  r.name = "p/n";
  r.checkpoint_dir = (dir / "ckpt").string();
  r.prior_attempts = prior_attempts;
  SlurmOptions o;
  o.shared_dir = dir.string();
  auto runner = NewProcessRunner();
  CommandRequest c;
  c.argv = {"bash", "-s"};
  c.stdin_text = BatchScript(r, o);
  c.env = {{"SLURM_JOB_ID", "42"}, {"SLURM_RESTART_COUNT", std::to_string(restart_count)}};
  auto ran = runner->Run(c);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  ScriptRun out;
  out.exit_code = ran.ok() ? ran->exit_code : -1;
  out.env_dump = ran.ok() ? ran->out : "";
  std::ifstream exit_file(dir / "job-42.exit");
  std::getline(exit_file, out.exit_file);
  out.env_dump += fs::exists(dir / "ckpt") ? "ckpt made\n" : "";
  fs::remove_all(dir);
  return out;
}

TEST(BatchScriptTest, ExportsTheJobProtocolAndRecordsTheExitStatus) {
  ScriptRun first = RunScript("env; exit 3", /*restart_count=*/0, /*prior_attempts=*/0);
  EXPECT_EQ(first.exit_code, 3);
  EXPECT_EQ(first.exit_file, "3");
  EXPECT_THAT(first.env_dump, HasSubstr("GPUHERD_JOB_ID=42\n"));
  EXPECT_THAT(first.env_dump, HasSubstr("GPUHERD_RESTART_COUNT=0\n"));
  EXPECT_THAT(first.env_dump, Not(HasSubstr("GPUHERD_RESUME")));
  EXPECT_THAT(first.env_dump, HasSubstr("QUOTED=a 'b' $c\n"));
  EXPECT_THAT(first.env_dump, HasSubstr("GPUHERD_METRICS_FILE="));
  EXPECT_THAT(first.env_dump, HasSubstr("job-42.metrics.jsonl"));
  EXPECT_THAT(first.env_dump, HasSubstr("ckpt made"));

  // A requeued job of a node retried once before: both count.
  ScriptRun again = RunScript("env", /*restart_count=*/2, /*prior_attempts=*/1);
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.exit_file, "0");
  EXPECT_THAT(again.env_dump, HasSubstr("GPUHERD_RESTART_COUNT=3\n"));
  EXPECT_THAT(again.env_dump, HasSubstr("GPUHERD_RESUME=1\n"));
  EXPECT_THAT(again.env_dump, HasSubstr("GPUHERD_ATTEMPT=3\n"));
}

TEST(BatchScriptTest, ForwardsUsr1AndTermToTheCommand) {
  // The command waits for SIGUSR1 (it writes "checkpoint"), then for
  // SIGTERM, and exits 7; the script signals its own shell as Slurm would.
  const std::string command =
      "trap 'echo checkpoint; got=1' USR1; trap 'exit 7' TERM; "
      "kill -USR1 $PPID; i=0; while [ -z \"$got\" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; kill -TERM $PPID; "
      "i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done";
  ScriptRun run = RunScript(command, 0, 0);
  EXPECT_THAT(run.env_dump, HasSubstr("checkpoint"));
  EXPECT_EQ(run.exit_code, 7);
  EXPECT_EQ(run.exit_file, "7");
}

TEST(SlurmParseTest, SbatchAnswers) {
  EXPECT_EQ(*ParseSbatchOutput("123\n"), 123);
  EXPECT_EQ(*ParseSbatchOutput("sbatch: warning: x\n4567;cluster\n"), 4567);
  EXPECT_FALSE(ParseSbatchOutput("sbatch: error: Batch job submission failed").ok());
}

TEST(SlurmTest, FindsAJobByAWordOfItsComment) {
  const std::string out =
      "612|gpuherd pipeline=sweep node=train[lr=0.1] attempt=1 job=9000000000012\n"
      "613_2|gpuherd pipeline=sweep node=x attempt=1 job=9000000000013\n"
      "614|gpuherd pipeline=sweep node=y attempt=2 job=90000000000130\n"
      "garbage\n"
      "615|(null)\n";
  EXPECT_EQ(FindJobByComment(out, "job=9000000000012"), 612);
  EXPECT_EQ(FindJobByComment(out, "job=9000000000013"), 0);  // only an array task, and a longer id
  EXPECT_EQ(FindJobByComment(out, "job=90000000000130"), 614);
  EXPECT_EQ(FindJobByComment("", "job=1"), 0);
  EXPECT_EQ(CommentSqueueArgs().back(), "--format=%i|%k");
  EXPECT_FALSE(ParseSbatchOutput("").ok());
}

TEST(SlurmParseTest, SqueueLinesRecordedFromSlurm2205) {
  const std::string out =
      "101|RUNNING|None|localhost\n"
      "102|PENDING|Resources|\n"
      "103_4|RUNNING|None|node7\n"
      "104|COMPLETED|None|localhost\n"
      "garbage\n";
  auto e = ParseSqueue(out);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, 101);
  EXPECT_EQ(e[0].state, "RUNNING");
  EXPECT_EQ(e[0].nodes, "localhost");
  EXPECT_EQ(e[1].reason, "Resources");
  EXPECT_EQ(e[2].id, 104);
  auto args = SqueueArgs({101, 102});
  EXPECT_THAT(args, Contains("--jobs=101,102"));
  EXPECT_THAT(args, Contains("--states=all"));
}

TEST(SlurmParseTest, StatesAreClassified) {
  EXPECT_EQ(ClassifyState("RUNNING"), StateClass::kRunning);
  EXPECT_EQ(ClassifyState("COMPLETING"), StateClass::kRunning);
  EXPECT_EQ(ClassifyState("PENDING"), StateClass::kWaiting);
  EXPECT_EQ(ClassifyState("REQUEUED"), StateClass::kWaiting);
  EXPECT_EQ(ClassifyState("COMPLETED"), StateClass::kCompleted);
  EXPECT_EQ(ClassifyState("CANCELLED"), StateClass::kCancelled);
  EXPECT_EQ(ClassifyState("NODE_FAIL"), StateClass::kFailed);
  EXPECT_EQ(ClassifyState("TIMEOUT"), StateClass::kFailed);
}

TEST(SlurmParseTest, ScontrolShowNodeKeepsTheWholeReason) {
  const std::string out =
      "NodeName=gpu07 Arch=x86_64 CoresPerSocket=2\n"
      "   CPUAlloc=0 CPUTot=2 CPULoad=0.10\n"
      "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
      "   Reason=gpuherd: GPU 3 unhealthy (score 42) [root@2026-12-02T19:40:00]\n";
  auto f = ParseScontrolNode(out);
  EXPECT_EQ(f["NodeName"], "gpu07");
  EXPECT_EQ(f["State"], "IDLE+DRAIN");
  EXPECT_EQ(f["Reason"], "gpuherd: GPU 3 unhealthy (score 42)");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace gpuherd::exec::slurm
