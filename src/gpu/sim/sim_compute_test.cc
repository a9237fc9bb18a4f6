#include "gpu/sim/sim_compute.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/virtual_clock.h"

namespace gpuherd::gpu::sim {
namespace {

using ::testing::HasSubstr;

constexpr TimeMs kT0 = 1'700'000'000'000;
constexpr uint64_t kMiB = 1024ull * 1024;

// A simulated fleet and its compute side on a virtual clock: every operation
// takes its simulated time at once.
struct Rig {
  explicit Rig(const std::string& scenario) : clock(kT0) {
    SimOptions options;
    options.scenario_text = scenario;
    auto opened = OpenSimDriver(options);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    driver = std::move(opened).value();
    auto made = NewSimComputeBackend(*driver, clock, options);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    backend = std::move(made).value();
    fleet = driver->Discover().value();
  }

  std::unique_ptr<ComputeDevice> Device(int index) {
    auto device = backend->Open(fleet.gpus[index]);
    EXPECT_TRUE(device.ok()) << device.status().ToString();
    return device.ok() ? std::move(device).value() : nullptr;
  }

  host::VirtualClock clock;
  std::unique_ptr<SimDriver> driver;
  std::unique_ptr<ComputeBackend> backend;
  Fleet fleet;
};

// Average FP32 TFLOPS of `seconds` of stress.
double StressRate(ComputeDevice& device, double seconds) {
  EXPECT_TRUE(device.PrepareStress(Precision::kFp32, 8192).ok());
  double flops = 0, time = 0;
  while (time < seconds) {
    auto batch = device.Stress(Precision::kFp32, 10, {});
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    flops += batch->flops;
    time += batch->seconds;
  }
  return flops / time / 1e12;
}

TEST(SimComputeTest, RatesFollowTheCatalogueAndTheLink) {
  Rig rig("gpus: [{model: h100-sxm}]");
  auto device = rig.Device(0);
  ASSERT_TRUE(device);
  const GpuModel& h100 = rig.driver->model(0);

  auto memory = device->MemoryBandwidth(1024 * kMiB, 20);
  ASSERT_TRUE(memory.ok());
  EXPECT_NEAR(*memory, 0.85 * h100.mem_bandwidth_gbs, 0.01 * 0.85 * h100.mem_bandwidth_gbs);

  auto h2d = device->CopyBandwidth(CopyKind::kHostToDevice, 256 * kMiB, 10);
  ASSERT_TRUE(h2d.ok());
  EXPECT_NEAR(*h2d, 0.8 * 3.938 * 16, 0.01 * 0.8 * 3.938 * 16);  // gen5 x16
  auto d2d = device->CopyBandwidth(CopyKind::kDeviceToDevice, 256 * kMiB, 10);
  ASSERT_TRUE(d2d.ok());
  EXPECT_NEAR(*d2d, 0.85 * h100.mem_bandwidth_gbs / 2, 0.01 * 0.85 * h100.mem_bandwidth_gbs);

  // Under full load the power cap holds the SM clock below boost, and the
  // stress rate follows the clock the driver reports.
  const double tflops = StressRate(*device, 30);
  auto sample = rig.driver->Sample(0, rig.clock.Now());
  ASSERT_TRUE(sample.ok());
  ASSERT_TRUE(sample->sm_clock_mhz.has_value());
  EXPECT_LT(*sample->sm_clock_mhz, h100.max_sm_clock_mhz);
  const double expected = 0.9 * h100.fp32_tflops * *sample->sm_clock_mhz / h100.max_sm_clock_mhz;
  EXPECT_NEAR(tflops, expected, 0.01 * expected);

  auto gemm = device->CheckedGemm(512);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->mismatches, 0u);
  EXPECT_EQ(gemm->nans, 0u);
}

TEST(SimComputeTest, OperationsTakeTheirTimeOnTheClock) {
  Rig rig("gpus: [{model: gtx1070ti}]");
  auto device = rig.Device(0);
  ASSERT_TRUE(device);
  const TimeMs before = rig.clock.Now();
  auto rate = device->CopyBandwidth(CopyKind::kHostToDevice, 1024 * kMiB, 12);
  ASSERT_TRUE(rate.ok());
  const double expected_s = 1024.0 * kMiB * 12 / (*rate * 1e9);  // about a second
  EXPECT_NEAR(static_cast<double>(rig.clock.Now() - before) / 1000, expected_s, 0.002);

  auto memory = device->Memory();
  ASSERT_TRUE(memory.ok());
  const TimeMs test_start = rig.clock.Now();
  auto pass = device->MemTest(MemPattern::kMovingInversions, memory->free_bytes * 9 / 10, 1, 8, {});
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->error_count, 0u);
  EXPECT_NEAR(pass->bandwidth_gbs, 0.6 * 0.85 * 256, 0.02 * 0.6 * 0.85 * 256);
  EXPECT_NEAR(static_cast<double>(rig.clock.Now() - test_start) / 1000, pass->seconds, 0.002);
}

TEST(SimComputeTest, StressHeatsTheCardThroughTheDriverAndLetsItCool) {
  Rig rig("gpus: [{model: rtx3090}]");
  auto idle = rig.driver->Sample(0, rig.clock.Now());
  ASSERT_TRUE(idle.ok());
  {
    auto device = rig.Device(0);
    ASSERT_TRUE(device);
    ASSERT_TRUE(device->PrepareStress(Precision::kFp32, 8192).ok());
    for (int minute = 0; minute < 10; ++minute) {
      const TimeMs until = rig.clock.Now() + kMinuteMs;
      while (rig.clock.Now() < until) ASSERT_TRUE(device->Stress(Precision::kFp32, 50, {}).ok());
      auto hot = rig.driver->Sample(0, rig.clock.Now());
      ASSERT_TRUE(hot.ok());
      EXPECT_EQ(hot->gpu_util_pct, 100.0);
    }
    auto hot = rig.driver->Sample(0, rig.clock.Now());
    ASSERT_TRUE(hot.ok());
    EXPECT_GT(*hot->temp_c, *idle->temp_c + 30);
    EXPECT_GT(*hot->power_w, 0.9 * 350);
  }
  // The device is gone: the load is off.
  rig.clock.Advance(kMinuteMs);
  auto after = rig.driver->Sample(0, rig.clock.Now());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->gpu_util_pct, 0.0);
}

TEST(SimComputeTest, StuckBitsShowInEveryPatternWithAddressAndBits) {
  // Bit 4 of the word at 1 GiB reads as 1 whatever is written.
  Rig rig(R"(gpus: [{model: a100-40gb}]
faults: [{at: 0s, gpu: 0, kind: stuck_bits, address: 0x40000000, mask: 0x10, value: 0x10}])");
  auto device = rig.Device(0);
  ASSERT_TRUE(device);
  auto memory = device->Memory();
  ASSERT_TRUE(memory.ok());
  const uint64_t reserved = memory->total_bytes - memory->free_bytes;
  for (MemPattern pattern : AllMemPatterns()) {
    SCOPED_TRACE(MemPatternName(pattern));
    auto pass = device->MemTest(pattern, memory->free_bytes * 9 / 10, 7, 4, {});
    ASSERT_TRUE(pass.ok());
    ASSERT_GE(pass->error_count, 1u);
    ASSERT_FALSE(pass->errors.empty());
    EXPECT_LE(pass->errors.size(), 4u);
    for (const MemError& e : pass->errors) {
      EXPECT_EQ(e.offset, 0x40000000u - reserved);
      EXPECT_EQ(e.xor_bits(), 0x10u);
      EXPECT_EQ(e.read & 0x10u, 0x10u);
      EXPECT_EQ(e.expected & 0x10u, 0u);
    }
    EXPECT_EQ(pass->errors[0].address - pass->errors[0].offset,
              pass->errors.back().address - pass->errors.back().offset);
  }
  // Walking ones writes bit 4 as 0 in 31 of its 32 passes.
  auto walking = device->MemTest(MemPattern::kWalkingOnes, memory->free_bytes * 9 / 10, 7, 100, {});
  ASSERT_TRUE(walking.ok());
  EXPECT_EQ(walking->error_count, 31u);
  // Own address writes the address and its complement: one of them has bit 4 clear.
  auto own = device->MemTest(MemPattern::kOwnAddress, memory->free_bytes * 9 / 10, 7, 100, {});
  ASSERT_TRUE(own.ok());
  ASSERT_EQ(own->error_count, 1u);
  EXPECT_EQ(own->errors[0].expected & ~0x10u,
            static_cast<uint32_t>(own->errors[0].address) & ~0x10u);
  // A region that ends before the bad word is clean.
  auto small = device->MemTest(MemPattern::kWalkingOnes, 256 * kMiB, 7, 100, {});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->error_count, 0u);
}

TEST(SimComputeTest, RoundTripCatchesAStuckBitInItsBuffer) {
  Rig rig(R"(gpus: [{model: t4}]
faults: [{at: 0s, gpu: 0, kind: stuck_bits, address: 0x20001000, mask: 0xffffffff, value: 0}])");
  auto device = rig.Device(0);
  ASSERT_TRUE(device);
  auto small = device->RoundTrip(64 * kMiB);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, 0u);
  auto large = device->RoundTrip(1024 * kMiB);
  ASSERT_TRUE(large.ok());
  EXPECT_GE(*large, 1u);
  EXPECT_LE(*large, 4u);
}

TEST(SimComputeTest, ComputeErrorsAndNansArriveAtTheirRatesAndApart) {
  Rig rig(R"(gpus: [{model: a100-40gb, count: 3}]
faults:
  - {at: 0s, gpu: 0, kind: compute_errors, rate: 2/min}
  - {at: 0s, gpu: 1, kind: nan, count: 5}
)");
  for (int gpu = 0; gpu < 3; ++gpu) {
    SCOPED_TRACE(gpu);
    auto device = rig.Device(gpu);
    ASSERT_TRUE(device);
    ASSERT_TRUE(device->PrepareStress(Precision::kFp32, 4096).ok());
    uint64_t mismatches = 0, nans = 0;
    int batches_with_nans = 0;
    const TimeMs until = rig.clock.Now() + 5 * kMinuteMs;
    while (rig.clock.Now() < until) {
      auto batch = device->Stress(Precision::kFp32, 100, {});
      ASSERT_TRUE(batch.ok());
      mismatches += batch->mismatches;
      nans += batch->nans;
      batches_with_nans += batch->nans > 0;
    }
    EXPECT_EQ(mismatches, gpu == 0 ? 10u : 0u);  // 2 a minute for 5 minutes
    EXPECT_EQ(nans, gpu == 1 ? 5u : 0u);
    EXPECT_EQ(batches_with_nans, gpu == 1 ? 1 : 0);
  }
}

TEST(SimComputeTest, Bf16StressRunsAtItsCatalogueRateAndTakesComputeErrors) {
  Rig rig(R"(gpus: [{model: a100-40gb, count: 2}]
faults: [{at: 0s, gpu: 1, kind: compute_errors, rate: 2/min}])");
  const GpuModel& a100 = rig.driver->model(0);
  for (int gpu = 0; gpu < 2; ++gpu) {
    SCOPED_TRACE(gpu);
    auto device = rig.Device(gpu);
    ASSERT_TRUE(device);
    ASSERT_TRUE(device->Supports(Precision::kBf16));
    ASSERT_TRUE(device->PrepareStress(Precision::kBf16, 8192).ok());
    double flops = 0, seconds = 0;
    uint64_t mismatches = 0, nans = 0;
    const TimeMs until = rig.clock.Now() + 5 * kMinuteMs;
    while (rig.clock.Now() < until) {
      auto batch = device->Stress(Precision::kBf16, 20, {});
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      EXPECT_EQ(batch->precision, Precision::kBf16);
      flops += batch->flops;
      seconds += batch->seconds;
      mismatches += batch->mismatches;
      nans += batch->nans;
    }
    EXPECT_EQ(mismatches, gpu == 1 ? 10u : 0u);  // 2 a minute for 5 minutes, as FP32
    EXPECT_EQ(nans, 0u);
    // The catalogue's BF16 figure at the clock the loaded card runs at.
    auto sample = rig.driver->Sample(gpu, rig.clock.Now());
    ASSERT_TRUE(sample.ok() && sample->sm_clock_mhz.has_value());
    const double expected =
        0.9 * a100.bf16_tflops * *sample->sm_clock_mhz / a100.max_sm_clock_mhz;
    EXPECT_NEAR(flops / seconds / 1e12, expected, 0.03 * expected);
  }
}

TEST(SimComputeTest, ASlowCardReachesItsShareOfEveryRateButTheLink) {
  Rig rig(R"(gpus: [{model: rtx3090, count: 2}]
faults: [{at: 0s, gpu: 1, kind: slow, factor: 0.8}])");
  auto clean = rig.Device(0);
  auto slow = rig.Device(1);
  ASSERT_TRUE(clean && slow);
  const double clean_tflops = StressRate(*clean, 20);
  const double slow_tflops = StressRate(*slow, 20);
  EXPECT_NEAR(slow_tflops / clean_tflops, 0.8, 0.025);
  auto clean_mem = clean->MemoryBandwidth(512 * kMiB, 10);
  auto slow_mem = slow->MemoryBandwidth(512 * kMiB, 10);
  ASSERT_TRUE(clean_mem.ok() && slow_mem.ok());
  EXPECT_NEAR(*slow_mem / *clean_mem, 0.8, 0.025);
  auto clean_h2d = clean->CopyBandwidth(CopyKind::kHostToDevice, 256 * kMiB, 4);
  auto slow_h2d = slow->CopyBandwidth(CopyKind::kHostToDevice, 256 * kMiB, 4);
  ASSERT_TRUE(clean_h2d.ok() && slow_h2d.ok());
  EXPECT_NEAR(*slow_h2d / *clean_h2d, 1.0, 0.025);
}

TEST(SimComputeTest, CopiesFollowADownTrainedLink) {
  Rig rig(R"(gpus: [{model: rtx3090, count: 2}]
faults: [{at: 0s, gpu: 1, kind: pcie_downtrain, width: 8}])");
  auto full = rig.Device(0);
  auto narrow = rig.Device(1);
  ASSERT_TRUE(full && narrow);
  for (CopyKind kind : {CopyKind::kHostToDevice, CopyKind::kDeviceToHost}) {
    auto a = full->CopyBandwidth(kind, 256 * kMiB, 4);
    auto b = narrow->CopyBandwidth(kind, 256 * kMiB, 4);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(*b / *a, 0.5, 0.025) << CopyKindName(kind);
  }
}

TEST(SimComputeTest, StopEndsALongBatchAtOnce) {
  Rig rig("gpus: [{model: gtx1070ti}]");
  host::ClockParticipant self(rig.clock);
  self.Bind();
  auto device = rig.Device(0);
  ASSERT_TRUE(device);
  ASSERT_TRUE(device->PrepareStress(Precision::kFp32, 8192).ok());
  std::stop_source stop;
  Status result;
  std::thread worker([&, participant = host::ClockParticipant(rig.clock)]() mutable {
    participant.Bind();
    // About an hour of work in one batch.
    auto batch = device->Stress(Precision::kFp32, 30000, stop.get_token());
    result = batch.status();
  });
  // This thread stays awake, so the batch cannot reach its end.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop.request_stop();
  worker.join();
  EXPECT_EQ(result.code(), Code::kAborted);
  EXPECT_EQ(rig.clock.Now(), kT0);

  std::stop_source already;
  already.request_stop();
  auto pass = device->MemTest(MemPattern::kWalkingOnes, 64 * kMiB, 1, 8, already.get_token());
  EXPECT_EQ(pass.status().code(), Code::kAborted);
}

TEST(SimComputeTest, OpenFailsForUnknownSilentOrDisabledCards) {
  Rig rig(R"(gpus: [{model: t4, count: 3}]
faults: [{at: 0s, gpu: 1, kind: unresponsive}])");
  GpuInfo stranger = rig.fleet.gpus[0];
  stranger.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  EXPECT_EQ(rig.backend->Open(stranger).status().code(), Code::kNotFound);

  auto silent = rig.backend->Open(rig.fleet.gpus[1]);
  ASSERT_FALSE(silent.ok());
  EXPECT_EQ(silent.status().code(), Code::kUnavailable);
  EXPECT_THAT(silent.status().message(), HasSubstr("does not answer"));

  auto& sim = static_cast<SimComputeBackend&>(*rig.backend);
  sim.DisableCompute(2, "CUDA_ERROR_NO_DEVICE");
  auto disabled = rig.backend->Open(rig.fleet.gpus[2]);
  ASSERT_FALSE(disabled.ok());
  EXPECT_THAT(disabled.status().message(), HasSubstr("GPU 2: CUDA_ERROR_NO_DEVICE"));
  EXPECT_TRUE(rig.backend->Open(rig.fleet.gpus[0]).ok());
}

TEST(SimComputeTest, InjectedFaultsAreCheckedAndReachNewDevices) {
  Rig rig("gpus: [{model: l40s, count: 2}]");
  auto& sim = static_cast<SimComputeBackend&>(*rig.backend);
  Fault xid;
  xid.kind = FaultKind::kXid;
  EXPECT_THAT(sim.AddFault(xid).message(), HasSubstr("xid is a driver fault"));
  Fault slow;
  slow.kind = FaultKind::kSlow;
  slow.gpu = 2;
  slow.factor = 0.5;
  EXPECT_THAT(sim.AddFault(slow).message(), HasSubstr("outside the fleet of 2 GPUs"));
  slow.gpu = 1;
  ASSERT_TRUE(sim.AddFault(slow).ok());
  auto clean = rig.Device(0);
  auto halved = rig.Device(1);
  ASSERT_TRUE(clean && halved);
  auto a = clean->MemoryBandwidth(256 * kMiB, 4);
  auto b = halved->MemoryBandwidth(256 * kMiB, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(*b / *a, 0.5, 0.02);
}

TEST(SimComputeTest, PrecisionsFollowTheArchitecture) {
  Rig rig("gpus: [{model: gtx1070ti}, {model: t4}, {model: a100-40gb}]");
  auto pascal = rig.Device(0), turing = rig.Device(1), ampere = rig.Device(2);
  ASSERT_TRUE(pascal && turing && ampere);
  EXPECT_FALSE(pascal->Supports(Precision::kFp16));
  EXPECT_TRUE(turing->Supports(Precision::kFp16));
  EXPECT_FALSE(turing->Supports(Precision::kBf16));
  EXPECT_TRUE(ampere->Supports(Precision::kBf16));
  EXPECT_EQ(pascal->PrepareStress(Precision::kFp16, 4096).code(), Code::kFailedPrecondition);
  const Status turing_bf16 = turing->PrepareStress(Precision::kBf16, 4096);
  EXPECT_EQ(turing_bf16.code(), Code::kFailedPrecondition);
  EXPECT_THAT(turing_bf16.message(), HasSubstr("bf16 is not supported on Tesla T4"));
  EXPECT_EQ(turing->Stress(Precision::kBf16, 1, {}).status().code(), Code::kFailedPrecondition);
  // Prepared first, BF16 runs on Ampere.
  EXPECT_EQ(ampere->Stress(Precision::kBf16, 1, {}).status().code(), Code::kFailedPrecondition);
  ASSERT_TRUE(ampere->PrepareStress(Precision::kBf16, 4096).ok());
  auto batch = ampere->Stress(Precision::kBf16, 1, {});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->precision, Precision::kBf16);
  EXPECT_EQ(pascal->MemTest(MemPattern::kWalkingOnes, 64ull << 30, 1, 8, {}).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace gpuherd::gpu::sim
