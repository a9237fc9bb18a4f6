#include "doctor/test_tree.h"

#include <unistd.h>

#include <atomic>
#include <fstream>

#include <gtest/gtest.h>

namespace gpuherd::doctor {

namespace fs = std::filesystem;

std::string FixturePath(const std::string& name) { return std::string(GPUHERD_DOCTOR_TESTDATA) + "/" + name; }

TestTree::TestTree(const std::string& fixture) : fixture_(fixture) {
  if (fixture_.empty()) {
    MakeWritable();
  } else {
    host_ = host::NewHost(FixturePath(fixture_));
  }
}

TestTree::~TestTree() {
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

void TestTree::MakeWritable() {
  if (!dir_.empty()) return;
  static std::atomic<int> counter{0};
  dir_ = fs::temp_directory_path() /
         ("gpuherd_doctor_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  if (!fixture_.empty()) fs::copy(FixturePath(fixture_), dir_, fs::copy_options::recursive);
  host_ = host::NewHost(dir_.string());
}

void TestTree::Write(const std::string& path, const std::string& content) {
  MakeWritable();
  const fs::path file = dir_ / path.substr(path.find_first_not_of('/'));
  fs::create_directories(file.parent_path());
  std::ofstream(file) << content << "\n";
}

void TestTree::Remove(const std::string& path) {
  MakeWritable();
  fs::remove_all(dir_ / path.substr(path.find_first_not_of('/')));
}

Report TestTree::Run(const std::map<std::string, std::string>& env, const std::vector<gpu::GpuInfo>& gpus) const {
  DoctorInput input;
  input.host = host_.get();
  input.env = env;
  input.gpus = gpus;
  return RunDoctor(input);
}

Check FindCheck(const Report& report, const std::string& id) {
  for (const Check& check : report.checks) {
    if (check.id == id) return check;
  }
  ADD_FAILURE() << "no check " << id;
  return Check{};
}

bool HasCheck(const Report& report, const std::string& id) {
  for (const Check& check : report.checks) {
    if (check.id == id) return true;
  }
  return false;
}

}  // namespace gpuherd::doctor
