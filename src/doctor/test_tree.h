// Test support: a fixture tree (testdata/tuned or testdata/untuned) that a
// test may change one file at a time: read in place until the first change,
// which copies it to a temporary directory.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "doctor/doctor.h"
#include "host/host.h"

namespace gpuherd::doctor {

std::string FixturePath(const std::string& name);

class TestTree {
 public:
  // `fixture` empty: an empty tree.
  explicit TestTree(const std::string& fixture = "");
  ~TestTree();
  TestTree(const TestTree&) = delete;
  TestTree& operator=(const TestTree&) = delete;

  // Writes `content` plus a newline, creating directories; `path` is absolute in the tree.
  void Write(const std::string& path, const std::string& content);
  void Remove(const std::string& path);
  // Replaced by the first Write or Remove: take it again after changing the tree.
  const host::Host& host() const { return *host_; }
  const std::string& root() const { return host_->root(); }

  // The doctor over this tree, with the given environment and GPUs.
  Report Run(const std::map<std::string, std::string>& env = {}, const std::vector<gpu::GpuInfo>& gpus = {}) const;

 private:
  void MakeWritable();

  std::string fixture_;
  std::filesystem::path dir_;  // empty while the fixture is read in place
  std::unique_ptr<host::Host> host_;
};

// A copy of the check with this id; fails the test (and returns an empty
// check) when absent.
Check FindCheck(const Report& report, const std::string& id);
bool HasCheck(const Report& report, const std::string& id);

}  // namespace gpuherd::doctor
