#include "workloads/content_feed.h"

#include "common/huge_page_allocator.h"

#include <sys/mman.h>

#include <algorithm>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4  // Linux 5.7 (older headers lack the name; older kernels refuse it)
#endif

namespace gmb {

std::unique_ptr<ContentFeed> ContentFeed::start(std::unique_ptr<ByteInput>& in, std::uint64_t max_bytes, std::string what,
                                                std::size_t window) {
  // Room for max_bytes + 1: the byte that tells a content too large, as read_rest reads it;
  // whole pages, from a page boundary (pages move whole, as huge pages).
  if (max_bytes >= (std::uint64_t(1) << 46)) return nullptr;
  const std::size_t reserved = (static_cast<std::size_t>(max_bytes) + 1 + kPage - 1) / kPage * kPage;
  const std::size_t mapped = reserved + kPage;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  char* buffer = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(p) + kPage - 1) / kPage * kPage);
#if GMB_HUGE_PAGES
  // Tens of MB written once: 2 MiB pages, 512 times fewer faults, where huge pages are not dear.
  ::madvise(buffer, reserved, huge_pages::advised() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
  if (window) window = std::max(window, 2 * kPage);
  std::unique_ptr<ContentFeed> feed(
      new ContentFeed(std::move(in), static_cast<char*>(p), mapped, buffer, reserved, max_bytes, std::move(what), window));
  feed->helper_ = std::thread([f = feed.get()] { f->read(); });
  return feed;
}

ContentFeed::ContentFeed(std::unique_ptr<ByteInput> in, char* mapping, std::size_t mapped, char* buffer,
                         std::size_t reserved, std::uint64_t max_bytes, std::string what, std::size_t window)
    : in_(std::move(in)),
      path_(in_->path()),
      start_offset_(in_->offset()),
      mapping_(mapping),
      mapped_(mapped),
      buffer_(buffer),
      reserved_(reserved),
      max_bytes_(max_bytes),
      what_(std::move(what)),
      window_(window),
      expected_(static_cast<std::size_t>(std::min<std::uint64_t>(in_->size_hint(), max_bytes))) {}

ContentFeed::~ContentFeed() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reader_gone_ = true;  // a reader that stopped early (an error) leaves the helper to finish
  }
  room_cv_.notify_all();
  if (helper_.joinable()) helper_.join();
  ::munmap(mapping_, mapped_);
}

void ContentFeed::read() {
  try {
    in_->stream_rest(buffer_, max_bytes_, what_, [this](std::uint64_t n) { arrived(static_cast<std::size_t>(n)); });
  } catch (...) {
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  arrived_cv_.notify_all();
}

void ContentFeed::arrived(std::size_t n) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.store(n);
    wake = reader_wants_ != 0 && n >= reader_wants_;  // (on one core a wake that finds too little is a switch for nothing)
  }
  if (wake) arrived_cv_.notify_all();
  if (!window_) return;
  if (reader_gone_.load()) {  // (a reader stopped by an error: the gzip's own damage, found later, wins)
    if (n > released_.load()) released_.store(n);
    make_room(n);
    return;
  }
  // The next block (ByteInput::stream_rest writes at most a quarter MiB) stays within the
  // window of what the reader released, unless the reader waits for bytes not there yet (it
  // may be slow to wake and release) or is gone. Held back, the helper goes on once half the
  // window is free, not at the reader's next release: on one core every wake is a switch of
  // threads, and a block at a time made one per batch of the pickle.
  const std::size_t next_end = n + (std::size_t(1) << 18);
  if (next_end > released_.load() + window_) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::size_t needs = next_end - window_ / 2;  // released up to here: room for half a window of blocks
    helper_needs_.store(needs);
    room_cv_.wait(lock, [&] { return released_.load() >= needs || reader_wants_ > ready_.load() || reader_gone_; });
    helper_needs_.store(kNotWaiting);
  }
  make_room(n);
}

// The pages the next block writes that hold nothing yet take the memory of pages wholly behind
// the reader, moved (their page tables, not their bytes): no fault, no zero-fill by the kernel.
void ContentFeed::make_room(std::size_t n) {
  const std::size_t next_end = std::min(n + (std::size_t(1) << 18), reserved_);
  const std::size_t last = (next_end + kPage - 1) / kPage;
  const std::size_t free_end = released_.load() / kPage;  // pages below it are wholly released
  for (std::size_t page = std::max(written_pages_, (n + kPage - 1) / kPage); page < last; ++page) {
    if (next_free_ >= free_end || next_free_ >= page) break;
    // DONTUNMAP leaves the old range mapped and empty: the reservation keeps no hole.
    void* moved = ::mremap(buffer_ + next_free_ * kPage, kPage, kPage, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                           buffer_ + page * kPage);
    if (moved == MAP_FAILED) {  // a kernel that cannot: the content stays whole from here on
      window_ = 0;
      break;
    }
    ++next_free_;
    pages_moved_.fetch_add(1);
  }
  written_pages_ = std::max(written_pages_, last);
}

std::size_t ContentFeed::wait_for(std::size_t n) {
  const std::size_t ready = ready_.load();
  if (ready >= n) return ready;
  std::unique_lock<std::mutex> lock(mutex_);
  reader_wants_ = n;
  if (helper_needs_.load() != kNotWaiting) room_cv_.notify_all();  // held back by the window: the reader needs these bytes
  arrived_cv_.wait(lock, [&] { return done_ || ready_.load() >= n; });
  reader_wants_ = 0;
  return ready_.load();
}

void ContentFeed::release(std::size_t offset) {
  if (offset <= released_.load()) return;
  released_.store(offset);
  // Stored before helper_needs_ is read, and the helper sets that before it tests released_
  // under the lock: either it sees this offset or it is waiting to be woken here, once the
  // release lets it go on (not at every batch of a pickle of small batches).
  if (offset >= helper_needs_.load()) {
    std::lock_guard<std::mutex> lock(mutex_);
    room_cv_.notify_all();
  }
}

void ContentFeed::finish() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    reader_gone_ = true;
    room_cv_.notify_all();
    arrived_cv_.wait(lock, [&] { return done_; });
  }
  if (error_) std::rethrow_exception(error_);
}

std::string_view ContentFeed::content() {
  finish();
  if (pages_moved_.load() == 0) return std::string_view(buffer_, ready_.load());
  if (again_.empty()) {
    auto in = ByteInput::open(path_);
    for (std::uint64_t skipped = 0; skipped < start_offset_;) {
      const std::string_view b = in->peek(static_cast<std::size_t>(std::min<std::uint64_t>(start_offset_ - skipped, 1 << 20)));
      if (b.empty()) break;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), start_offset_ - skipped));
      in->consume(n);
      skipped += n;
    }
    again_ = in->read_rest(max_bytes_, what_);
  }
  return again_;
}

}  // namespace gmb
