// A std::allocator that asks the kernel for transparent huge pages (madvise(MADV_HUGEPAGE)) for
// blocks of kHugeThreshold bytes (one huge page) or more: a vector of tens of megabytes that is filled once (a
// parsed snapshot's nodes) otherwise takes a page fault every 4 KiB, a sixth of the parse time
// on the build machine; with 2 MiB pages it takes one per 2 MiB. Smaller blocks, and systems
// without madvise, use std::allocator. Where the kernel gives no huge page the memory is the
// same as plain mmap's. Under AddressSanitizer every block comes from std::allocator, so that
// ASan watches the bounds of the large ones too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

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

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugeThreshold = std::size_t(2) << 20;
  static constexpr std::size_t kHugePage = std::size_t(2) << 20;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(std::size_t n) {
#if GMB_HUGE_PAGES
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= kHugeThreshold) {
      void* p = mmap(nullptr, mapped(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      madvise(p, mapped(bytes), MADV_HUGEPAGE);  // advice: without it the pages are small ones
      return static_cast<T*>(p);
    }
#endif
    return std::allocator<T>().allocate(n);
  }

  void deallocate(T* p, std::size_t n) {
#if GMB_HUGE_PAGES
    if (n * sizeof(T) >= kHugeThreshold) {
      munmap(p, mapped(n * sizeof(T)));
      return;
    }
#endif
    std::allocator<T>().deallocate(p, n);
  }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }

 private:
  static std::size_t mapped(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
};

}  // namespace gmb
