// How job commands take ids (JobRef) and speak of a spec's fields to a
// user of flags (SpokenAsFlags).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/command.h"
#include "cli/job_format.h"

namespace gpuherd::cli {
namespace {

using ::testing::HasSubstr;

std::string Check(const std::string& text) {
  std::string input = text;
  return JobRef()(input);
}

TEST(JobRefTest, TakesJobIdsAndTasksOfArrays) {
  EXPECT_EQ(Check("12"), "");
  EXPECT_EQ(Check("12_0"), "");
  EXPECT_EQ(Check("12_31"), "");
  for (const char* bad : {"0", "-1", "12_", "_3", "12_-1", "12_3_4", "x", "12.5", "0_1", ""}) {
    EXPECT_THAT(Check(bad), HasSubstr("a task of an array such as 12_3")) << bad;
  }
}

TEST(SpokenAsFlagsTest, NamesTheFlagsAJobWasGivenBy) {
  EXPECT_EQ(SpokenAsFlags("job spec field 'gpu_mem': is required for a fraction of a GPU (gpus 0.5): give the memory "
                          "the job needs, e.g. \"8GiB\""),
            "--gpu-mem is required for a fraction of a GPU (--gpus 0.5): give the memory the job needs, e.g. "
            "--gpu-mem 8GiB");
  EXPECT_EQ(SpokenAsFlags("job spec field 'gpu_mem': needs gpus: a job without GPUs has no GPU memory"),
            "--gpu-mem needs --gpus: a job without GPUs has no GPU memory");
  EXPECT_EQ(SpokenAsFlags("gpu_mem 900 GiB is more than the largest GPU here has (80 GiB, H100); ask for at most "
                          "80 GiB"),
            "--gpu-mem 900 GiB is more than the largest GPU here has (80 GiB, H100); ask for at most 80 GiB");
  EXPECT_EQ(SpokenAsFlags("job spec field 'time_limit': must be from 0 to 366 days"),
            "--time-limit: must be from 0 to 366 days");
  EXPECT_EQ(SpokenAsFlags("job spec field 'checkpoint.grace': must be from 0 to 366 days"),
            "--checkpoint-grace: must be from 0 to 366 days");
  EXPECT_EQ(SpokenAsFlags("job spec field 'mixed_models': must be true or false"),
            "--mixed-models: must be true or false");
  // Fields without a flag of their own keep their names.
  EXPECT_EQ(SpokenAsFlags("job spec field 'command': must not be empty"), "job spec field 'command': must not be empty");
}

}  // namespace
}  // namespace gpuherd::cli
