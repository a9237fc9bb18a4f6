#include "exec/slurm.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <fmt/format.h>

namespace gpuherd::exec::slurm {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int64_t> ParseId(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// Slurm's D-HH:MM:SS, rounded up to whole minutes (its resolution).
std::string SlurmTime(DurationMs d) {
  int64_t minutes = std::max<int64_t>(1, (d + kMinuteMs - 1) / kMinuteMs);
  return fmt::format("{}-{:02}:{:02}:00", minutes / (24 * 60), (minutes / 60) % 24, minutes % 60);
}

}  // namespace

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string OutputFile(const SlurmOptions& o, int64_t id) { return fmt::format("{}/job-{}.out", o.shared_dir, id); }
std::string ErrorFile(const SlurmOptions& o, int64_t id) { return fmt::format("{}/job-{}.err", o.shared_dir, id); }
std::string ExitFile(const SlurmOptions& o, int64_t id) { return fmt::format("{}/job-{}.exit", o.shared_dir, id); }
std::string MetricsFile(const SlurmOptions& o, int64_t id) {
  return fmt::format("{}/job-{}.metrics.jsonl", o.shared_dir, id);
}

std::vector<std::string> SbatchArgs(const BatchRequest& r, const SlurmOptions& o) {
  std::vector<std::string> a = {"sbatch", "--parsable"};
  a.push_back("--job-name=" + r.name);
  if (!r.comment.empty()) a.push_back("--comment=" + r.comment);
  if (!o.partition.empty()) a.push_back("--partition=" + o.partition);
  if (!o.account.empty()) a.push_back("--account=" + o.account);
  if (r.gpu_twentieths >= 20) {
    a.push_back(fmt::format("--gres=gpu:{}", r.gpu_twentieths / 20));
  } else if (r.gpu_twentieths > 0) {
    // A twentieth of a GPU is a twentieth of its shards (at least one).
    a.push_back(fmt::format("--gres=shard:{}", std::max(1, r.gpu_twentieths * o.shards_per_gpu / 20)));
  }
  a.push_back(fmt::format("--cpus-per-task={}", std::max(1, r.cpus)));
  if (r.mem_bytes > 0) a.push_back(fmt::format("--mem={}M", std::max<uint64_t>(1, (r.mem_bytes + (1 << 20) - 1) >> 20)));
  if (r.time_limit > 0) a.push_back("--time=" + SlurmTime(r.time_limit));
  // The batch shell gets SIGUSR1 this long before the time limit and passes it
  // on: the job checkpoints before Slurm stops it. Slurm sends it up to 60 s
  // late, so the lead time is at least 60 s.
  a.push_back(fmt::format("--signal=B:USR1@{}", std::max<int64_t>(60, r.checkpoint_grace / kSecondMs)));
  // A node failure or preemption puts the job back in the queue; the script
  // then sees SLURM_RESTART_COUNT and the job resumes from its checkpoint.
  a.push_back("--requeue");
  a.push_back("--open-mode=append");
  a.push_back("--output=" + o.shared_dir + "/job-%j.out");
  a.push_back("--error=" + o.shared_dir + "/job-%j.err");
  if (!r.cwd.empty()) a.push_back("--chdir=" + r.cwd);
  for (const auto& extra : o.sbatch_args) a.push_back(extra);
  return a;
}

std::string BatchScript(const BatchRequest& r, const SlurmOptions& o) {
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# " << r.name << " (gpuherd)\n";
  for (const auto& [k, v] : r.env) s << "export " << k << "=" << ShellQuote(v) << "\n";
  s << "export GPUHERD_JOB_ID=\"$SLURM_JOB_ID\"\n"
    << "export GPUHERD_JOB_NAME=" << ShellQuote(r.name) << "\n"
    << "export GPUHERD_CHECKPOINT_DIR=" << ShellQuote(r.checkpoint_dir) << "\n"
    << "export GPUHERD_METRICS_FILE=" << ShellQuote(o.shared_dir) << "/job-\"$SLURM_JOB_ID\".metrics.jsonl\n"
    << "restarts=$(( " << r.prior_attempts << " + ${SLURM_RESTART_COUNT:-0} ))\n"
    << "export GPUHERD_RESTART_COUNT=$restarts GPUHERD_ATTEMPT=$(( ${SLURM_RESTART_COUNT:-0} + 1 ))\n"
    << "if (( restarts > 0 )); then export GPUHERD_RESUME=1; fi\n";
  if (r.gpu_twentieths > 0 && r.gpu_twentieths < 20) {
    s << "export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" << r.gpu_twentieths * 5 << "\n";
  }
  const std::string exit_file = ShellQuote(o.shared_dir) + "/job-\"$SLURM_JOB_ID\".exit";
  s << "exit_file=" << exit_file << "\n"
    << "rm -f \"$exit_file\"\n"
    << "mkdir -p \"$GPUHERD_CHECKPOINT_DIR\"\n";
  if (!r.cwd.empty()) s << "cd " << ShellQuote(r.cwd) << " || exit 1\n";
  s << "child=\n"
    << "forward() { [[ -n \"$child\" ]] && kill -s \"$1\" \"$child\" 2>/dev/null; }\n"
    << "trap 'forward USR1' USR1\n"
    << "trap 'forward TERM' TERM\n"
    << "trap 'forward INT' INT\n";
  s << "";
  for (size_t i = 0; i < r.argv.size(); ++i) s << (i ? " " : "") << ShellQuote(r.argv[i]);
  s << " &\n"
    << "child=$!\n"
    // wait returns early when a trapped signal arrives: wait again until the
    // command is gone; bash keeps its status for the last wait.
    << "while kill -0 \"$child\" 2>/dev/null; do wait \"$child\"; done\n"
    << "wait \"$child\"; status=$?\n"
    << "echo \"$status\" > \"$exit_file.tmp\" && mv -f \"$exit_file.tmp\" \"$exit_file\"\n"
    << "exit \"$status\"\n";
  return s.str();
}

Result<int64_t> ParseSbatchOutput(std::string_view out) {
  out = Trim(out);
  // The last line: sbatch may print warnings before it.
  if (auto nl = out.rfind('\n'); nl != std::string_view::npos) out = Trim(out.substr(nl + 1));
  std::string_view id = out.substr(0, out.find(';'));
  auto parsed = ParseId(id);
  if (!parsed) return Internal(fmt::format("sbatch printed '{}' where a job id was expected", out));
  return *parsed;
}

std::vector<std::string> CommentSqueueArgs() {
  return {"squeue", "--noheader", "--all", "--states=all", "--format=%i|%k"};
}

int64_t FindJobByComment(std::string_view out, std::string_view token) {
  while (!out.empty()) {
    size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    size_t bar = line.find('|');
    if (bar == std::string_view::npos) continue;
    auto id = ParseId(Trim(line.substr(0, bar)));
    if (!id) continue;
    std::string_view comment = line.substr(bar + 1);
    while (!comment.empty()) {
      size_t space = comment.find(' ');
      if (Trim(comment.substr(0, space)) == token) return *id;
      if (space == std::string_view::npos) break;
      comment = comment.substr(space + 1);
    }
  }
  return 0;
}

std::vector<std::string> SqueueArgs(const std::vector<int64_t>& ids) {
  std::vector<std::string> a = {"squeue", "--noheader", "--all", "--states=all", "--format=%i|%T|%r|%N"};
  if (!ids.empty()) {
    std::string list;
    for (int64_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    a.push_back("--jobs=" + list);
  }
  return a;
}

std::vector<QueueEntry> ParseSqueue(std::string_view out) {
  std::vector<QueueEntry> entries;
  while (!out.empty()) {
    size_t nl = out.find('\n');
    std::string_view line = Trim(out.substr(0, nl));
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    std::vector<std::string_view> f;
    for (size_t pos = 0;;) {
      size_t bar = line.find('|', pos);
      f.push_back(line.substr(pos, bar == std::string_view::npos ? std::string_view::npos : bar - pos));
      if (bar == std::string_view::npos) break;
      pos = bar + 1;
    }
    if (f.size() < 4) continue;
    auto id = ParseId(f[0]);
    if (!id) continue;
    entries.push_back({*id, std::string(Trim(f[1])), std::string(Trim(f[2])), std::string(Trim(f[3]))});
  }
  return entries;
}

StateClass ClassifyState(std::string_view state) {
  if (state == "COMPLETED") return StateClass::kCompleted;
  if (state == "CANCELLED") return StateClass::kCancelled;
  for (std::string_view s : {"RUNNING", "CONFIGURING", "COMPLETING", "STOPPED", "RESIZING", "SIGNALING",
                             "STAGE_OUT"}) {
    if (state == s) return StateClass::kRunning;
  }
  for (std::string_view s : {"FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
                             "DEADLINE", "SPECIAL_EXIT", "REVOKED"}) {
    if (state == s) return StateClass::kFailed;
  }
  return StateClass::kWaiting;  // PENDING, REQUEUED, REQUEUE_HOLD, RESV_DEL_HOLD, SUSPENDED, ...
}

std::map<std::string, std::string> ParseScontrolNode(std::string_view out) {
  std::map<std::string, std::string> fields;
  while (!out.empty()) {
    size_t nl = out.find('\n');
    std::string_view line = Trim(out.substr(0, nl));
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    if (line.substr(0, 7) == "Reason=") {
      // The reason runs to the end of its line and may hold spaces; Slurm
      // appends " [user@time]".
      std::string_view reason = line.substr(7);
      if (!reason.empty() && reason.back() == ']') {
        if (size_t open = reason.rfind(" ["); open != std::string_view::npos) reason = reason.substr(0, open);
      }
      fields["Reason"] = std::string(Trim(reason));
      continue;
    }
    size_t pos = 0;
    while (pos < line.size()) {
      size_t space = line.find(' ', pos);
      std::string_view word = line.substr(pos, space == std::string_view::npos ? std::string_view::npos : space - pos);
      if (size_t eq = word.find('='); eq != std::string_view::npos) {
        fields[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
      }
      if (space == std::string_view::npos) break;
      pos = space + 1;
    }
  }
  return fields;
}

}  // namespace gpuherd::exec::slurm
