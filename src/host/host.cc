#include "host/host.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpuherd::host {
namespace {

namespace fs = std::filesystem;

class RootedHost : public Host {
 public:
  explicit RootedHost(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }

  Result<std::string> ReadFile(const std::string& path) const override {
    std::ifstream in(Resolve(path), std::ios::binary);
    if (!in) return IoError("cannot read " + Resolve(path) + ": " + std::strerror(errno));
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) const override {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(Resolve(path), ec)) {
      names.push_back(entry.path().filename().string());
    }
    if (ec) return IoError("cannot list " + Resolve(path) + ": " + ec.message());
    std::sort(names.begin(), names.end());
    return names;
  }

  bool Exists(const std::string& path) const override {
    std::error_code ec;
    return fs::exists(Resolve(path), ec);
  }

  Result<std::string> ReadLink(const std::string& path) const override {
    std::error_code ec;
    fs::path target = fs::read_symlink(Resolve(path), ec);
    if (ec) return IoError("cannot read link " + Resolve(path) + ": " + ec.message());
    return target.string();
  }

  std::string Hostname() const override {
    if (root_ == "/") {
      char buf[256] = {};
      if (gethostname(buf, sizeof(buf) - 1) == 0) return buf;
      return "localhost";
    }
    auto name = ReadTrimmed(*this, "/etc/hostname");
    return name.ok() ? *name : "localhost";
  }

  const std::string& root() const override { return root_; }

 private:
  std::string Resolve(const std::string& path) const {
    if (root_ == "/") return path;
    return root_ + (path.empty() || path[0] != '/' ? "/" : "") + path;
  }

  std::string root_;
};

}  // namespace

std::unique_ptr<Host> NewHost(const std::string& root) { return std::make_unique<RootedHost>(root); }

std::optional<int> ProcessSession(const Host& host, int pid) {
  auto stat = host.ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return std::nullopt;
  // The command name, in parentheses, may itself hold spaces and parentheses.
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat->substr(paren + 1));
  std::string state;
  int ppid = 0, pgrp = 0, session = 0;
  if (!(fields >> state >> ppid >> pgrp >> session)) return std::nullopt;
  return session;
}

Result<std::string> ReadTrimmed(const Host& host, const std::string& path) {
  auto text = host.ReadFile(path);
  if (!text.ok()) return text.status();
  std::string line = text->substr(0, text->find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

}  // namespace gpuherd::host
