#include "exec/job_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpuherd::exec {
namespace {

class JobFilesTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-job-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(JobFilesTest, ExitRecordRoundTrips) {
  ExitRecord r;
  r.job_id = 42;
  r.attempt = 3;
  r.how = ExitRecord::How::kTimeLimit;
  r.code = 0;
  r.signal = 9;
  r.started = 1700000000123;
  r.ended = 1700000005456;
  r.message = "time limit of 5s reached; \"quoted\"";
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  auto read = ReadExitRecord(dir_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->has_value());
  const ExitRecord& got = **read;
  EXPECT_EQ(got.job_id, 42);
  EXPECT_EQ(got.attempt, 3);
  EXPECT_EQ(got.how, ExitRecord::How::kTimeLimit);
  EXPECT_EQ(got.signal, 9);
  EXPECT_EQ(got.started, 1700000000123);
  EXPECT_EQ(got.ended, 1700000005456);
  EXPECT_EQ(got.message, r.message);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

// The usual write fails as on a full disk when its temporary file cannot be
// made: a directory stands where it would go.
void BlockAtomicWrites(const std::string& dir) {
  std::filesystem::create_directory(ExitFilePath(dir) + ".tmp." + std::to_string(getpid()));
}

TEST_F(JobFilesTest, ExitRecordGoesIntoTheReservedSpaceWhenItCannotBeWritten) {
  ASSERT_TRUE(ReserveExitRecord(dir_).ok());
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/exit.reserved"), kExitReserveBytes);
  BlockAtomicWrites(dir_);
  ExitRecord r;
  r.job_id = 7;
  r.attempt = 1;
  r.how = ExitRecord::How::kExited;
  r.code = 3;
  r.message = std::string(3 * kExitReserveBytes, 'm');  // cut to fit
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/exit.reserved"));
  auto back = ReadExitRecord(dir_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->code, 3);
  EXPECT_EQ((*back)->how, ExitRecord::How::kExited);
  EXPECT_FALSE((*back)->message.empty());
  EXPECT_LT((*back)->message.size(), kExitReserveBytes);
}

TEST_F(JobFilesTest, WithoutAReservationAFailedWriteIsAnError) {
  BlockAtomicWrites(dir_);
  ExitRecord r;
  r.job_id = 7;
  EXPECT_FALSE(WriteExitRecord(dir_, r).ok());
  EXPECT_FALSE(ReadExitRecord(dir_)->has_value());
}

// No inode is made or freed per record: the reservation becomes the record.
TEST_F(JobFilesTest, AShortRecordIsWrittenIntoTheReservation) {
  ASSERT_TRUE(ReserveExitRecord(dir_).ok());
  struct stat reserved {};
  ASSERT_EQ(stat((dir_ + "/exit.reserved").c_str(), &reserved), 0);
  ExitRecord r;
  r.job_id = 7;
  r.message = "done";
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/exit.reserved"));
  struct stat written {};
  ASSERT_EQ(stat(ExitFilePath(dir_).c_str(), &written), 0);
  EXPECT_EQ(written.st_ino, reserved.st_ino);
  EXPECT_EQ(static_cast<size_t>(written.st_size), ExitRecordToJson(r).size());  // the blanks are cut off
  EXPECT_EQ((*ReadExitRecord(dir_))->message, "done");
}

TEST_F(JobFilesTest, ARecordTooLongForTheReservationIsWrittenWholeAndTheReservationDropped) {
  ASSERT_TRUE(ReserveExitRecord(dir_).ok());
  ExitRecord r;
  r.job_id = 7;
  r.message = std::string(3 * kExitReserveBytes, 'm');
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/exit.reserved"));
  EXPECT_EQ((*ReadExitRecord(dir_))->message.size(), 3 * kExitReserveBytes);
}

// The job's user swapped a hard link to another file in for the reservation:
// nothing is written into that file, and the record is written as any file.
TEST_F(JobFilesTest, AHardLinkedReservationIsNotWrittenInto) {
  std::ofstream(dir_ + "/other") << "keep";
  ASSERT_EQ(link((dir_ + "/other").c_str(), (dir_ + "/exit.reserved").c_str()), 0);
  ExitRecord r;
  r.job_id = 7;
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  std::ifstream other(dir_ + "/other");
  std::string content((std::istreambuf_iterator<char>(other)), {});
  EXPECT_EQ(content, "keep");
  EXPECT_EQ((*ReadExitRecord(dir_))->job_id, 7);
}

TEST_F(JobFilesTest, MissingFilesAreAbsentNotErrors) {
  auto exit = ReadExitRecord(dir_);
  ASSERT_TRUE(exit.ok());
  EXPECT_FALSE(exit->has_value());
  auto shim = ReadShimFile(dir_);
  ASSERT_TRUE(shim.ok());
  EXPECT_FALSE(shim->has_value());
}

TEST_F(JobFilesTest, CorruptFilesAreDataLoss) {
  std::ofstream(ExitFilePath(dir_)) << "{\"job_id\": 1, \"how\": \"vanished\"";
  auto exit = ReadExitRecord(dir_);
  EXPECT_EQ(exit.status().code(), Code::kDataLoss);
  EXPECT_NE(exit.status().message().find(ExitFilePath(dir_)), std::string::npos);
  std::ofstream(ShimFilePath(dir_)) << "{\"pid\": -4, \"start_time\": 1}";
  EXPECT_EQ(ReadShimFile(dir_).status().code(), Code::kDataLoss);
}

// The attempt folder is the job user's: a link or a FIFO put in place of
// the exit file is neither followed nor waited on.
TEST_F(JobFilesTest, ExitFileThatIsALinkOrAFifoIsNotRead) {
  ExitRecord r;
  r.job_id = 1;
  std::filesystem::create_directories(dir_ + "/other");
  ASSERT_TRUE(WriteExitRecord(dir_ + "/other", r).ok());
  std::filesystem::create_symlink(dir_ + "/other/exit", ExitFilePath(dir_));
  auto linked = ReadExitRecord(dir_);
  EXPECT_EQ(linked.status().code(), Code::kPermissionDenied);
  std::filesystem::remove(ExitFilePath(dir_));
  ASSERT_EQ(mkfifo(ExitFilePath(dir_).c_str(), 0600), 0);
  auto fifo = ReadExitRecord(dir_);  // returns at once
  EXPECT_EQ(fifo.status().code(), Code::kPermissionDenied);
  std::filesystem::remove(ExitFilePath(dir_));
  std::ofstream(ExitFilePath(dir_)) << std::string(100000, ' ');
  EXPECT_EQ(ReadExitRecord(dir_).status().code(), Code::kResourceExhausted);
}

TEST_F(JobFilesTest, ShimFileRoundTripsAndIdentifiesALiveProcess) {
  auto start = ProcessStartTime(getpid());
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  ASSERT_TRUE(WriteShimFile(dir_, {getpid(), *start}).ok());
  auto shim = ReadShimFile(dir_);
  ASSERT_TRUE(shim.ok() && shim->has_value());
  EXPECT_EQ((*shim)->pid, getpid());
  EXPECT_TRUE(IsAlive(**shim));
  // The same pid with another start time is another process.
  EXPECT_FALSE(IsAlive({getpid(), *start + 1}));
}

TEST_F(JobFilesTest, StartTimeOfMissingProcessIsNotFound) {
  // Above the kernel's pid_max ceiling (2^22), so never a live pid.
  EXPECT_EQ(ProcessStartTime(5000000).status().code(), Code::kNotFound);
  EXPECT_FALSE(IsAlive({5000000, 1}));
}

// A link planted at the temporary file's name (its pid is visible in ps)
// leads nowhere: the temporary file is made O_EXCL | O_NOFOLLOW.
TEST_F(JobFilesTest, ALinkPlantedAtTheTemporaryNameIsNotWrittenThrough) {
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious\n";
  chmod(victim.c_str(), 0600);
  std::filesystem::create_symlink(victim, ShimFilePath(dir_) + ".tmp." + std::to_string(getpid()));
  ASSERT_TRUE(WriteShimFile(dir_, {1234, 99}).ok());
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious\n");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto shim = ReadShimFile(dir_);
  ASSERT_TRUE(shim.ok() && shim->has_value());
  EXPECT_EQ((*shim)->pid, 1234);
}

}  // namespace
}  // namespace gpuherd::exec
