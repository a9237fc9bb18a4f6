#include "daemon/mps_control.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

extern char** environ;

namespace gpuherd::daemon {
namespace {

std::string FindInPath(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = (end == begin ? "." : dirs.substr(begin, end - begin)) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

class NvidiaMpsControl : public MpsControl {
 public:
  NvidiaMpsControl(std::string program, std::string root) : program_(std::move(program)), root_(std::move(root)) {}
  ~NvidiaMpsControl() override { Shutdown(); }

  std::string Dir(int gpu, const char* what) const { return fmt::format("{}/{}/{}", root_, gpu, what); }

  std::vector<std::string> Env(int gpu, const std::string& uuid) const {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "CUDA_", 5) != 0) env.emplace_back(*e);
    }
    env.push_back("CUDA_VISIBLE_DEVICES=" + uuid);
    env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + Dir(gpu, "pipe"));
    env.push_back("CUDA_MPS_LOG_DIRECTORY=" + Dir(gpu, "log"));
    return env;
  }

  // Runs the control program for `gpu` with `args`, `input` on its stdin;
  // returns its exit status or a description of why it did not run.
  Result<int> Run(int gpu, const std::string& uuid, const std::vector<std::string>& args, const std::string& input) {
    std::vector<std::string> env_text = Env(gpu, uuid);
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_text = {program_};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, program_.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    if (rc == 0 && !input.empty() && write(in[1], input.data(), input.size()) < 0) {
      // The program may not read; its exit status says whether it worked.
    }
    close(in[1]);
    if (rc != 0) return FailedPrecondition(fmt::format("cannot run {}: {}", program_, std::strerror(rc)));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  Status Start(const std::vector<std::string>& uuids) {
    for (int gpu = 0; gpu < static_cast<int>(uuids.size()); ++gpu) {
      std::error_code ec;
      for (const char* what : {"pipe", "log"}) {
        std::filesystem::create_directories(Dir(gpu, what), ec);
        // Jobs of every user reach the pipes; MPS itself checks who connects.
        if (ec || chmod(Dir(gpu, what).c_str(), 0755) != 0) {
          return FailedPrecondition(fmt::format("cannot create {}: {}", Dir(gpu, what), ec ? ec.message() : std::strerror(errno)));
        }
      }
      auto status = Run(gpu, uuids[gpu], {"-d"}, "");
      if (!status.ok()) return status.status();
      if (*status != 0) {
        return FailedPrecondition(fmt::format("{} -d exited with status {} for GPU {} (logs in {})", program_, *status,
                                              gpu, Dir(gpu, "log")));
      }
      started_.emplace_back(gpu, uuids[gpu]);
    }
    return Status::Ok();
  }

  std::map<std::string, std::string> JobEnv(int gpu, uint64_t mem_bytes) const override {
    return {{"CUDA_MPS_PIPE_DIRECTORY", Dir(gpu, "pipe")},
            {"CUDA_MPS_LOG_DIRECTORY", Dir(gpu, "log")},
            {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", fmt::format("0={}M", mem_bytes >> 20)}};
  }

  void Shutdown() override {
    for (const auto& [gpu, uuid] : started_) (void)Run(gpu, uuid, {}, "quit\n");
    started_.clear();
  }

 private:
  std::string program_, root_;
  std::vector<std::pair<int, std::string>> started_;
};

}  // namespace

Result<std::unique_ptr<MpsControl>> StartMpsControl(const std::string& home, const std::vector<std::string>& gpu_uuids,
                                                    const std::string& program) {
  std::string found = FindInPath(program);
  if (found.empty()) {
    return FailedPrecondition("--mps needs NVIDIA's " + program +
                              " (the driver's MPS utilities) on PATH; it is not there. Without --mps, fractions "
                              "time-share the GPU's SMs");
  }
  auto control = std::make_unique<NvidiaMpsControl>(found, home + "/mps");
  Status started = control->Start(gpu_uuids);
  if (!started.ok()) {
    control->Shutdown();
    return started;
  }
  return std::unique_ptr<MpsControl>(std::move(control));
}

}  // namespace gpuherd::daemon
