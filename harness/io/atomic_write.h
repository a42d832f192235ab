// Every file of a run is written whole or not at all, checked through close: the text goes to a
// temporary of this process (".<name>.tmp.<pid>" beside the file: two processes never share one),
// is flushed to the disk, and is renamed over the file. A full disk, a closed quota or a folder
// that vanished is a FileWriteError naming the file, and the temporary is removed. A target that
// is not a regular file (/dev/stdout, a FIFO, /dev/full) is written in place, checked the same way.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gmb {

struct FileWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;  // "cannot write PATH: why"
};

void write_file_atomically(const std::string& path, std::string_view text);

// For a writer that streams a file: where to write it before renaming it into place,
// ".<name>.tmp.<pid>" beside it; path itself when it exists and is not a regular file.
std::string temporary_path_for(const std::string& path);

}  // namespace gmb
