#include "common/huge_page_allocator.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/text_excerpt.h"

namespace gmb::huge_pages {

namespace {

std::string first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// A virtio balloon with free page reporting negotiated: its features file is one '0'/'1' per
// bit, bit 0 first.
bool balloon_reports_free_pages(const std::string& sysfs) {
  std::error_code ec;
  const std::filesystem::path devices = std::filesystem::path(sysfs) / "bus/virtio/devices";
  for (std::filesystem::directory_iterator it(devices, ec), end; !ec && it != end; it.increment(ec)) {
    if (first_line(it->path() / "device") != "0x0005") continue;  // VIRTIO_ID_BALLOON
    const std::string features = first_line(it->path() / "features");
    if (features.size() > 5 && features[5] == '1') return true;  // VIRTIO_BALLOON_F_REPORTING
  }
  return false;
}

std::string lower(const char* text) {
  std::string s = text;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

#if GMB_HUGE_PAGES
const Choice& this_process() {
  static const Choice choice = decide(std::getenv("GMB_HUGE_PAGES"), "/sys");
  return choice;
}
#endif

}  // namespace

Choice decide(const char* setting, const std::string& sysfs) {
  const std::string set = setting ? lower(setting) : "auto";
  if (set == "on") return {true, "2 MiB pages (GMB_HUGE_PAGES=on)"};
  if (set == "off") return {false, "4 KiB pages (GMB_HUGE_PAGES=off)"};
  const std::string unknown =
      set == "auto" ? "" : "; GMB_HUGE_PAGES='" + printable_text(setting) + "' not understood (on, off, auto): auto";
  if (balloon_reports_free_pages(sysfs))
    return {false, "4 KiB pages (this machine's balloon reports free pages to its host; GMB_HUGE_PAGES=on to change" +
                       unknown + ")"};
  const std::string thp = first_line(std::filesystem::path(sysfs) / "kernel/mm/transparent_hugepage/enabled");
  if (thp.find("[never]") != std::string::npos)
    return {true, "4 KiB pages (transparent huge pages are off on this machine" + unknown + ")"};
  return {true, "2 MiB pages (transparent huge pages, advised" + unknown + ")"};
}

std::string choice_text() {
#if GMB_HUGE_PAGES
  return this_process().why;
#else
  return "the system's pages (this build gives no advice: AddressSanitizer, or no madvise)";
#endif
}

}  // namespace gmb::huge_pages

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

bool advised() { return this_process().advise; }

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
  // Without the advice the pages are small ones (where transparent huge pages are "madvise", as
  // most distributions set them); with the advice not to, small ones where they are "always".
  madvise(p, want, advised() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
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
