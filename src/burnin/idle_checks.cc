#include "burnin/idle_checks.h"

#include <string>

#include <fmt/format.h>

namespace gpuherd::burnin {
namespace {

// An idle card well cooled sits 30-50 °C; above this something is wrong
// with its cooling or something is running on it.
constexpr double kHotIdleC = 60;
// Readings outside this range come from a broken sensor.
constexpr double kMinPlausibleC = 5, kMaxPlausibleC = 110;
// Idle cards draw a small share of their limit (10-20 %).
constexpr double kMaxIdlePowerShare = 0.5;
constexpr double kBusyUtilPct = 5;
// Reasons that say nothing bad about an idle card.
constexpr uint64_t kHarmlessReasons = gpu::throttle::kGpuIdle |
                                      gpu::throttle::kApplicationsClocksSetting |
                                      gpu::throttle::kSyncBoost |
                                      gpu::throttle::kDisplayClockSetting;

Check Make(const char* name, CheckOutcome outcome, std::string reason, std::string message) {
  Check check;
  check.name = name;
  check.level = 1;
  check.outcome = outcome;
  check.reason = std::move(reason);
  check.message = std::move(message);
  return check;
}

Check EccCheck(const gpu::GpuInfo& gpu, const gpu::GpuSample& s) {
  if (!gpu.ecc_enabled && !s.ecc_dbe_volatile && !s.ecc_sbe_volatile) {
    return Make("ecc", CheckOutcome::kSkipped, "not_supported", "this card has no ECC memory");
  }
  Check check = Make("ecc", CheckOutcome::kPass, "", "");
  const uint64_t sbe = s.ecc_sbe_volatile.value_or(0), dbe = s.ecc_dbe_volatile.value_or(0);
  check.values["sbe"] = static_cast<double>(sbe);
  check.values["dbe"] = static_cast<double>(dbe);
  if (dbe > 0) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "ecc_dbe";
    check.message = fmt::format(
        "{} uncorrectable (double-bit) ECC error{} since the driver loaded: data was lost; "
        "keep work off this card until a reset and a level-2 memory test pass",
        dbe, dbe == 1 ? "" : "s");
  } else if (gpu.ecc_enabled == false) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "ecc_disabled";
    check.message = "ECC is supported but off: memory errors go unseen (nvidia-smi -e 1 and a "
                    "reset turn it on)";
  } else if (sbe > 0) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "ecc_sbe";
    check.message = fmt::format("{} corrected (single-bit) ECC errors since the driver loaded; "
                                "watch whether they grow", sbe);
  }
  return check;
}

Check MemoryRepairCheck(const gpu::GpuSample& s) {
  const bool remaps = s.remapped_rows_uncorrectable || s.remapped_rows_pending;
  const bool retires = s.retired_pages_dbe || s.retired_pages_pending;
  if (!remaps && !retires) {
    return Make("memory_repair", CheckOutcome::kSkipped, "not_supported",
                "the card reports neither retired pages nor remapped rows");
  }
  Check check = Make("memory_repair", CheckOutcome::kPass, "", "");
  const uint64_t repaired =
      s.remapped_rows_uncorrectable.value_or(0) + s.retired_pages_dbe.value_or(0);
  const bool pending = s.remapped_rows_pending.value_or(false) || s.retired_pages_pending.value_or(false);
  check.values["repaired"] = static_cast<double>(repaired);
  check.values["pending"] = pending ? 1 : 0;
  if (s.remapped_rows_failure.value_or(false)) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "remap_failure";
    check.message = "row remapping failed: the card has no spare rows left; replace it";
  } else if (pending) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "repair_pending";
    check.message = "a page retirement or row remap waits for a GPU reset; reset the card "
                    "(nvidia-smi -r) before it runs work";
  } else if (repaired > 0) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "memory_repaired";
    check.message = fmt::format("{} memory row{} already retired or remapped after "
                                "uncorrectable errors", repaired, repaired == 1 ? "" : "s");
  }
  return check;
}

Check ThrottleCheck(const gpu::GpuSample& s) {
  if (!s.throttle_reasons) {
    return Make("throttle_idle", CheckOutcome::kSkipped, "not_supported",
                "the driver reports no throttle reasons");
  }
  const uint64_t bad = *s.throttle_reasons & ~kHarmlessReasons;
  if (bad == 0) return Make("throttle_idle", CheckOutcome::kPass, "", "");
  return Make("throttle_idle", CheckOutcome::kWarn, "throttled_at_idle",
              "clocks held back while idle (" + gpu::throttle::Describe(bad) +
                  "): check the power cables, the PSU and the airflow");
}

Check IdleTempCheck(const gpu::GpuInfo& gpu, const gpu::GpuSample& s) {
  if (!s.temp_c) return Make("idle_temp", CheckOutcome::kSkipped, "not_supported", "no temperature reading");
  Check check = Make("idle_temp", CheckOutcome::kPass, "", "");
  check.values["temp_c"] = *s.temp_c;
  if (*s.temp_c < kMinPlausibleC || *s.temp_c > kMaxPlausibleC) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "implausible_reading";
    check.message = fmt::format("the sensor reads {:.0f} °C, which no working card shows; the "
                                "sensor or its reading is broken", *s.temp_c);
  } else if (*s.temp_c > kHotIdleC) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "hot_at_idle";
    check.message = fmt::format("{:.0f} °C while idle (expected under {:.0f} °C): check the fans, "
                                "the airflow and the thermal paste", *s.temp_c, kHotIdleC);
  }
  if (gpu.temp_slowdown_c) check.values["slowdown_c"] = *gpu.temp_slowdown_c;
  return check;
}

Check IdlePowerCheck(const gpu::GpuInfo& gpu, const gpu::GpuSample& s) {
  if (!s.power_w) return Make("idle_power", CheckOutcome::kSkipped, "not_supported", "no power reading");
  Check check = Make("idle_power", CheckOutcome::kPass, "", "");
  check.values["power_w"] = *s.power_w;
  const std::optional<double> limit = s.power_limit_w ? s.power_limit_w : gpu.power_limit_default_w;
  if (limit) check.values["limit_w"] = *limit;
  const bool busy = s.gpu_util_pct.value_or(0) > kBusyUtilPct || !s.processes.empty();
  if (busy) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "gpu_busy";
    check.message = fmt::format("the card is not idle ({:.0f} % busy, {} process{}): another job "
                                "shares it and the rates will be low; drain it first",
                                s.gpu_util_pct.value_or(0), s.processes.size(),
                                s.processes.size() == 1 ? "" : "es");
  } else if (limit && *s.power_w > kMaxIdlePowerShare * *limit) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "high_idle_power";
    check.message = fmt::format("{:.0f} W while idle, over half its {:.0f} W limit: the card "
                                "does not reach its idle state", *s.power_w, *limit);
  }
  return check;
}

}  // namespace

std::vector<Check> IdleChecks(const gpu::GpuInfo& gpu, const gpu::GpuSample& idle) {
  std::vector<Check> checks;
  Check driver = Make("driver", CheckOutcome::kPass, "", "");
  driver.message = "the driver answers" +
                   (gpu.driver_version.empty() ? std::string() : " (" + gpu.driver_version + ")");
  checks.push_back(std::move(driver));
  checks.push_back(EccCheck(gpu, idle));
  checks.push_back(MemoryRepairCheck(idle));
  checks.push_back(ThrottleCheck(idle));
  checks.push_back(IdleTempCheck(gpu, idle));
  checks.push_back(IdlePowerCheck(gpu, idle));
  return checks;
}

Check PcieLinkCheck(const gpu::GpuInfo& gpu, const gpu::GpuSample& idle,
                    std::optional<int> loaded_gen, int level) {
  if (!idle.pcie_width || !gpu.max_pcie_width) {
    return Make("pcie_link", CheckOutcome::kSkipped, "not_supported",
                "the driver reports no PCIe link (an SXM card or an old driver)");
  }
  Check check = Make("pcie_link", CheckOutcome::kPass, "", "");
  const int width = *idle.pcie_width, max_width = *gpu.max_pcie_width;
  check.values["width"] = width;
  check.values["max_width"] = max_width;
  if (gpu.max_pcie_gen) check.values["max_gen"] = *gpu.max_pcie_gen;
  if (idle.pcie_gen) check.values["idle_gen"] = *idle.pcie_gen;
  if (loaded_gen) check.values["gen"] = *loaded_gen;
  std::vector<std::string> problems, notes;
  if (width < max_width) {
    problems.push_back(fmt::format("the link runs at x{} of x{}: reseat the card or move it to "
                                   "a full-width slot", width, max_width));
  }
  if (gpu.max_pcie_gen) {
    const int max_gen = *gpu.max_pcie_gen;
    if (loaded_gen && *loaded_gen < max_gen) {
      problems.push_back(fmt::format("under load the link reaches only gen {} of gen {}: check "
                                     "the slot, the riser and the BIOS link speed", *loaded_gen, max_gen));
    } else if (!loaded_gen && idle.pcie_gen && *idle.pcie_gen < max_gen) {
      notes.push_back(fmt::format("generation not checked at idle (gen {} now; idle cards lower "
                                  "it to save power{})", *idle.pcie_gen,
                                  level == 1 ? "; level 2 checks it under load" : ""));
    }
  }
  if (!problems.empty()) {
    check.outcome = CheckOutcome::kWarn;
    check.reason = "pcie_downtrained";
  }
  for (const auto* list : {&problems, &notes}) {
    for (const std::string& text : *list) {
      check.message += (check.message.empty() ? "" : "; ") + text;
    }
  }
  return check;
}

}  // namespace gpuherd::burnin
