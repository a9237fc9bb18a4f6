// The Slurm backend against a fake command runner that answers as Slurm
// 22.05 does (recorded squeue lines), on a fake loop: tasks the backend
// posts are run by the test, one poll at a time.
#include "daemon/slurm_backend.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/clock.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;

class FakeSlurm : public exec::CommandRunner {
 public:
  Result<exec::CommandResult> Run(const exec::CommandRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(request);
    exec::CommandResult r;
    const std::string& program = request.argv.front();
    if (program == "sbatch") {
      if (!sbatch_error_.empty()) {
        r.exit_code = 1;
        r.err = sbatch_error_;
      } else {
        r.out = std::to_string(next_id_++) + "\n";
      }
    } else if (program == "squeue") {
      r.out = squeue_;
      if (request.argv.back() == "--format=%i|%k") r.out = comments_;
      if (std::find(request.argv.begin(), request.argv.end(), "--format=%T|%r") != request.argv.end()) {
        r.out = squeue_.substr(squeue_.find('|') + 1);  // the state and reason columns
      }
    } else if (program == "sacct") {
      r.exit_code = 1;
      r.err = "sacct: error: Slurm accounting storage is disabled\n";
    }
    return r;
  }
  void SetSqueue(std::string out) {
    std::lock_guard<std::mutex> lock(mu_);
    squeue_ = std::move(out);
  }
  void SetComments(std::string out) {
    std::lock_guard<std::mutex> lock(mu_);
    comments_ = std::move(out);
  }
  void SetSbatchError(std::string err) {
    std::lock_guard<std::mutex> lock(mu_);
    sbatch_error_ = std::move(err);
  }
  std::vector<exec::CommandRequest> Calls(const std::string& program) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<exec::CommandRequest> out;
    for (const auto& c : calls_) {
      if (c.argv.front() == program) out.push_back(c);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<exec::CommandRequest> calls_;
  std::string squeue_, comments_, sbatch_error_;
  int64_t next_id_ = 500;
};

class SlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = fs::temp_directory_path() / ("slurm_backend_test_" + std::to_string(::getpid()));
    fs::remove_all(shared_);
    state_.clock = &clock_;
    SlurmBackendOptions options;
    options.site.shared_dir = shared_.string();
    options.site.partition = "gpu";
    options.poll_interval = 0;
    auto created = SlurmBackend::Create(&state_, &slurm_, options, [this](std::function<void()> task) {
      std::lock_guard<std::mutex> lock(mu_);
      posted_.push_back(std::move(task));
      cv_.notify_all();
    });
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    backend_ = std::move(created).value();
    backend_->SetStateListener([this](const sched::Job& job) { reports_.push_back(job); });
  }
  void TearDown() override {
    backend_.reset();
    fs::remove_all(shared_);
  }

  // Runs the next task the backend posted to the loop (a poll's result).
  void RunPosted() {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !posted_.empty(); }))
          << "no poll came back";
      task = std::move(posted_.front());
      posted_.pop_front();
    }
    task();
  }

  // Applies the poll in flight (made with the answer set before) once it
  // is back, and lets the next poll see `next_answer`.
  void Step(const std::string& next_answer) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !posted_.empty(); }))
          << "no poll came back";
    }
    slurm_.SetSqueue(next_answer);
    RunPosted();
  }

  sched::JobId Submit(const std::string& command, int prior_attempts = 0) {
    nlohmann::json spec = {{"command", {"sh", "-c", command}},
                           {"gpus", 1},
                           {"name", "sweep/train[lr=0.1]"},
                           {"labels", {{"gpuherd/pipeline", "sweep"}, {"gpuherd/node", "train[lr=0.1]"}}}};
    SubmitExtras extras;
    extras.checkpoint_dir = shared_.string() + "/ckpt";
    extras.prior_attempts = prior_attempts;
    Caller owner;
    owner.uid = 0;
    auto parsed = sched::ParseJobSpec(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto id = backend_->Submit(parsed.ok() ? *parsed : sched::JobSpec(), owner, extras, BackendOptions{});
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    backend_->AfterCommit(true);  // the daemon's turn committed
    return id.ok() ? *id : 0;
  }

  void WriteExit(int64_t slurm_id, int code) {
    std::ofstream(shared_ / ("job-" + std::to_string(slurm_id) + ".exit")) << code << "\n";
  }

  fs::path shared_;
  host::FakeClock clock_{1'000'000};
  DaemonState state_;
  FakeSlurm slurm_;
  std::unique_ptr<SlurmBackend> backend_;
  std::vector<sched::Job> reports_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> posted_;
};

TEST_F(SlurmBackendTest, AJobRunsIsRequeuedBySlurmRunsAgainAndCompletes) {
  slurm_.SetSqueue("500|PENDING|Resources|\n");
  const sched::JobId id = Submit("python3 train.py");
  EXPECT_GT(id, kSlurmJobIdBase);
  EXPECT_EQ(backend_->MetricsPath(id), "");  // sbatch has not answered yet
  RunPosted();  // sbatch answered: the first poll goes out
  auto sbatch = slurm_.Calls("sbatch");
  ASSERT_EQ(sbatch.size(), 1u);
  EXPECT_THAT(sbatch[0].argv, Contains("--gres=gpu:1"));
  EXPECT_THAT(sbatch[0].argv, Contains("--partition=gpu"));
  EXPECT_THAT(sbatch[0].argv, Contains("--comment=gpuherd pipeline=sweep node=train[lr=0.1] attempt=1 job=" +
                                       std::to_string(id)));
  EXPECT_THAT(sbatch[0].stdin_text, HasSubstr("'python3 train.py'"));
  EXPECT_EQ(backend_->MetricsPath(id), shared_.string() + "/job-500.metrics.jsonl");
  std::ifstream id_file(shared_ / "ids" / std::to_string(id));
  int64_t kept = 0;
  id_file >> kept;
  EXPECT_EQ(kept, 500);  // for a restarted daemon

  Step("500|RUNNING|None|node7\n");  // pending: nothing to report
  EXPECT_TRUE(reports_.empty());
  Step("500|FAILED|None|node7\n");  // running
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].state, sched::JobState::kRunning);
  EXPECT_EQ(reports_[0].attempt, 1);
  auto shown = backend_->Show(id);
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->nodes, "node7");
  EXPECT_EQ(shown->slurm_job_id, std::optional<int64_t>(500));

  // Slurm shows FAILED for a moment while it requeues a job: not an end yet.
  Step("500|PENDING|BeginTime|\n");
  ASSERT_EQ(reports_.size(), 1u);
  Step("500|RUNNING|None|node8\n");  // back in the queue: a node failed
  ASSERT_EQ(reports_.size(), 2u);
  EXPECT_EQ(reports_[1].state, sched::JobState::kPending);
  EXPECT_THAT(reports_[1].reason, HasSubstr("requeued by Slurm (BeginTime)"));

  WriteExit(500, 0);
  Step("");  // running again; then finished and forgotten by slurmctld
  ASSERT_EQ(reports_.size(), 3u);
  EXPECT_EQ(reports_[2].state, sched::JobState::kRunning);
  EXPECT_EQ(reports_[2].attempt, 2);
  RunPosted();  // not listed: maybe a moment's gap
  ASSERT_EQ(reports_.size(), 3u);
  RunPosted();  // not listed again: gone, its exit file says 0
  ASSERT_EQ(reports_.size(), 4u);
  EXPECT_EQ(reports_[3].state, sched::JobState::kCompleted);
  EXPECT_EQ(backend_->tracked(), 0u);
}

TEST_F(SlurmBackendTest, CancelSignalAndFailures) {
  slurm_.SetSqueue("500|RUNNING|None|n1\n501|RUNNING|None|n1\n502|PENDING|Priority|\n");
  const sched::JobId a = Submit("sleep 100");
  const sched::JobId b = Submit("exit 3");
  const sched::JobId c = Submit("true");
  // Three sbatch answers (each written to its id file first) and the polls
  // they start, which come back faster than the answers.
  for (int i = 0; i < 100000 && reports_.size() < 2; ++i) RunPosted();
  // Running jobs are reported; the pending one is not.
  ASSERT_EQ(reports_.size(), 2u);

  ASSERT_TRUE(backend_->Signal(a, SIGUSR1).ok());
  EXPECT_FALSE(backend_->Signal(c, SIGUSR1).ok());  // not running yet
  auto cancelled = backend_->Act(a, "cancel", Caller{});
  ASSERT_TRUE(cancelled.ok());
  EXPECT_FALSE(backend_->Act(a, "hold", Caller{}).ok());

  WriteExit(501, 3);
  slurm_.SetSqueue("500|CANCELLED|None|n1\n501|FAILED|NonZeroExitCode|n1\n");
  // The poll in flight may have seen the old answer or the new one.
  for (int i = 0; i < 100000 && backend_->tracked() > 0; ++i) RunPosted();
  std::map<sched::JobId, sched::Job> last;
  for (const auto& r : reports_) last[r.id] = r;
  EXPECT_EQ(last[a].state, sched::JobState::kCancelled);
  EXPECT_EQ(last[b].state, sched::JobState::kFailed);
  EXPECT_EQ(last[b].reason, "exited with code 3");
  // c left squeue without ever being seen running or writing an exit file.
  EXPECT_EQ(last[c].state, sched::JobState::kFailed);
  EXPECT_THAT(last[c].reason, HasSubstr("without an exit status"));

  // The signal and the cancel went to Slurm off the loop.
  backend_.reset();  // joins the command thread
  std::vector<std::vector<std::string>> scancels;
  for (const auto& call : slurm_.Calls("scancel")) scancels.push_back(call.argv);
  EXPECT_THAT(scancels, Contains(std::vector<std::string>{"scancel", "--batch", "--signal=USR1", "500"}));
  EXPECT_THAT(scancels, Contains(std::vector<std::string>{"scancel", "500"}));
}

TEST_F(SlurmBackendTest, ARestartRequeuesAndReleasesTheJobOnceItIsPending) {
  slurm_.SetSqueue("500|RUNNING|None|n1\n");
  const sched::JobId id = Submit("python3 train.py");
  RunPosted();  // sbatch answered
  Step("500|PENDING|BeginTime|\n");  // running; Slurm will hold it back after the requeue
  ASSERT_EQ(reports_.size(), 1u);
  auto state = backend_->Act(id, "requeue", Caller{});
  ASSERT_TRUE(state.ok());
  backend_.reset();  // joins the command thread
  std::vector<std::vector<std::string>> calls;
  for (const auto& call : slurm_.Calls("scontrol")) calls.push_back(call.argv);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], (std::vector<std::string>{"scontrol", "requeue", "500"}));
  EXPECT_EQ(calls[1], (std::vector<std::string>{"scontrol", "update", "jobid=500", "starttime=now"}));
}

TEST_F(SlurmBackendTest, ARefusedSubmissionSaysWhy) {
  slurm_.SetSbatchError("sbatch: error: invalid partition specified: gpu\n");
  sched::JobSpec spec;
  spec.argv = {"true"};
  spec.name = "p/n";
  auto id = backend_->Submit(spec, Caller{}, SubmitExtras{}, BackendOptions{});
  ASSERT_TRUE(id.ok());
  backend_->AfterCommit(true);
  RunPosted();
  ASSERT_EQ(reports_.size(), 1u);  // no start: it never ran
  EXPECT_EQ(reports_[0].state, sched::JobState::kFailed);
  EXPECT_THAT(reports_[0].reason, HasSubstr("invalid partition specified: gpu"));
}

TEST_F(SlurmBackendTest, ARecoveredJobIsPolledUntilItEnds) {
  slurm_.SetSqueue("");
  WriteExit(77, 1);
  const sched::JobId id = kSlurmJobIdBase + 1'000'000;
  std::ofstream(shared_ / "ids" / std::to_string(id)) << "77\n";
  auto recovered = backend_->Recover(id);
  ASSERT_TRUE(recovered.ok());
  EXPECT_FALSE(recovered->has_value());
  RunPosted();
  EXPECT_TRUE(reports_.empty());  // one miss is not enough
  RunPosted();
  ASSERT_FALSE(reports_.empty());
  EXPECT_EQ(reports_.back().state, sched::JobState::kFailed);
  EXPECT_EQ(reports_.back().reason, "exited with code 1");
  EXPECT_FALSE(backend_->Recover(5).ok());  // a local job's id
  // Stopped while sbatch ran, and squeue does not know the job either: failed.
  reports_.clear();
  auto cut = backend_->Recover(id + 1);
  ASSERT_TRUE(cut.ok());
  EXPECT_FALSE(cut->has_value());  // reported once squeue answered
  RunPosted();
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].state, sched::JobState::kFailed);
  EXPECT_THAT(reports_[0].reason, HasSubstr("cut short by a daemon restart"));
  // New ids come after the recovered ones.
  EXPECT_GT(Submit("true"), id + 1);
}

TEST_F(SlurmBackendTest, SbatchWaitsForTheCommitAndAFailedCommitSubmitsNothing) {
  sched::JobSpec spec;
  spec.argv = {"true"};
  spec.name = "p/n";
  auto first = backend_->Submit(spec, Caller{}, SubmitExtras{}, BackendOptions{});
  ASSERT_TRUE(first.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(slurm_.Calls("sbatch").empty());  // not before the turn is on record
  backend_->AfterCommit(true);
  RunPosted();  // sbatch's answer
  ASSERT_EQ(slurm_.Calls("sbatch").size(), 1u);
  EXPECT_THAT(slurm_.Calls("sbatch")[0].argv, Contains(HasSubstr("job=" + std::to_string(*first))));

  auto lost = backend_->Submit(spec, Caller{}, SubmitExtras{}, BackendOptions{});
  ASSERT_TRUE(lost.ok());
  auto cancelled = backend_->Submit(spec, Caller{}, SubmitExtras{}, BackendOptions{});
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(backend_->Act(*cancelled, "cancel", Caller{}).ok());
  reports_.clear();
  backend_->AfterCommit(false);  // the commit failed: neither is submitted
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(slurm_.Calls("sbatch").size(), 1u);
  ASSERT_EQ(reports_.size(), 2u);
  EXPECT_EQ(reports_[0].state, sched::JobState::kFailed);
  EXPECT_THAT(reports_[0].reason, HasSubstr("could not record it"));
  // A job cancelled before its turn committed is never submitted.
  auto again = backend_->Submit(spec, Caller{}, SubmitExtras{}, BackendOptions{});
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(backend_->Act(*again, "cancel", Caller{}).ok());
  reports_.clear();
  backend_->AfterCommit(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(slurm_.Calls("sbatch").size(), 1u);
  ASSERT_EQ(reports_.size(), 1u);
  EXPECT_EQ(reports_[0].state, sched::JobState::kCancelled);
}

TEST_F(SlurmBackendTest, AJobSubmittedJustBeforeARestartIsFoundByItsComment) {
  // sbatch took the job but the daemon stopped before writing the id file.
  const sched::JobId id = kSlurmJobIdBase + 2'000'000;
  slurm_.SetComments("611|gpuherd pipeline=p node=a attempt=1 job=" + std::to_string(id + 1) + "\n" +
                     "612|gpuherd pipeline=p node=b attempt=1 job=" + std::to_string(id) + "\n");
  slurm_.SetSqueue("612|RUNNING|None|node1\n");
  auto recovered = backend_->Recover(id);
  ASSERT_TRUE(recovered.ok());
  EXPECT_FALSE(recovered->has_value());
  RunPosted();  // the lookup's answer
  EXPECT_TRUE(reports_.empty());  // adopted, not failed
  std::ifstream ids(shared_ / "ids" / std::to_string(id));
  int64_t slurm_id = 0;
  ids >> slurm_id;
  EXPECT_EQ(slurm_id, 612);  // on record now for the next restart
  EXPECT_EQ(slurm_.Calls("sbatch").size(), 0u);  // never submitted twice
  // It is watched like any other: squeue says it runs.
  RunPosted();
  ASSERT_FALSE(reports_.empty());
  EXPECT_EQ(reports_.back().state, sched::JobState::kRunning);
}

}  // namespace
}  // namespace gpuherd::daemon
