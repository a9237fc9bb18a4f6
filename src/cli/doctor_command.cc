// gpuherd doctor [--root DIR] [--json] [--fix-script FILE]: audits this
// node's system settings. Exit code: 0 nothing worse than info, 1 warnings,
// 2 something critical (or the audit could not run; usage errors are 2 too).
// It never changes a setting: the fix script is for the admin to review.
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/latest_burnins.h"
#include "cli/table.h"
#include "core/word_wrap.h"
#include "doctor/doctor.h"
#include "doctor/fix_script.h"
#include "doctor/node_gpus.h"
#include "host/clock.h"

extern char** environ;

namespace gpuherd::cli {
namespace {

constexpr int kCriticalExit = 2;

// The NCCL variables jobs started from this shell would inherit.
std::map<std::string, std::string> NcclEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq != nullptr && std::strncmp(*entry, "NCCL_", 5) == 0) env[std::string(*entry, static_cast<size_t>(eq - *entry))] = eq + 1;
  }
  return env;
}

const char* SeverityColor(doctor::Severity severity) {
  switch (severity) {
    case doctor::Severity::kCritical: return kRed;
    case doctor::Severity::kWarning: return kYellow;
    case doctor::Severity::kOk: return kGreen;
    default: return kBold;
  }
}

// Wraps `text` at about `width` columns, every line after the first indented.
std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out;
  for (const std::string& line : WrapWords(text, width)) out += (out.empty() ? "" : "\n" + indent) + line;
  return out;
}

std::string Render(const doctor::Report& report, bool color) {
  std::string out = "Node doctor: " + Printable(report.hostname) +
                    (report.root == "/" ? std::string() : " (tree " + Printable(report.root) + ")") + "\n\n";
  Table table({"STATUS", "CATEGORY", "CHECK", "CURRENT", "RECOMMENDED"});
  int counts[4] = {0, 0, 0, 0};
  for (const doctor::Check& c : report.checks) {
    ++counts[static_cast<int>(c.severity)];
    table.AddRow({Colored(doctor::SeverityName(c.severity), SeverityColor(c.severity), color), c.category, c.title,
                  c.current, c.recommended});
  }
  out += table.Render();
  bool header = false;
  for (const doctor::Check& c : report.checks) {
    if (c.severity == doctor::Severity::kOk) continue;
    if (!header) out += "\nFindings (the commands are for you to review and run as root; gpuherd runs none):\n";
    header = true;
    // What the doctor read from the machine (a device's name, a mount) is
    // printed as text, whatever it holds.
    out += "\n" + Colored(doctor::SeverityName(c.severity), SeverityColor(c.severity), color) + "  " +
           Printable(c.title) + ": " + Printable(c.current) + "\n";
    if (!c.why.empty()) out += "  why: " + Wrap(Printable(c.why), 92, "       ") + "\n";
    for (size_t i = 0; i < c.fix.size(); ++i) out += (i == 0 ? "  fix: " : "       ") + Printable(c.fix[i]) + "\n";
  }
  out += "\n" + std::to_string(counts[0]) + " ok, " + std::to_string(counts[1]) + " info, " +
         std::to_string(counts[2]) + " warning, " + std::to_string(counts[3]) + " critical\n";
  return out;
}

struct DoctorFlags {
  std::string root = "/";
  bool json = false;
  std::string fix_script;
  DriverFlags driver;
};

void Run(CommandContext* ctx, const DoctorFlags& flags) {
  auto host = host::NewHost(flags.root);
  auto clock = host::NewRealClock();
  doctor::DoctorInput input;
  input.host = host.get();
  input.env = NcclEnvironment();
  std::string note;
  // The driver describes this machine's GPUs, so it is asked only when the
  // audited tree is this machine, or for a simulated fleet.
  if (flags.driver.asked_for_sim() || flags.root == "/") {
    auto node = doctor::DetectGpus(flags.driver.choice(), *host, clock->Now());
    if (node.ok() && !node->from_host) {
      input.gpus = node->gpus;
      input.pcie_now = node->pcie_now;
      note = node->source_note;
    } else if (!node.ok() && flags.driver.asked_for_sim()) {
      ctx->Fail(node.status());
      ctx->exit_code = kCriticalExit;
      return;
    }
  }
  if (flags.root == "/") input.pcie_under_load = ReadLatestBurnIns(*ctx).pcie_under_load;
  const doctor::Report report = doctor::RunDoctor(input);
  if (!flags.fix_script.empty()) {
    Status written = WriteFileAtomically(flags.fix_script, doctor::FixScript(report), 0644, /*sync=*/false);
    if (!written.ok()) {
      ctx->Fail(written.Annotate("cannot write the fix script"));
      ctx->exit_code = kCriticalExit;
      return;
    }
  }
  if (flags.json) {
    nlohmann::json json = doctor::ReportJson(report);
    json["simulated_gpus"] = !input.gpus.empty() && input.gpus.front().simulated;
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    if (!note.empty()) std::printf("note: GPUs of a simulated fleet (%s)\n", Printable(note).c_str());
    std::fputs(Render(report, ctx->color()).c_str(), stdout);
  }
  if (!flags.fix_script.empty()) {
    std::fprintf(stderr, "fix script written to %s: review it, then run it as root (bash %s)\n",
                 flags.fix_script.c_str(), flags.fix_script.c_str());
  }
  ctx->exit_code = report.ExitCode();
}

}  // namespace

void AddDoctorCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Audit this node's kernel, PCIe, NUMA, storage, limits, network and container settings "
                "(exit 0 all good, 1 warnings, 2 critical)");
  cmd->add_option("--root", flags->root, "Audit the /proc, /sys and /etc under DIR instead of this machine's")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->add_option("--fix-script", flags->fix_script,
                  "Also write a shell script with the fixes to FILE (for review; gpuherd never runs it)");
  flags->driver.AddTo(cmd);
  cmd->callback([ctx, flags] { Run(ctx, *flags); });
}

}  // namespace gpuherd::cli
