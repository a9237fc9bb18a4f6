// What `gpuherd top` draws besides the fleet table: the pane of what needs
// attention (firing alerts and faults; routine pending alerts folded into
// one line).
#pragma once

#include <string>
#include <vector>

#include "api/events.h"

namespace gpuherd::cli {

// Whether an event belongs in top's pane: a warning or critical event (a
// fault, an alert that fired, a job stopped for memory), never an alert's
// pending or resolved transition nor routine information.
bool MattersInTop(const api::Event& event);

// "Firing alerts" (newest first), then "Faults and warnings" (the newest
// `max_events` that matter, newest last), then one line counting the pending
// alerts that are not shown. Empty when nothing matters.
std::string RenderAttentionPane(const std::vector<api::Alert>& alerts, const std::vector<api::Event>& events,
                                size_t max_events, bool color);

}  // namespace gpuherd::cli
