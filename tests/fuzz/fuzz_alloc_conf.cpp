// libFuzzer target: PyTorch's allocator option string (PYTORCH_CUDA_ALLOC_CONF) as the caching
// allocator parses it. Any input must parse or throw OptionError. Corpus: tests/fuzz/corpus/alloc_conf.
#include <cstdint>
#include <string_view>

#include "allocators/allocator.h"  // OptionError
#include "allocators/caching/alloc_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    gmb::caching::parse_alloc_conf(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const gmb::OptionError&) {
  }
  return 0;
}
