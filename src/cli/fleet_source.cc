#include "cli/fleet_source.h"

#include "api/decode.h"
#include "cli/no_driver.h"

namespace gpuherd::cli {

Result<std::unique_ptr<FleetSource>> FleetSource::Open(const CommandContext& ctx, const DriverFlags& flags,
                                                       host::Clock* clock) {
  auto source = std::make_unique<FleetSource>();
  if (!flags.asked_for_sim()) {
    auto client = std::make_unique<DaemonClient>(ctx.dir(), 5000);
    if (client->Reachable()) {
      source->daemon_ = std::move(client);
      return source;
    }
    source->direct_reason_ = "no daemon answers on " + ctx.dir().socket_path() + "; reading the GPUs directly";
  } else {
    source->direct_reason_ = "simulated fleet asked for on the command line; the daemon is not consulted";
  }
  // Never a simulated fleet unless asked for: a view of fake GPUs presented as
  // this machine's is worse than an error.
  auto local = LocalFleet::Open(StrictChoice(flags), clock);
  if (!local.ok()) return flags.asked_for_sim() ? local.status() : NoDriver(local.status());
  source->local_ = std::move(local).value();
  return source;
}

Result<api::Fleet> FleetSource::Fleet() {
  if (!daemon_) return local_->Snapshot();
  auto reply = daemon_->Get("/v1/gpus");
  if (!reply.ok()) return reply.status();
  return api::Decode<api::Fleet>(*reply, "the daemon's GPUs");
}

Result<std::vector<api::Event>> FleetSource::RecentEvents(int limit) {
  if (daemon_) {
    auto reply = daemon_->Get("/v1/events?limit=" + std::to_string(limit));
    if (!reply.ok()) return reply.status();
    return api::Decode<std::vector<api::Event>>(reply->value("events", nlohmann::json::array()), "the daemon's events");
  }
  const auto& all = local_->events();
  size_t first = all.size() > static_cast<size_t>(limit) ? all.size() - limit : 0;
  return std::vector<api::Event>(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
}

Result<std::vector<api::Alert>> FleetSource::ActiveAlerts() {
  if (!daemon_) return std::vector<api::Alert>{};
  auto reply = daemon_->Get("/v1/alerts");
  if (!reply.ok()) return reply.status();
  return api::Decode<std::vector<api::Alert>>(reply->value("alerts", nlohmann::json::array()), "the daemon's alerts");
}

std::optional<FleetReading> ReadFleetOnce(CommandContext* ctx, const DriverFlags& flags) {
  FleetReading reading;
  reading.clock = host::NewRealClock();
  auto source = FleetSource::Open(*ctx, flags, reading.clock.get());
  if (!source.ok()) {
    FailMaybeNoDriver(ctx, source.status());
    return std::nullopt;
  }
  reading.source = std::move(source).value();
  auto fleet = reading.source->Fleet();
  if (!fleet.ok()) {
    ctx->Fail(fleet.status());
    return std::nullopt;
  }
  reading.fleet = std::move(fleet).value();
  return reading;
}

}  // namespace gpuherd::cli
