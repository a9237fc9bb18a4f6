// A card's passport: everything gpuherd knows about one physical GPU, keyed by
// its serial (its UUID where it has none), so that it follows the card to
// another slot or machine. Built by a pure function from stored records;
// exported and imported as JSON (imports are merged, never trusted blindly:
// the parser bounds every field).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/time.h"
#include "store/records.h"
#include "store/store.h"

namespace gpuherd::alerts {

inline constexpr int kPassportFormat = 1;

struct PassportIncident {
  TimeMs time = 0;
  std::string kind;      // xid, ecc, remapped_rows, throttling, pcie, pcie_replay, lost, fan, fault
  std::string severity;  // info, warning, critical
  std::string message;
  int xid = 0;           // kind xid
  std::string host;
  bool operator==(const PassportIncident&) const = default;
};

struct PassportBurnIn {
  TimeMs finished = 0;
  int level = 0;
  std::string outcome, verdict;
  int score = 0;
  nlohmann::json rates = nlohmann::json::object();  // fp32_tflops, mem_bandwidth_gbs, ...
  std::string host;
  bool operator==(const PassportBurnIn&) const = default;
};

struct PassportStateChange {
  TimeMs time = 0;
  std::string from, to, reason;
  nlohmann::json evidence = nlohmann::json::array();
  bool shadow = false;
  std::string host;
  bool operator==(const PassportStateChange&) const = default;
};

struct Passport {
  std::string key;  // serial, or UUID where there is no serial
  std::string serial, uuid, model;
  TimeMs first_seen = 0, last_seen = 0;
  double hours_in_service = 0;  // hours in which gpuherd read the card (all machines)
  std::string state = "in_service";
  int requalifications_passed = 0, requalifications_failed = 0;
  std::vector<std::string> hosts;  // machines it has been in, first first
  std::vector<PassportIncident> incidents;   // oldest first
  std::vector<PassportBurnIn> burnins;       // oldest first
  std::vector<PassportStateChange> states;   // oldest first
};

// The key a card's passport goes by.
std::string PassportKey(const store::GpuRecord& gpu);

// Everything stored about one GPU on this machine (`host`). `sampled_minutes`:
// minutes in which it answered. Events that are no incident (a GPU found
// again, drains) are left out.
Passport BuildPassport(const store::GpuRecord& gpu, const std::vector<store::EventRecord>& events,
                       const std::vector<store::BurnInRecord>& burnins,
                       const std::vector<store::HealthTransitionRecord>& transitions, int64_t sampled_minutes,
                       const std::string& host);

// BuildPassport over everything `db` holds of `gpu`, merged with the
// passports imported for the same card: what `gpuherd passport` prints and
// GET /v1/gpus/{id}/passport serves.
Result<Passport> LoadPassport(store::Store& db, const store::GpuRecord& gpu, const std::string& host);

// Adds an imported passport of the same card: the earliest first sighting,
// hours added, histories merged in time order without duplicates. The
// current state stays this machine's unless it has none.
Result<Passport> MergePassport(Passport local, const Passport& imported);

nlohmann::json PassportToJson(const Passport& p);
// Validates an imported document: format, key, bounded strings and lists.
Result<Passport> PassportFromJson(const nlohmann::json& j);
// A self-contained HTML page (no scripts, every text escaped).
std::string RenderPassportHtml(const Passport& p);

}  // namespace gpuherd::alerts
