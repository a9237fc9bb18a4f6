#include "gpu/sim/sim_compute.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stop_token>
#include <utility>

#include "gpu/sim/card.h"
#include "gpu/sim/sim_memtest.h"

namespace gpuherd::gpu::sim {
namespace {

// Efficiencies of the simulated work against the catalogue's figures (see
// sim_compute.h).
constexpr double kStressEfficiency = 0.9;
constexpr double kMemoryEfficiency = 0.85;
constexpr double kMemTestShare = 0.6;
constexpr double kCopyEfficiency = 0.8;
constexpr double kNoise = 0.01;
// GPU utilisation each kind of work shows (and heats the card with).
constexpr double kStressUtil = 1.0, kMemTestUtil = 0.7, kCopyUtil = 0.3;
// Where the simulated device's allocations appear, as CUDA's lie high in the
// address space; memory offset 0 of the card maps here.
constexpr uint64_t kVaBase = 0x7f4a00000000ull;
constexpr int kMaxMatrixN = 32768;
constexpr TimeMs kForever = std::numeric_limits<TimeMs>::max();

// GB/s per lane for PCIe generations 1-5 after line encoding (8b/10b up to
// gen 2, 128b/130b from gen 3), as the driver's readings use.
double LinkGbs(int gen, int width) {
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938};
  return kLane[std::clamp(gen, 1, 5)] * width;
}

int BytesPerElement(Precision precision) {
  switch (precision) {
    case Precision::kFp16:
    case Precision::kBf16: return 2;
    case Precision::kFp32: return 4;
    case Precision::kFp64: return 8;
  }
  return 4;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Device time of an operation in whole milliseconds, at least one.
DurationMs ToMs(double seconds) {
  return std::max<DurationMs>(1, static_cast<DurationMs>(std::ceil(seconds * kSecondMs)));
}

class SimComputeDevice : public ComputeDevice {
 public:
  SimComputeDevice(SimDriver& driver, host::Clock& clock, int index, std::vector<Fault> faults,
                   uint64_t region_offset, uint64_t noise_seed)
      : driver_(driver),
        clock_(clock),
        index_(index),
        model_(driver.model(index)),
        region_offset_(region_offset),
        rng_(noise_seed) {
    const TimeMs start = driver.start();
    for (Fault& fault : faults) {
      const TimeMs begin = start + fault.at;
      const TimeMs end = fault.duration ? begin + *fault.duration : kForever;
      faults_.push_back({std::move(fault), begin, end});
    }
  }

  ~SimComputeDevice() override { SetLoad(0, 0); }

  bool Supports(Precision precision) const override {
    switch (precision) {
      case Precision::kFp32: return true;
      // Tensor-core rates only: Pascal's 1/64-rate FP16 is not worth a stress.
      case Precision::kFp16: return model_.cc_major >= 7;
      case Precision::kBf16: return model_.cc_major >= 8;  // Ampere brought BF16
      case Precision::kFp64: return false;  // the catalogue has no FP64 figure
    }
    return false;
  }

  Result<MemoryInfo> Memory() override {
    auto sample = Read();
    if (!sample.ok()) return sample.status();
    MemoryInfo info;
    info.total_bytes = sample->mem_total_bytes.value_or(model_.memory_bytes);
    const uint64_t used = sample->mem_used_bytes.value_or(0);
    info.free_bytes = info.total_bytes > used ? info.total_bytes - used : 0;
    return info;
  }

  Result<uint64_t> RoundTrip(uint64_t bytes) override {
    if (bytes == 0) return InvalidArgument("a round trip needs at least one byte");
    GPUHERD_RETURN_IF_ERROR(CheckFits(bytes));
    SetLoad(kCopyUtil, bytes);
    auto rate = HostLinkRate();
    if (!rate.ok()) return Finish(rate.status());
    GPUHERD_RETURN_IF_ERROR(Finish(Spend(2.0 * bytes / (*rate * 1e9), {})));
    uint64_t bad_bytes = 0;
    for (const Stuck& stuck : StuckIn(bytes)) {
      // The round trip writes a word derived from its offset.
      const uint32_t written = static_cast<uint32_t>(stuck.offset * 2654435761u) ^ 0xA5A5A5A5u;
      const uint32_t diff = written ^ stuck.Read(written);
      for (int byte = 0; byte < 4; ++byte) bad_bytes += ((diff >> (8 * byte)) & 0xFF) != 0;
    }
    return bad_bytes;
  }

  Result<MemTestPass> MemTest(MemPattern pattern, uint64_t bytes, uint64_t seed,
                              size_t max_errors, std::stop_token stop) override {
    bytes -= bytes % 4;
    if (bytes == 0) return InvalidArgument("a memory test needs at least one 32-bit word");
    GPUHERD_RETURN_IF_ERROR(CheckFits(bytes));
    SetLoad(kMemTestUtil, bytes);
    const double rate_gbs = MemoryRate() * kMemTestShare;
    const double traffic = static_cast<double>(bytes) * PatternSweeps(pattern);
    const double seconds = traffic / (rate_gbs * 1e9);
    GPUHERD_RETURN_IF_ERROR(Finish(Spend(seconds, stop)));
    MemTestPass pass;
    pass.pattern = pattern;
    pass.bytes_tested = bytes;
    pass.seconds = static_cast<double>(ToMs(seconds)) / kSecondMs;
    pass.bandwidth_gbs = traffic / pass.seconds / 1e9;
    for (const Stuck& stuck : StuckIn(bytes)) {
      const uint64_t address = kVaBase + region_offset_ + stuck.offset;
      for (uint32_t written : PatternWords(pattern, address, stuck.offset / 4, seed)) {
        const uint32_t read = stuck.Read(written);
        if (read == written) continue;
        ++pass.error_count;
        if (pass.errors.size() < max_errors) {
          pass.errors.push_back({address, stuck.offset, written, read});
        }
      }
    }
    return pass;
  }

  Result<double> CopyBandwidth(CopyKind kind, uint64_t bytes, int repeats) override {
    if (bytes == 0 || repeats < 1) {
      return InvalidArgument("a copy needs at least one byte and one repeat");
    }
    GPUHERD_RETURN_IF_ERROR(CheckFits(kind == CopyKind::kDeviceToDevice ? 2 * bytes : bytes));
    SetLoad(kCopyUtil, bytes);
    double rate = 0;
    if (kind == CopyKind::kDeviceToDevice) {
      rate = MemoryRate() / 2;
    } else {
      auto link = HostLinkRate();
      if (!link.ok()) return Finish(link.status());
      rate = *link;
    }
    GPUHERD_RETURN_IF_ERROR(Finish(Spend(static_cast<double>(bytes) * repeats / (rate * 1e9), {})));
    return rate;
  }

  Result<double> MemoryBandwidth(uint64_t bytes, int repeats) override {
    if (bytes == 0 || repeats < 1) {
      return InvalidArgument("a bandwidth test needs at least one byte and one repeat");
    }
    GPUHERD_RETURN_IF_ERROR(CheckFits(bytes));
    SetLoad(kStressUtil, bytes);
    const double rate = MemoryRate();
    GPUHERD_RETURN_IF_ERROR(Finish(Spend(static_cast<double>(bytes) * repeats / (rate * 1e9), {})));
    return rate;
  }

  Result<GemmCheck> CheckedGemm(int n) override {
    if (n < 1 || n > kMaxMatrixN) {
      return InvalidArgument("GEMM size must be 1 to " + std::to_string(kMaxMatrixN));
    }
    SetLoad(kStressUtil, 3ull * n * n * 4);
    auto rate = StressRate(Precision::kFp32);
    if (!rate.ok()) return Finish(rate.status());
    const double flops = 2.0 * n * n * n;
    GPUHERD_RETURN_IF_ERROR(Finish(Spend(flops / (*rate * 1e12), {})));
    GemmCheck check;
    check.n = n;
    // FP32 rounding against a double-precision reference.
    check.max_rel_error = 1e-6 * (1 + kNoise * rng_.Symmetric());
    return check;
  }

  Status PrepareStress(Precision precision, int n) override {
    if (!Supports(precision)) {
      return FailedPrecondition(std::string(PrecisionName(precision)) + " is not supported on " +
                                std::string(model_.name));
    }
    if (n < 64 || n > kMaxMatrixN) {
      return InvalidArgument("stress matrix size must be 64 to " + std::to_string(kMaxMatrixN));
    }
    const uint64_t bytes = 3ull * n * n * BytesPerElement(precision);
    GPUHERD_RETURN_IF_ERROR(CheckFits(bytes));
    prepared_[precision] = n;
    SetLoad(kStressUtil, bytes);
    return Status::Ok();
  }

  void Idle() override { SetLoad(0, 0); }

  Result<StressBatch> Stress(Precision precision, int iterations, std::stop_token stop) override {
    auto it = prepared_.find(precision);
    if (it == prepared_.end()) {
      return FailedPrecondition(std::string("call PrepareStress for ") +
                                PrecisionName(precision) + " first");
    }
    if (iterations < 1) return InvalidArgument("a stress batch needs at least one iteration");
    const double n = it->second;
    SetLoad(kStressUtil, static_cast<uint64_t>(3 * n * n * BytesPerElement(precision)));
    auto rate = StressRate(precision);
    if (!rate.ok()) return rate.status();
    StressBatch batch;
    batch.precision = precision;
    batch.iterations = iterations;
    batch.flops = 2 * n * n * n * iterations;
    const TimeMs begin = clock_.Now();
    const DurationMs took = ToMs(batch.flops / (*rate * 1e12));
    // The load stays on between batches; the next other call or the
    // destructor takes it off.
    GPUHERD_RETURN_IF_ERROR(Spend(static_cast<double>(took) / kSecondMs, stop));
    batch.seconds = static_cast<double>(took) / kSecondMs;
    const TimeMs end = begin + took;
    for (ActiveFault& f : faults_) {
      if (f.fault.kind == FaultKind::kComputeErrors) batch.mismatches += WrongElements(f, begin, end);
      if (f.fault.kind == FaultKind::kNan) batch.nans += WrongElements(f, begin, end);
    }
    return batch;
  }

 private:
  struct ActiveFault {
    Fault fault;
    TimeMs begin = 0, end = 0;
    DurationMs stressed = 0;  // stress time while active so far
    bool fired = false;
  };
  // One stuck word inside a tested region.
  struct Stuck {
    uint64_t offset = 0;  // from the start of the region
    uint32_t mask = 0, value = 0;
    uint32_t Read(uint32_t written) const { return (written & ~mask) | (value & mask); }
  };

  Result<GpuSample> Read() {
    auto sample = driver_.Sample(index_, clock_.Now());
    if (!sample.ok()) return Unavailable(sample.status().message());
    return sample;
  }

  void SetLoad(double util, uint64_t bytes) {
    Load load;
    load.util = util;
    load.mem_bytes = bytes;
    driver_.SetLoad(index_, load);
  }

  // Ends an operation: the card goes idle whatever the outcome.
  Status Finish(Status status) {
    SetLoad(0, 0);
    return status;
  }

  Status CheckFits(uint64_t bytes) {
    const uint64_t usable = model_.memory_bytes - region_offset_;
    if (bytes > usable) {
      return InvalidArgument("cannot allocate " + std::to_string(bytes) + " bytes on " +
                             std::string(model_.name) + ": " + std::to_string(usable) +
                             " bytes are free");
    }
    return Status::Ok();
  }

  // Sleeps through `seconds` of device time; Wake() from the stop callback
  // ends it early when `stop` is requested.
  Status Spend(double seconds, std::stop_token stop) {
    const TimeMs deadline = clock_.Now() + ToMs(seconds);
    std::stop_callback wake(stop, [this] { clock_.Wake(); });
    while (true) {
      if (stop.stop_requested()) return Aborted("stopped on request");
      if (clock_.SleepUntil(deadline)) return Status::Ok();
    }
  }

  double Noise() { return 1 + kNoise * rng_.Symmetric(); }

  bool Active(const ActiveFault& f, TimeMs now) const { return now >= f.begin && now < f.end; }

  double SlowFactor() const {
    const TimeMs now = clock_.Now();
    double factor = 1;
    for (const ActiveFault& f : faults_) {
      if (f.fault.kind == FaultKind::kSlow && Active(f, now)) factor *= f.fault.factor;
    }
    return factor;
  }

  double MemoryRate() { return kMemoryEfficiency * model_.mem_bandwidth_gbs * SlowFactor() * Noise(); }

  Result<double> HostLinkRate() {
    auto sample = Read();
    if (!sample.ok()) return sample.status();
    const int gen = sample->pcie_gen.value_or(model_.max_pcie_gen);
    const int width = sample->pcie_width.value_or(model_.max_pcie_width);
    return kCopyEfficiency * LinkGbs(gen, width) * Noise();
  }

  // TFLOPS at the SM clock the card runs at under this load.
  Result<double> StressRate(Precision precision) {
    auto sample = Read();
    if (!sample.ok()) return sample.status();
    const double peak = precision == Precision::kBf16   ? model_.bf16_tflops
                        : precision == Precision::kFp16 ? model_.fp16_tflops
                                                        : model_.fp32_tflops;
    const double clock_share =
        static_cast<double>(sample->sm_clock_mhz.value_or(model_.max_sm_clock_mhz)) /
        model_.max_sm_clock_mhz;
    return kStressEfficiency * peak * clock_share * SlowFactor() * Noise();
  }

  std::vector<Stuck> StuckIn(uint64_t bytes) const {
    std::vector<Stuck> stuck;
    const TimeMs now = clock_.Now();
    for (const ActiveFault& f : faults_) {
      if (f.fault.kind != FaultKind::kStuckBits || now < f.begin) continue;
      if (f.fault.address < region_offset_ || f.fault.address >= region_offset_ + bytes) continue;
      stuck.push_back({f.fault.address - region_offset_, f.fault.mask, f.fault.value});
    }
    return stuck;
  }

  // Wrong elements a compute_errors or nan fault puts into the stress work
  // done in [begin, end): its count in the first batch it overlaps, or its
  // rate per minute of stress.
  static uint64_t WrongElements(ActiveFault& f, TimeMs begin, TimeMs end) {
    const DurationMs overlap = std::max<DurationMs>(0, std::min(end, f.end) - std::max(begin, f.begin));
    if (overlap == 0) return 0;
    if (f.fault.count > 0) {
      if (f.fired) return 0;
      f.fired = true;
      return f.fault.count;
    }
    auto events = [&](DurationMs ms) {
      return static_cast<uint64_t>(std::floor(f.fault.rate_per_min * ms / kMinuteMs));
    };
    const uint64_t before = events(f.stressed);
    f.stressed += overlap;
    return events(f.stressed) - before;
  }

  SimDriver& driver_;
  host::Clock& clock_;
  const int index_;
  const GpuModel& model_;
  const uint64_t region_offset_;  // first byte of the card's memory left free
  SplitMix64 rng_;
  std::vector<ActiveFault> faults_;
  std::map<Precision, int> prepared_;
};

bool IsComputeFault(FaultKind kind) {
  return kind == FaultKind::kStuckBits || kind == FaultKind::kComputeErrors ||
         kind == FaultKind::kNan || kind == FaultKind::kSlow;
}

}  // namespace

SimComputeBackend::SimComputeBackend(SimDriver& driver, host::Clock& clock)
    : driver_(driver), clock_(clock) {}

Result<std::unique_ptr<ComputeDevice>> SimComputeBackend::Open(const GpuInfo& gpu) {
  auto fleet = driver_.Discover();
  if (!fleet.ok()) return fleet.status();
  int index = -1;
  for (const GpuInfo& info : fleet->gpus) {
    if (info.uuid == gpu.uuid) index = info.index;
  }
  if (index < 0) return NotFound("no simulated GPU has UUID " + gpu.uuid);
  std::vector<Fault> faults;
  {
    std::lock_guard lock(mu_);
    auto disabled = disabled_.find(index);
    if (disabled != disabled_.end()) {
      return Unavailable("cannot create a compute context on GPU " + std::to_string(index) +
                         ": " + disabled->second);
    }
    for (const Fault& fault : faults_) {
      if (fault.gpu == index) faults.push_back(fault);
    }
  }
  // A card that does not answer the driver takes no work either; the reading
  // also starts the fleet's clock, which the faults' times count from.
  auto sample = driver_.Sample(index, clock_.Now());
  if (!sample.ok()) {
    return Unavailable("cannot create a compute context on GPU " + std::to_string(index) + ": " +
                       sample.status().message());
  }
  const uint64_t reserved = sample->mem_used_bytes.value_or(0);
  return std::unique_ptr<ComputeDevice>(std::make_unique<SimComputeDevice>(
      driver_, clock_, index, std::move(faults), reserved, Fnv1a(gpu.uuid)));
}

Status SimComputeBackend::AddFault(const Fault& fault) {
  if (!IsComputeFault(fault.kind)) {
    return InvalidArgument(std::string(FaultKindName(fault.kind)) +
                           " is a driver fault; give it to the SimDriver's scenario");
  }
  if (fault.gpu < 0 || fault.gpu >= driver_.size()) {
    return InvalidArgument("gpu " + std::to_string(fault.gpu) + " is outside the fleet of " +
                           std::to_string(driver_.size()) + " GPUs");
  }
  if (fault.kind == FaultKind::kStuckBits &&
      fault.address >= driver_.model(fault.gpu).memory_bytes) {
    return InvalidArgument("stuck_bits address " + std::to_string(fault.address) +
                           " is outside GPU " + std::to_string(fault.gpu) + "'s memory");
  }
  std::lock_guard lock(mu_);
  faults_.push_back(fault);
  return Status::Ok();
}

Status SimComputeBackend::AddFaults(const Scenario& scenario) {
  for (const Fault& fault : scenario.faults) {
    if (!IsComputeFault(fault.kind)) continue;
    Status status = AddFault(fault);
    if (!status.ok()) {
      return status.Annotate(scenario.source + ":" + std::to_string(fault.line));
    }
  }
  return Status::Ok();
}

void SimComputeBackend::DisableCompute(int gpu, std::string reason) {
  std::lock_guard lock(mu_);
  disabled_[gpu] = std::move(reason);
}

std::unique_ptr<ComputeBackend> NewSimComputeBackend(SimDriver& driver, host::Clock& clock) {
  return std::make_unique<SimComputeBackend>(driver, clock);
}

Result<std::unique_ptr<ComputeBackend>> NewSimComputeBackend(SimDriver& driver,
                                                             host::Clock& clock,
                                                             const SimOptions& options) {
  auto backend = std::make_unique<SimComputeBackend>(driver, clock);
  Result<Scenario> scenario = Scenario();
  if (!options.scenario_path.empty()) {
    scenario = LoadScenario(options.scenario_path);
  } else if (!options.scenario_text.empty()) {
    scenario = ParseScenario(options.scenario_text, "scenario");
  }
  if (!scenario.ok()) return scenario.status();
  GPUHERD_RETURN_IF_ERROR(backend->AddFaults(*scenario));
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}

}  // namespace gpuherd::gpu::sim
