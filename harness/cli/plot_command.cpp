#include "harness/cli/plot_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "about/build_info.h"

namespace gmb {
namespace fs = std::filesystem;
namespace {

// python3 as the shell would find it on PATH.
std::optional<fs::path> find_python3() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / "python3";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// Runs argv[0] with argv (no shell), stdout and stderr inherited or sent to /dev/null;
// returns the exit status, 127 when it could not start, 128 + N when killed by signal N.
int run(const std::vector<std::string>& argv, bool quiet) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    if (quiet) {
      if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) _exit(127);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 127;
}

}  // namespace

int run_plot_command(const std::vector<std::string>& args, std::ostream& err) {
  const auto script = plot_script();
  if (!script) {
    err << "gpumembench plot: the plotting script plot.py is not installed (expected in share/gpumembench next "
           "to the binary's bin/)\n";
    return 1;
  }
  // GMB_PYTHON names the interpreter, else python3 as found on PATH.
  std::optional<fs::path> python;
  if (const char* chosen = std::getenv("GMB_PYTHON"); chosen && *chosen) {
    python = chosen;
    if (access(chosen, X_OK) != 0) {
      err << "gpumembench plot: GMB_PYTHON=" << chosen << " is not an executable file\n";
      return 1;
    }
  } else {
    python = find_python3();
  }
  if (!python) {
    err << "gpumembench plot: python3 was not found on PATH; plotting needs python3 with matplotlib "
           "(Debian: apt-get install python3-matplotlib)\n";
    return 1;
  }
  if (run({python->string(), "-c", "import matplotlib"}, true) != 0) {
    err << "gpumembench plot: " << python->string()
        << " cannot import matplotlib; install it (Debian: apt-get install python3-matplotlib; pip: pip install "
           "matplotlib), or name a Python that has it in GMB_PYTHON\n";
    return 1;
  }
  std::vector<std::string> argv{python->string(), script->string()};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = run(argv, false);
  if (rc == 127) err << "gpumembench plot: could not run " << python->string() << " " << script->string() << "\n";
  return rc;
}

}  // namespace gmb
