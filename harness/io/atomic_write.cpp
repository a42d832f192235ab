#include "harness/io/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace gmb {

namespace {

[[noreturn]] void fail(const std::string& path, int err) {
  throw FileWriteError(fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

// All of text to fd, then the data to the disk (a full disk may only say so here); errno on failure.
int write_all(int fd, std::string_view text, bool sync) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  if (sync && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return errno;
  return 0;
}

}  // namespace

std::string temporary_path_for(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return path;
  const std::filesystem::path target(path);
  return (target.parent_path() / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid())).string();
}

void write_file_atomically(const std::string& path, std::string_view text) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw FileWriteError(fmt::format("cannot write {}: it is a folder", path));
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {  // a device or a FIFO: in place
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(path, errno);
    int err = write_all(fd, text, false);
    if (::close(fd) != 0 && !err) err = errno;
    if (err) fail(path, err);
    return;
  }
  const std::string tmp = temporary_path_for(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, errno);
  int err = write_all(fd, text, true);
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    fail(path, err);
  }
}

}  // namespace gmb
