#include "harness/io/bounded_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gmb {

std::string read_file_bounded(const std::string& path, std::size_t max_bytes) {
  // Opened without blocking (a FIFO without a writer), then blocking again for the reads (a
  // pipe with a writer delivers as it writes).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw BoundedReadError(fmt::format("cannot open: {}", std::strerror(errno)));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw BoundedReadError(fmt::format("cannot read: {}", std::strerror(err)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(fd);
      throw BoundedReadError(fmt::format("larger than {} MiB", max_bytes >> 20));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace gmb
