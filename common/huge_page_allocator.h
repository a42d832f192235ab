// A std::allocator that asks the kernel for transparent huge pages (madvise(MADV_HUGEPAGE)) for
// blocks of kHugeThreshold bytes (one huge page) or more: a vector of tens of megabytes that is filled once (a
// parsed snapshot's nodes) otherwise takes a page fault every 4 KiB, a sixth of the parse time
// on the build machine; with 2 MiB pages it takes one per 2 MiB. Smaller blocks, and systems
// without madvise, use std::allocator. Where the kernel gives no huge page the memory is the
// same as plain mmap's. Freed large blocks are kept for reuse (huge_pages below). Under
// AddressSanitizer every block comes from std::allocator, so that ASan watches the bounds of the
// large ones too.
//
// The advice is left out (4 KiB pages) on a virtual machine whose balloon reports free pages to
// its host (virtio-balloon's free page reporting): the host takes back free 2 MiB blocks, the
// ones the kernel's huge pages come from, and a first touch of one then waits for the host to
// back it again, about 2.5 ms per MB there, several times a small page's cost; a lone run was a
// third slower (docs/PERFORMANCE_LOG.md, sessions 24-26 and 30). GMB_HUGE_PAGES=on|off in the
// environment overrides that choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define GMB_HUGE_PAGES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GMB_HUGE_PAGES 0
#endif
#endif
#if !defined(GMB_HUGE_PAGES) && defined(__linux__) && defined(MADV_HUGEPAGE)
#define GMB_HUGE_PAGES 1
#endif
#if !defined(GMB_HUGE_PAGES)
#define GMB_HUGE_PAGES 0
#endif

namespace gmb {

#if GMB_HUGE_PAGES
// The blocks of kHugeThreshold bytes or more: mapped with the huge-page advice and, once freed,
// kept for reuse (up to 512 MiB in all; a block may serve a smaller one later, the rest kept).
// Memory the process has already touched needs no page faults and no zero-fill by the kernel:
// a snapshot's inflated pickle, freed once parsed, holds the ops converted from it.
namespace huge_pages {
// Whether blocks are advised into huge pages in this process: decided once, from
// GMB_HUGE_PAGES and the machine (decide() below).
bool advised();
void* take(std::size_t bytes);  // bytes >= HugePageAllocator's kHugeThreshold; throws std::bad_alloc
void give(void* block);         // a block take() returned
void release_kept();            // unmaps the blocks kept for reuse (live ones stay)
}  // namespace huge_pages
#endif

namespace huge_pages {
struct Choice {
  bool advise = true;  // MADV_HUGEPAGE on the large blocks; else MADV_NOHUGEPAGE
  std::string why;     // in words, for `gpumembench --version`
};
// The choice advised() makes, apart from the process: `setting` is GMB_HUGE_PAGES (nullptr when
// unset; on, off or auto in any case; another value is auto, and `why` says it was not
// understood) and `sysfs` the root whose bus/virtio/devices/*/ say whether a balloon reports free
// pages (a device of id 0x0005 whose feature bit 5, VIRTIO_BALLOON_F_REPORTING, is set) and whose
// kernel/mm/transparent_hugepage/enabled says whether the advice can give huge pages at all.
Choice decide(const char* setting, const std::string& sysfs);
// What this process chose and why (`gpumembench --version`: timings on two machines differ by
// it). In a build that gives no advice (AddressSanitizer), says so.
std::string choice_text();
}  // namespace huge_pages

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugeThreshold = std::size_t(2) << 20;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(std::size_t n) {
#if GMB_HUGE_PAGES
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= kHugeThreshold) return static_cast<T*>(huge_pages::take(bytes));
#endif
    return std::allocator<T>().allocate(n);
  }

  void deallocate(T* p, std::size_t n) {
#if GMB_HUGE_PAGES
    if (n * sizeof(T) >= kHugeThreshold) {
      huge_pages::give(p);
      return;
    }
#endif
    std::allocator<T>().deallocate(p, n);
  }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

}  // namespace gmb
