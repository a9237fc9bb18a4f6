#include "cli/burnin_history.h"

#include <cctype>

#include <fmt/format.h>

#include "api/burnins.h"

namespace gpuherd::cli {

std::unique_ptr<BurnInHistory> BurnInHistory::ViaDaemon(DaemonClient* client) {
  std::unique_ptr<BurnInHistory> history(new BurnInHistory());
  history->client_ = client;
  return history;
}

Result<std::unique_ptr<BurnInHistory>> BurnInHistory::ViaStore(const StateDir& dir, bool writable) {
  store::StoreOptions options;
  options.read_only = !writable;
  if (writable) GPUHERD_RETURN_IF_ERROR(EnsureStateDir(dir));
  auto db = store::Store::Open(dir.db_path(), options);
  if (!db.ok()) return db.status();
  std::unique_ptr<BurnInHistory> history(new BurnInHistory());
  history->store_ = std::move(db).value();
  return history;
}

Result<std::unique_ptr<BurnInHistory>> BurnInHistory::ForReading(const StateDir& dir, DurationMs timeout) {
  auto client = std::make_unique<DaemonClient>(dir, timeout);
  if (!client->Reachable()) return ViaStore(dir, /*writable=*/false);
  std::unique_ptr<BurnInHistory> history = ViaDaemon(client.get());
  history->own_client_ = std::move(client);
  return history;
}

std::string BurnInHistory::where() const { return client_ ? "the daemon" : store_->path(); }

Result<std::vector<burnin::BurnInRun>> BurnInHistory::FromRecords(const std::vector<store::BurnInRecord>& records) {
  std::vector<burnin::BurnInRun> runs;
  for (const store::BurnInRecord& record : records) {
    auto run = api::BurnInRunFromRecord(record);
    if (!run.ok()) return run.status();
    runs.push_back(std::move(*run));
  }
  return runs;
}

Result<std::vector<burnin::BurnInRun>> BurnInHistory::FromDaemon(const std::string& target) {
  auto reply = client_->Get(target);
  if (!reply.ok()) return reply.status();
  std::vector<burnin::BurnInRun> runs;
  for (const nlohmann::json& j : reply->value("runs", nlohmann::json::array())) {
    auto run = burnin::BurnInRunFromJson(j);
    if (!run.ok()) return run.status().Annotate("the daemon sent a burn-in run this gpuherd cannot read");
    run->id = j.value("id", int64_t{0});
    runs.push_back(std::move(*run));
  }
  return runs;
}

Result<std::vector<burnin::BurnInRun>> BurnInHistory::RunsOfModel(const std::string& model, int limit) {
  if (client_) return FromDaemon(fmt::format("/v1/burnin/runs?model={}&limit={}", QueryEscape(model), limit));
  store::BurnInFilter filter;
  filter.gpu_name = model;
  filter.limit = limit;
  auto records = store_->ListBurnInRuns(filter);
  if (!records.ok()) return records.status();
  return FromRecords(*records);
}

Result<std::vector<burnin::BurnInRun>> BurnInHistory::RunsOfGpu(const std::string& id, int limit) {
  if (client_) return FromDaemon(fmt::format("/v1/burnin/runs?gpu={}&limit={}", QueryEscape(id), limit));
  store::BurnInFilter filter;
  filter.limit = limit;
  // The GPUs the daemon once listed first, then those only burn-ins know.
  auto gpus = store_->ListGpus();
  if (!gpus.ok()) return gpus.status();
  for (const store::GpuRecord& g : *gpus) {
    if (gpu::NamesGpu(id, g.index, g.uuid)) filter.gpu_uuid = g.uuid;
  }
  if (filter.gpu_uuid.empty()) {
    auto uuid = api::FindBurnInGpu(*store_, id);
    if (!uuid.ok()) return uuid.status();
    filter.gpu_uuid = *uuid;
  }
  auto records = store_->ListBurnInRuns(filter);
  if (!records.ok()) return records.status();
  return FromRecords(*records);
}

Result<std::vector<burnin::BurnInRun>> BurnInHistory::LatestPerGpu() {
  if (client_) return FromDaemon("/v1/burnin/runs?latest=1");
  auto records = store_->LatestBurnInPerGpu();
  if (!records.ok()) return records.status();
  return FromRecords(*records);
}

Result<std::vector<UntestedGpu>> BurnInHistory::Untested(const std::vector<burnin::BurnInRun>& latest) {
  std::vector<UntestedGpu> untested;
  auto tested = [&](const std::string& uuid) {
    for (const burnin::BurnInRun& run : latest) {
      if (run.gpu_uuid == uuid) return true;
    }
    return false;
  };
  if (client_) {
    auto fleet = client_->Get("/v1/gpus");
    if (!fleet.ok()) return fleet.status();
    for (const nlohmann::json& g : fleet->value("gpus", nlohmann::json::array())) {
      std::string uuid = g.value("uuid", std::string());
      if (!tested(uuid)) {
        untested.push_back({g.value("index", 0), uuid, g.value("name", std::string()), g.value("state", "") == "lost"});
      }
    }
    return untested;
  }
  auto gpus = store_->ListGpus();
  if (!gpus.ok()) return gpus.status();
  for (const store::GpuRecord& g : *gpus) {
    if (!tested(g.uuid)) untested.push_back({g.index, g.uuid, g.name});
  }
  return untested;
}

Status BurnInHistory::CheckCanRecord() {
  if (!client_) return Status::Ok();
  // An empty list records nothing but meets the same permission check.
  auto reply = client_->Post("/v1/burnin/runs", {{"runs", nlohmann::json::array()}});
  return reply.ok() ? Status::Ok() : reply.status();
}

Status BurnInHistory::Record(std::vector<burnin::BurnInRun>* runs) {
  if (client_) {
    nlohmann::json body = {{"runs", nlohmann::json::array()}};
    for (const burnin::BurnInRun& run : *runs) body["runs"].push_back(burnin::ToJson(run));
    auto reply = client_->Post("/v1/burnin/runs", body);
    return reply.ok() ? Status::Ok() : reply.status();
  }
  store::WriteBatch batch;
  for (const burnin::BurnInRun& run : *runs) {
    batch.events.push_back(api::BurnInEvent(run));
    batch.burnin_runs.push_back(api::ToBurnInRecord(run));
  }
  GPUHERD_RETURN_IF_ERROR(store_->Commit(&batch));
  for (size_t i = 0; i < runs->size(); ++i) (*runs)[i].id = batch.burnin_runs[i].id;
  return Status::Ok();
}

}  // namespace gpuherd::cli
