#include "harness/cli/cli.h"

#include <malloc.h>

int main(int argc, char** argv) {
  // Blocks up to 32 MiB (glibc's most) from the heap, and up to 256 MiB of freed heap kept, not
  // each block mapped fresh and unmapped when freed: memory a case, a step or a trace chunk frees
  // serves the next without page faults and the kernel's zero-fill, which the harness would
  // otherwise spend on every run (the replay's peak RSS stays flat: memory is reused, not grown).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  return gmb::run_cli(argc, argv);
}
