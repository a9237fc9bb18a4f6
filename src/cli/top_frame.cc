#include "cli/top_frame.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/table.h"
#include "core/time.h"

namespace gpuherd::cli {

bool MattersInTop(const api::Event& event) {
  if (event.kind == "alert.pending" || event.kind == "alert.resolved") return false;
  return event.severity == "warning" || event.severity == "critical";
}

std::string RenderAttentionPane(const std::vector<api::Alert>& alerts, const std::vector<api::Event>& events,
                                size_t max_events, bool color) {
  std::string out;
  std::vector<const api::Alert*> firing;
  size_t pending = 0;
  for (const api::Alert& a : alerts) {
    if (a.state == "firing") firing.push_back(&a);
    else if (a.state == "pending") ++pending;
  }
  std::sort(firing.begin(), firing.end(), [](const api::Alert* a, const api::Alert* b) { return a->fired_at > b->fired_at; });
  if (!firing.empty()) {
    out += "Firing alerts\n";
    for (const api::Alert* a : firing) {
      std::string where = a->gpu ? "GPU " + std::to_string(*a->gpu) : Printable(a->subject);
      std::string line = fmt::format("{}  {:<8} {:<24} {:<7} {}", FormatTimeUtc(a->fired_at).substr(11, 8),
                                     Printable(a->severity), Printable(a->rule), where, Printable(a->summary));
      out += Colored(line, a->severity == "critical" ? kRed : kYellow, color) + "\n";
    }
  }
  std::vector<const api::Event*> shown;
  for (const api::Event& e : events) {
    if (MattersInTop(e)) shown.push_back(&e);
  }
  if (shown.size() > max_events) shown.erase(shown.begin(), shown.end() - static_cast<std::ptrdiff_t>(max_events));
  if (!shown.empty()) {
    out += (out.empty() ? "" : "\n") + std::string("Faults and warnings\n");
    for (const api::Event* e : shown) {
      std::string line = fmt::format("{}  {:<8} {:<16} {}", FormatTimeUtc(e->time).substr(11, 8), Printable(e->severity),
                                     Printable(e->kind), Printable(e->message));
      out += Colored(line, e->severity == "critical" ? kRed : kYellow, color) + "\n";
    }
  }
  if (pending > 0) {
    out += fmt::format("{}{} pending alert{} not firing yet (gpuherd alerts lists them)\n", out.empty() ? "" : "\n",
                       pending, pending == 1 ? "" : "s");
  }
  return out;
}

}  // namespace gpuherd::cli
