#include "workloads/content_feed.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>

namespace gmb {

std::unique_ptr<ContentFeed> ContentFeed::start(std::unique_ptr<ByteInput>& in, std::uint64_t max_bytes, std::string what) {
  // Room for max_bytes + 1: the byte that tells a content too large, as read_rest reads it.
  if (max_bytes >= (std::uint64_t(1) << 46)) return nullptr;
  const std::size_t reserved = static_cast<std::size_t>(max_bytes) + 1;
  void* p = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  ::madvise(p, reserved, MADV_HUGEPAGE);  // tens of MB written once: 2 MiB pages, 512 times fewer faults
#endif
  std::unique_ptr<ContentFeed> feed(new ContentFeed(std::move(in), static_cast<char*>(p), reserved));
  feed->reader_ = std::thread([f = feed.get(), max_bytes, what = std::move(what)] { f->read(max_bytes, what); });
  return feed;
}

ContentFeed::ContentFeed(std::unique_ptr<ByteInput> in, char* buffer, std::size_t reserved)
    : in_(std::move(in)), buffer_(buffer), reserved_(reserved),
      expected_(static_cast<std::size_t>(std::min<std::uint64_t>(in_->size_hint(), reserved - 1))) {}

ContentFeed::~ContentFeed() {
  if (reader_.joinable()) reader_.join();
  ::munmap(buffer_, reserved_);
}

void ContentFeed::read(std::uint64_t max_bytes, const std::string& what) {
  try {
    in_->stream_rest(buffer_, max_bytes, what, [this](std::uint64_t n) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.store(static_cast<std::size_t>(n), std::memory_order_release);
      }
      arrived_.notify_all();
    });
  } catch (...) {
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  arrived_.notify_all();
}

std::size_t ContentFeed::wait_for(std::size_t n) {
  const std::size_t ready = ready_.load(std::memory_order_acquire);
  if (ready >= n) return ready;
  std::unique_lock<std::mutex> lock(mutex_);
  arrived_.wait(lock, [&] { return done_ || ready_.load(std::memory_order_acquire) >= n; });
  return ready_.load(std::memory_order_acquire);
}

std::string_view ContentFeed::finish() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_.wait(lock, [&] { return done_; });
  }
  if (error_) std::rethrow_exception(error_);
  return std::string_view(buffer_, ready_.load(std::memory_order_acquire));
}

int ContentFeed::usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace gmb
