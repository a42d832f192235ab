// The folder a run writes into, taken for the run alone. A run never mixes its files with
// another's: an existing folder that holds anything is refused unless the user says what to do
// with it (--overwrite clears what a run owns, --resume keeps its finished cases), a lock file
// held for the whole run refuses a second run into the same folder (naming the holder's pid),
// and a default folder name that is taken (two runs of one config in the same second) gets a
// suffix: -2, -3, ...
#pragma once

#include <stdexcept>
#include <string>

namespace gmb {

// A folder that cannot be used: exit 2 before anything runs; the message names it.
struct OutputFolderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class OutputMode {
  Fresh,      // the folder must not exist, or be empty
  Overwrite,  // what a run owns is cleared first (results.*, cases/, oom/, timelines/, plots/)
  Resume,     // the folder of an earlier run: cases/ kept, the tables and their files cleared
};

class OutputFolder {
 public:
  // path: the folder (--output or --resume); flag: its option for messages ("--output").
  OutputFolder(const std::string& path, OutputMode mode, const std::string& flag);
  // A default folder `base` (results/<name>-<time>), made unique with -2, -3, ... if taken.
  static OutputFolder fresh_default(const std::string& base);
  OutputFolder(OutputFolder&& other) noexcept;
  OutputFolder& operator=(OutputFolder&&) = delete;
  OutputFolder(const OutputFolder&) = delete;
  // Releases the lock and removes the lock file; a folder this run made and left empty (a bad
  // trace found mid-run) is removed too: nothing is left of a run that wrote nothing.
  ~OutputFolder();

  const std::string& path() const { return path_; }

  // The names a run writes at the top of its folder; --overwrite removes these and nothing else.
  static const char* const kOwned[];
  static constexpr const char* kLockName = ".gpumembench.lock";

 private:
  OutputFolder() = default;
  void lock(const std::string& flag);
  std::string path_;
  int lock_fd_ = -1;
  bool created_ = false;  // this run made the folder
};

}  // namespace gmb
