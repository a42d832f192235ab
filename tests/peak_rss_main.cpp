// gmb_peak_rss [--one-cpu] PROGRAM ARGS...: runs PROGRAM and, after its own output, prints
// "peak_rss_kib N" (its peak resident memory) to stderr; exits with its status.
//
// For tests that bound a run's memory. A test process cannot measure a child it forks itself:
// a forked process counts the parent's resident pages until it execs, and RUSAGE_CHILDREN keeps
// the largest child ever waited for. This program is small when it forks, and PROGRAM is its
// only child. --one-cpu: PROGRAM runs on the first CPU this process may use (as under taskset).
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 1 && std::strcmp(argv[1], "--one-cpu") == 0) {
    cpu_set_t all, one;
    CPU_ZERO(&one);
    if (sched_getaffinity(0, sizeof all, &all) != 0) return 125;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) {
        CPU_SET(c, &one);
        break;
      }
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 125;  // inherited by PROGRAM
    first = 2;
  }
  if (first >= argc) {
    std::fprintf(stderr, "usage: gmb_peak_rss [--one-cpu] PROGRAM ARGS...\n");
    return 125;
  }
  const pid_t pid = fork();
  if (pid < 0) return 125;
  if (pid == 0) {
    execvp(argv[first], argv + first);
    std::perror(argv[first]);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 125;
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  std::fflush(stdout);
  std::fprintf(stderr, "peak_rss_kib %ld\n", u.ru_maxrss);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
