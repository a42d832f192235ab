#include "harness/sweep/worker_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/run/stop_request.h"

extern char** environ;

namespace gmb {

namespace {

struct Running {
  pid_t pid = -1;
  int fd = -1;  // the read end of the child's stdout
  std::size_t job = 0, slot = 0;
  std::string pending;  // stdout after the last '\n'
};

// The argv and environment of a child, made before fork (the child only calls exec).
struct ChildImage {
  std::vector<std::string> strings;
  std::vector<char*> argv, envp;
  ChildImage(const WorkerJob& job, const WorkerSlot& slot) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      bool replaced = false;
      for (const std::string& mine : slot.env)
        if (kv.substr(0, kv.find('=') + 1) == mine.substr(0, mine.find('=') + 1)) replaced = true;
      if (!replaced) env.push_back(kv);
    }
    for (const std::string& mine : slot.env) env.push_back(mine);
    strings = job.argv;
    strings.insert(strings.end(), env.begin(), env.end());
    for (std::size_t i = 0; i < strings.size(); ++i)
      (i < job.argv.size() ? argv : envp).push_back(strings[i].data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
  }
};

Running start_child(const WorkerJob& job, std::size_t job_index, const WorkerSlot& slot, std::size_t slot_index) {
  if (job.argv.empty()) throw std::runtime_error("a worker job without a command");
  ChildImage image(job, slot);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    if (null_fd >= 0) ::close(null_fd);
    throw std::runtime_error(fmt::format("cannot start a worker process: {}", std::strerror(err)));
  }
  if (pid == 0) {  // the child: async-signal-safe calls only, up to exec
    ::setpgid(0, 0);
    sigset_t stops;  // held until the worker's handlers are in place (worker_pool.h)
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    ::sigprocmask(SIG_SETMASK, &stops, nullptr);
    ::dup2(fds[1], STDOUT_FILENO);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execve(image.argv[0], image.argv.data(), image.envp.data());
    const char msg[] = "gpumembench: cannot start a worker process (execve failed)\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  forward_stop_signals_to(pid);
  // A stop that came between the check before starting and the line above reaches it now.
  if (stop_requested()) ::kill(pid, stop_signal());
  return Running{pid, fds[0], job_index, slot_index, {}};
}

}  // namespace

std::string wait_status_text(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

std::string this_executable() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error(fmt::format("cannot find this program's path: {}", std::strerror(errno)));
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

bool run_worker_pool(const std::vector<WorkerSlot>& slots, const std::vector<WorkerJob>& jobs,
                     const WorkerEvents& events) {
  std::vector<bool> busy(slots.size(), false);
  std::map<int, Running> running;  // by pipe fd
  std::size_t next = 0;
  std::string start_error;
  for (;;) {
    // Free slots take the next jobs, until a stop request or a failure to start one.
    for (std::size_t s = 0; s < slots.size() && next < jobs.size() && !stop_requested() && start_error.empty(); ++s) {
      if (busy[s]) continue;
      try {
        Running r = start_child(jobs[next], next, slots[s], s);
        busy[s] = true;
        if (events.started) events.started(jobs[next], slots[s]);
        running[r.fd] = std::move(r);
        ++next;
      } catch (const std::runtime_error& e) {
        start_error = e.what();
      }
    }
    if (running.empty()) break;
    std::vector<pollfd> fds;
    for (const auto& [fd, r] : running) fds.push_back({fd, POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), 200);
    if (n < 0 && errno != EINTR) throw std::runtime_error(fmt::format("poll failed: {}", std::strerror(errno)));
    if (n <= 0) continue;
    for (const pollfd& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Running& r = running.at(p.fd);
      char buf[4096];
      const ssize_t got = ::read(p.fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) {
        r.pending.append(buf, static_cast<std::size_t>(got));
        for (std::size_t nl; (nl = r.pending.find('\n')) != std::string::npos;) {
          if (events.line) events.line(jobs[r.job], r.pending.substr(0, nl));
          r.pending.erase(0, nl + 1);
        }
        continue;
      }
      // End of its stdout: the child has ended (or is ending).
      int status = 0;
      while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
      }
      stop_forwarding_to(r.pid);
      ::close(p.fd);
      busy[r.slot] = false;
      const Running done = std::move(r);
      running.erase(p.fd);
      if (events.ended) events.ended(jobs[done.job], slots[done.slot], status);
    }
  }
  if (!start_error.empty()) throw std::runtime_error(start_error);
  return next == jobs.size();
}

}  // namespace gmb
