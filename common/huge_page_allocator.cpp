#include "common/huge_page_allocator.h"

#if GMB_HUGE_PAGES
#include <cassert>
#include <mutex>
#include <utility>
#include <vector>

namespace gmb::huge_pages {

namespace {

constexpr std::size_t kPage = std::size_t(2) << 20;
// Freed blocks kept for the next ones, in all (a parse's arrays, then the ops made from them).
constexpr std::size_t kKeepAtMost = std::size_t(512) << 20;

struct Blocks {
  std::mutex mu;
  std::vector<std::pair<char*, std::size_t>> live, kept;  // (start, mapped bytes)
  std::size_t kept_bytes = 0;
};
Blocks& blocks() {
  static Blocks* b = new Blocks;  // never destroyed: blocks may be freed during static destruction
  return *b;
}

}  // namespace

void* take(std::size_t bytes) {
  const std::size_t want = (bytes + kPage - 1) / kPage * kPage;
  Blocks& b = blocks();
  std::lock_guard<std::mutex> lock(b.mu);
  // The smallest kept block that holds it, its first `want` bytes; the rest stays kept.
  auto best = b.kept.end();
  for (auto it = b.kept.begin(); it != b.kept.end(); ++it)
    if (it->second >= want && (best == b.kept.end() || it->second < best->second)) best = it;
  if (best != b.kept.end()) {
    char* p = best->first;
    b.kept_bytes -= want;
    if (best->second == want) b.kept.erase(best);
    else *best = {p + want, best->second - want};
    b.live.emplace_back(p, want);
    return p;
  }
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, want, MADV_HUGEPAGE);  // advice: without it the pages are small ones
  b.live.emplace_back(static_cast<char*>(p), want);
  return p;
}

void give(void* p) {
  Blocks& b = blocks();
  std::lock_guard<std::mutex> lock(b.mu);
  auto it = b.live.begin();
  while (it != b.live.end() && it->first != p) ++it;
  assert(it != b.live.end() && "a block HugePageAllocator did not give");
  if (it == b.live.end()) return;
  const std::pair<char*, std::size_t> block = *it;
  *it = b.live.back();
  b.live.pop_back();
  if (b.kept_bytes + block.second <= kKeepAtMost) {
    b.kept.push_back(block);
    b.kept_bytes += block.second;
  } else {
    munmap(block.first, block.second);
  }
}

void release_kept() {
  Blocks& b = blocks();
  std::lock_guard<std::mutex> lock(b.mu);
  for (const auto& [p, bytes] : b.kept) munmap(p, bytes);
  b.kept.clear();
  b.kept_bytes = 0;
}

}  // namespace gmb::huge_pages
#endif
