// gpuherd passport GPU [--json] [--html FILE]: one card's passport (first
// seen, hours in service, incidents, burn-ins, requalifications, state
// history), read from the state database on this machine, merged with the
// passports imported for the same card. gpuherd passport --import FILE brings
// the passport of a card that came from another machine (the --json output
// there).
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "alerts/passport.h"
#include "cli/command.h"
#include "cli/table.h"
#include "core/state_dir.h"
#include "host/clock.h"
#include "host/host.h"
#include "store/store.h"

namespace gpuherd::cli {
namespace {

constexpr std::streamsize kMaxImportBytes = 64 << 20;

struct PassportFlags {
  std::string gpu;
  bool json = false;
  std::string html;
  std::string import_path;
};

Result<std::unique_ptr<store::Store>> OpenStore(const CommandContext& ctx, bool writable) {
  store::StoreOptions options;
  options.read_only = !writable;
  if (writable) GPUHERD_RETURN_IF_ERROR(EnsureStateDir(ctx.dir()));
  auto db = store::Store::Open(ctx.dir().db_path(), options);
  if (!db.ok()) return db.status().Annotate("cannot read the state database");
  return db;
}

// GPU by index (at the last enumeration), UUID or serial.
Result<store::GpuRecord> FindGpu(store::Store& db, const std::string& which) {
  auto gpus = db.ListGpus();
  if (!gpus.ok()) return gpus.status();
  for (const store::GpuRecord& g : *gpus) {
    if (g.uuid == which || (!g.serial.empty() && g.serial == which) || std::to_string(g.index) == which) {
      return g;
    }
  }
  return NotFound("no GPU '" + which + "' has been seen on this machine (give an index, UUID or serial)");
}

Result<alerts::Passport> Build(store::Store& db, const store::GpuRecord& gpu) {
  return alerts::LoadPassport(db, gpu, host::NewHost()->Hostname());
}

void PrintText(const alerts::Passport& p) {
  // A passport may be imported from a file another machine wrote: all of
  // its text is escaped.
  std::printf("Card %s  %s\n", Printable(p.key).c_str(), Printable(p.model).c_str());
  std::printf("  UUID %s; first seen %s; %.1f hours in service; state %s\n", Printable(p.uuid).c_str(),
              p.first_seen ? FormatTimeUtc(p.first_seen).c_str() : "-", p.hours_in_service, Printable(p.state).c_str());
  std::printf("  requalifications: %d passed, %d failed; machines: ", p.requalifications_passed,
              p.requalifications_failed);
  for (size_t i = 0; i < p.hosts.size(); ++i) std::printf("%s%s", i ? ", " : "", Printable(p.hosts[i]).c_str());
  std::printf("\n\nIncidents (%zu)\n", p.incidents.size());
  Table incidents({"TIME (UTC)", "KIND", "SEVERITY", "WHAT"});
  for (const auto& i : p.incidents) incidents.AddRow({FormatTimeUtc(i.time), Printable(i.kind), Printable(i.severity), Printable(i.message)});
  if (!p.incidents.empty()) std::fputs(incidents.Render({}).c_str(), stdout);
  std::printf("\nBurn-ins (%zu)\n", p.burnins.size());
  Table burnins({"FINISHED (UTC)", "LEVEL", "OUTCOME", "VERDICT", "SCORE", "FP32 TFLOPS"});
  for (const auto& b : p.burnins) {
    std::string tflops = b.rates.contains("fp32_tflops") && b.rates["fp32_tflops"].is_number()
                             ? fmt::format("{:.1f}", b.rates["fp32_tflops"].get<double>())
                             : "-";
    burnins.AddRow({FormatTimeUtc(b.finished), std::to_string(b.level), Printable(b.outcome), Printable(b.verdict),
                    std::to_string(b.score), tflops});
  }
  if (!p.burnins.empty()) std::fputs(burnins.Render({1, 4, 5}).c_str(), stdout);
  std::printf("\nState history (%zu)\n", p.states.size());
  Table states({"TIME (UTC)", "FROM", "TO", "WHY"});
  for (const auto& s : p.states) {
    states.AddRow({FormatTimeUtc(s.time), Printable(s.from), Printable(s.to),
                   Printable(s.reason) + (s.shadow ? " (shadow)" : "")});
  }
  if (!p.states.empty()) std::fputs(states.Render({}).c_str(), stdout);
}

Status Import(const CommandContext& ctx, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read " + path);
  std::string text(static_cast<size_t>(kMaxImportBytes) + 1, '\0');
  in.read(text.data(), kMaxImportBytes + 1);
  if (in.gcount() > kMaxImportBytes) return InvalidArgument(path + " is larger than 64 MiB");
  text.resize(static_cast<size_t>(in.gcount()));
  auto parsed = alerts::PassportFromJson(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false));
  if (!parsed.ok()) return parsed.status().Annotate(path);
  auto db = OpenStore(ctx, /*writable=*/true);
  if (!db.ok()) return db.status();
  store::PassportImportRecord r;
  r.card_key = parsed->key;
  r.source = fmt::format("{}@{}", parsed->hosts.empty() ? "unknown" : parsed->hosts.back(), parsed->last_seen);
  r.imported_at = host::NewRealClock()->Now();
  r.passport_json = alerts::PassportToJson(*parsed).dump();
  GPUHERD_RETURN_IF_ERROR((*db)->SavePassportImport(r));
  std::printf("Imported the passport of card %s (%zu incidents, %zu burn-ins, %.1f hours) from %s.\n",
              Printable(parsed->key).c_str(), parsed->incidents.size(), parsed->burnins.size(), parsed->hours_in_service,
              Printable(r.source).c_str());
  return Status::Ok();
}

Status Show(const CommandContext& ctx, const PassportFlags& flags) {
  if (!flags.import_path.empty()) return Import(ctx, flags.import_path);
  if (flags.gpu.empty()) return InvalidArgument("name a GPU (index, UUID or serial), or --import FILE");
  auto db = OpenStore(ctx, /*writable=*/false);
  if (!db.ok()) return db.status();
  auto gpu = FindGpu(**db, flags.gpu);
  if (!gpu.ok()) return gpu.status();
  auto p = Build(**db, *gpu);
  if (!p.ok()) return p.status();
  if (flags.json) {
    std::printf("%s\n", alerts::PassportToJson(*p).dump(2).c_str());
  } else {
    PrintText(*p);
  }
  if (!flags.html.empty()) {
    GPUHERD_RETURN_IF_ERROR(WriteFileAtomically(flags.html, alerts::RenderPassportHtml(*p), 0644, false)
                                .Annotate("cannot write the passport page"));
  }
  return Status::Ok();
}

}  // namespace

void AddPassportCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<PassportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "passport", "One card's history (incidents, burn-ins, requalifications, states), by serial");
  cmd->add_option("gpu", flags->gpu, "The GPU: index, UUID or serial");
  cmd->add_flag("--json", flags->json, "Print the passport as JSON (what --import reads on another machine)");
  cmd->add_option("--html", flags->html, "Also write the passport as an HTML page to this file");
  cmd->add_option("--import", flags->import_path, "Import a card's passport exported with --json elsewhere")
      ->check(CLI::ExistingFile);
  cmd->callback([ctx, flags] {
    Status s = Show(*ctx, *flags);
    if (!s.ok()) ctx->Fail(s);
  });
}

}  // namespace gpuherd::cli
