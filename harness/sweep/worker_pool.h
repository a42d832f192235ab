// Jobs run as child processes, at most one per slot at a time, taken from one queue in order (a
// long job holds its slot, the others go on taking jobs). A slot is a place to run: a CPU worker,
// or a GPU the child is pinned to by its environment (CUDA_VISIBLE_DEVICES). Each child's stdout
// comes back line by line; its stderr is the user's. A child is in a process group of its own
// (a Ctrl-C at the terminal reaches this process alone) and gets every stop signal this process
// gets (stop_request.h), so that Ctrl-C or SIGTERM stops every worker as it would stop a run.
// A child starts with SIGINT and SIGTERM blocked and unblocks them once its own handlers are in
// place: a stop that comes while it starts waits for them (a gpumembench worker then finishes its
// case) instead of killing it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gmb {

struct WorkerSlot {
  std::string name;              // "GPU 1", "worker 2": for the progress line and messages
  std::vector<std::string> env;  // "NAME=value", set in the child's environment
};

struct WorkerJob {
  std::size_t key = 0;            // the caller's
  std::vector<std::string> argv;  // argv[0]: the executable's path
};

struct WorkerEvents {
  std::function<void(const WorkerJob&, const WorkerSlot&)> started;
  std::function<void(const WorkerJob&, const std::string& line)> line;  // one line of its stdout, without '\n'
  // status: as waitpid gives it (wait_status_text says it in words)
  std::function<void(const WorkerJob&, const WorkerSlot&, int status)> ended;
};

// Runs the jobs; returns when every job started has ended, and either every job was started
// (true) or a stop request came first (false: the rest were not started). Throws
// std::runtime_error when a child cannot be made (fork, pipe), after the running ones ended.
bool run_worker_pool(const std::vector<WorkerSlot>& slots, const std::vector<WorkerJob>& jobs,
                     const WorkerEvents& events);

// "exited with status 3", "was killed by signal 9 (Killed)".
std::string wait_status_text(int status);

// This program's own path (/proc/self/exe), to start workers of the same build.
std::string this_executable();

}  // namespace gmb
