// Where the binary finds the files installed with it. Paths are relative to the binary itself
// (/proc/self/exe), so an installed tree works wherever it is put; the source tree is used only
// by a binary that sits inside the build tree it was built in.
#include <system_error>

#include "about/build_info.h"

namespace gmb {
namespace fs = std::filesystem;
namespace {

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// <prefix>/share/gpumembench for an installed binary at <prefix>/bin.
fs::path installed_data_dir() {
  const fs::path bin = executable_dir();
  return bin.empty() ? fs::path() : (bin / GMB_DATADIR_FROM_BINDIR).lexically_normal();
}

// Whether `dir` is `root` or below it (both made canonical where they exist).
bool inside(const fs::path& dir, const fs::path& root) {
  std::error_code ec;
  const fs::path d = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  const fs::path r = fs::weakly_canonical(root, ec);
  if (ec) return false;
  auto rel = d.lexically_relative(r);
  return !rel.empty() && *rel.begin() != "..";
}

bool in_build_tree() {
  const fs::path bin = executable_dir();
  return !bin.empty() && inside(bin, GMB_BUILD_TREE);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::vector<fs::path> shipped_config_dirs() {
  std::vector<fs::path> dirs;
  const fs::path data = installed_data_dir();
  if (!data.empty() && is_dir(data / "configs")) dirs.push_back(data / "configs");
  if (in_build_tree() && is_dir(fs::path(GMB_SOURCE_TREE) / "configs"))
    dirs.push_back(fs::path(GMB_SOURCE_TREE) / "configs");
  return dirs;
}

std::optional<fs::path> plot_script() {
  const fs::path data = installed_data_dir();
  if (!data.empty() && is_file(data / "plot.py")) return data / "plot.py";
  if (in_build_tree() && is_file(fs::path(GMB_SOURCE_TREE) / "scripts" / "plot.py"))
    return fs::path(GMB_SOURCE_TREE) / "scripts" / "plot.py";
  return std::nullopt;
}

}  // namespace gmb
