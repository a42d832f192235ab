#include "harness/io/output_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace gmb {

namespace fs = std::filesystem;

const OwnedFiles& run_files() {
  static const OwnedFiles files{
      {"results.json", "results.csv", "results.md", "results.tex", "cases", "oom", "timelines", "plots"}, true};
  return files;
}
const OwnedFiles& report_files() {
  static const OwnedFiles files{run_files().names, false};
  return files;
}
const OwnedFiles& frontier_files() {
  static const OwnedFiles files{{"frontier.json", "frontier.md", "frontier.csv"}, false, true};
  return files;
}
const OwnedFiles& compare_files() {
  static const OwnedFiles files{{"compare.md", "compare.csv", "compare.json", "compare.tex"}, false, true};
  return files;
}

namespace {

bool is_owned(const OwnedFiles& owned, const std::string& name) {
  for (const std::string& n : owned.names)
    if (name == n) return true;
  return false;
}

// A temporary a writer of ours left behind when it was killed: ".<name>.tmp.<pid>".
bool is_our_temporary(const std::string& name) { return name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos; }

std::string errno_text(int err) { return std::strerror(err); }

void remove_path(const fs::path& p, const std::string& flag) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw OutputFolderError(fmt::format("{} {}: cannot remove {}: {}", flag, p.parent_path().string(), p.string(), ec.message()));
}

}  // namespace

OutputFolder::OutputFolder(const std::string& path, OutputMode mode, const std::string& flag, const OwnedFiles& owned)
    : path_(path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw OutputFolderError(fmt::format("{} {}: is a file, not a folder", flag, path));
  if (!fs::exists(st)) {
    if (mode == OutputMode::Resume)
      throw OutputFolderError(fmt::format("{} {}: no such folder (nothing to resume)", flag, path));
    fs::create_directories(path, ec);
    if (ec) throw OutputFolderError(fmt::format("{} {}: cannot create the folder: {}", flag, path, ec.message()));
    created_ = true;
  }
  try {
    lock(flag);
    check_entries(mode, flag, owned);
  } catch (...) {  // refused: nothing of ours stays (the lock file, a folder made here)
    release();
    throw;
  }
}

void OutputFolder::check_entries(OutputMode mode, const std::string& flag, const OwnedFiles& owned) {
  const std::string& path = path_;
  std::error_code ec;
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().filename() != kLockName) entries.push_back(e.path().filename().string());
  if (ec) throw OutputFolderError(fmt::format("{} {}: cannot list the folder: {}", flag, path, ec.message()));
  switch (mode) {
    case OutputMode::Fresh:
      if (owned.shares_folder)
        entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const std::string& n) { return !is_owned(owned, n); }),
                      entries.end());
      if (!entries.empty()) {
        std::string some;
        for (std::size_t i = 0; i < entries.size() && i < 3; ++i) some += (i ? ", " : "") + entries[i];
        if (entries.size() > 3) some += ", ...";
        throw OutputFolderError(fmt::format(
            "{} {}: the folder {} {}; --overwrite replaces the files this command writes there{}, or choose "
            "another folder",
            flag, path, owned.shares_folder ? "holds the files of an earlier one:" : "is not empty (it holds", some + (owned.shares_folder ? "" : ")"), owned.resumable ? fmt::format(", --resume {} continues the run that wrote them", path) : ""));
      }
      break;
    case OutputMode::Overwrite:
      for (const auto& name : entries)
        if (is_owned(owned, name) || is_our_temporary(name)) remove_path(fs::path(path) / name, flag);
      break;
    case OutputMode::Resume:
      if (!fs::is_directory(fs::path(path) / "cases"))
        throw OutputFolderError(fmt::format("{} {}: not the folder of an earlier run (it has no cases/ folder)", flag, path));
      for (const auto& name : entries)
        if ((is_owned(owned, name) && name != "cases") || is_our_temporary(name)) remove_path(fs::path(path) / name, flag);
      for (const auto& e : fs::directory_iterator(fs::path(path) / "cases", ec))
        if (is_our_temporary(e.path().filename().string())) remove_path(e.path(), flag);
      break;
  }
}

OutputFolder OutputFolder::fresh_default(const std::string& base) {
  std::error_code ec;
  const fs::path parent = fs::path(base).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) throw OutputFolderError(fmt::format("cannot create the folder {}: {}", parent.string(), ec.message()));
  }
  for (int k = 1; k <= 1000; ++k) {
    const std::string name = k == 1 ? base : fmt::format("{}-{}", base, k);
    // mkdir either makes the folder or finds it taken: two runs never get the same one.
    if (::mkdir(name.c_str(), 0777) == 0) {
      OutputFolder f;
      f.path_ = name;
      f.created_ = true;
      f.lock("--output");
      return f;
    }
    if (errno != EEXIST) throw OutputFolderError(fmt::format("cannot create the folder {}: {}", name, errno_text(errno)));
  }
  throw OutputFolderError(fmt::format("{} and 999 more folders of that name exist: choose --output", base));
}

void OutputFolder::lock(const std::string& flag) {
  const std::string lock_path = (fs::path(path_) / kLockName).string();
  for (int attempt = 0; attempt < 10; ++attempt) {
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw OutputFolderError(fmt::format("{} {}: cannot write into the folder: {}", flag, path_, errno_text(errno)));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char buf[64] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      throw OutputFolderError(fmt::format(
          "{} {}: another gpumembench run is writing there ({}); wait for it to end or choose another folder", flag,
          path_, holder.empty() ? "its pid unknown" : "pid " + holder));
    }
    // The holder before us may have removed the file between our open and our lock: then the
    // lock is on a file nobody else sees; take the one at the path.
    struct stat held {}, at_path {};
    if (::fstat(fd, &held) == 0 && ::stat(lock_path.c_str(), &at_path) == 0 && held.st_ino == at_path.st_ino &&
        held.st_dev == at_path.st_dev) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const int err = errno;
        ::close(fd);
        ::unlink(lock_path.c_str());
        throw OutputFolderError(fmt::format("{} {}: cannot write {}: {}", flag, path_, lock_path, errno_text(err)));
      }
      lock_fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw OutputFolderError(fmt::format("{} {}: cannot take the lock {}", flag, path_, lock_path));
}

OutputFolder::OutputFolder(OutputFolder&& other) noexcept
    : path_(std::move(other.path_)), lock_fd_(other.lock_fd_), created_(other.created_) {
  other.lock_fd_ = -1;
  other.created_ = false;
}

OutputFolder::~OutputFolder() { release(); }

void OutputFolder::release() noexcept {
  if (lock_fd_ >= 0) {
    ::unlink((fs::path(path_) / kLockName).c_str());
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  if (created_) {  // rmdir removes a folder only when it is empty
    ::rmdir((fs::path(path_) / "cases").c_str());
    ::rmdir(path_.c_str());
    created_ = false;
  }
}

}  // namespace gmb
