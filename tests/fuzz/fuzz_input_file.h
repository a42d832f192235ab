// The readers under fuzzing take a file name (as gpumembench gives them): each input is written
// to a file of this process (in /dev/shm where there is one: no disk traffic) and read back.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

inline std::string fuzz_input_file(const std::uint8_t* data, std::size_t size, const char* suffix) {
  static const std::string path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/gmb_fuzz_" +
                                  std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the harness itself failed, not the reader
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  if (std::fclose(f) != 0) __builtin_trap();
  return path;
}
