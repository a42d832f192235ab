// The folder a run writes into, taken for the run alone. A run never mixes its files with
// another's: an existing folder that holds anything is refused unless the user says what to do
// with it (--overwrite clears what a run owns, --resume keeps its finished cases), a lock file
// held for the whole run refuses a second run into the same folder (naming the holder's pid),
// and a default folder name that is taken (two runs of one config in the same second) gets a
// suffix: -2, -3, ...
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace gmb {

// A folder that cannot be used: exit 2 before anything runs; the message names it.
struct OutputFolderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a command writes at the top of its folder: --overwrite removes these and nothing else.
struct OwnedFiles {
  std::vector<std::string> names;
  bool resumable = false;  // the command has --resume (a run keeps its finished cases/)
  // Writes beside other files (a frontier into a run's folder, for the plots): a folder is refused
  // only when it holds the command's own files. A run needs an empty folder.
  bool shares_folder = false;
};
const OwnedFiles& run_files();       // results.{json,csv,md,tex}, cases/, oom/, timelines/, plots/
const OwnedFiles& report_files();    // run_files() for commands without --resume (replay, merge)
const OwnedFiles& frontier_files();  // frontier.{json,md,csv}
const OwnedFiles& compare_files();   // compare.{md,csv,json,tex}

enum class OutputMode {
  Fresh,      // the folder must not exist, or be empty
  Overwrite,  // what a run owns is cleared first (results.*, cases/, oom/, timelines/, plots/)
  Resume,     // the folder of an earlier run: cases/ kept, the tables and their files cleared
};

class OutputFolder {
 public:
  // path: the folder (--output or --resume); flag: its option for messages ("--output");
  // owned: what the command writes there.
  OutputFolder(const std::string& path, OutputMode mode, const std::string& flag,
               const OwnedFiles& owned = run_files());
  // A default folder `base` (results/<name>-<time>), made unique with -2, -3, ... if taken.
  static OutputFolder fresh_default(const std::string& base);
  OutputFolder(OutputFolder&& other) noexcept;
  OutputFolder& operator=(OutputFolder&&) = delete;
  OutputFolder(const OutputFolder&) = delete;
  // Releases the lock and removes the lock file; a folder this run made and left empty (a bad
  // trace found mid-run) is removed too: nothing is left of a run that wrote nothing.
  ~OutputFolder();

  const std::string& path() const { return path_; }

  static constexpr const char* kLockName = ".gpumembench.lock";

 private:
  OutputFolder() = default;
  void lock(const std::string& flag);
  void check_entries(OutputMode mode, const std::string& flag, const OwnedFiles& owned);
  void release() noexcept;  // the lock, and the folder if this made it and it is empty
  std::string path_;
  int lock_fd_ = -1;
  bool created_ = false;  // this run made the folder
};

}  // namespace gmb
