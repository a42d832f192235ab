#include "harness/run/stop_request.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace gmb {

namespace {

std::atomic<int> g_signal{0};
// Writes in progress (SignalsHeld), and a second signal that came during one: the process ends
// when the last write ends. The handler may run on any thread (a reader's, the CUDA runtime's),
// so blocking the signals in the writing thread alone would not be enough.
std::atomic<int> g_writing{0};
std::atomic<int> g_exit_after_write{0};
std::atomic<bool> g_finish_case{true};
char g_hint[4096] = {};  // written before the handlers can read it, then only read
std::atomic<pid_t> g_forward[kMaxStopForwards] = {};  // 0: a free place

void forward(int sig) {
  for (auto& pid : g_forward) {
    const pid_t p = pid.load();
    if (p > 0) ::kill(p, sig);
  }
}

void say(const char* text) {
  // write(2) only: the handler may run inside anything.
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_stop_signal(int sig) {
  forward(sig);
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig) && g_finish_case.load()) {
    say("\ngpumembench: stopping after the case that is running (its result is kept); "
        "press Ctrl-C again to stop at once\n");
    return;
  }
  if (g_writing.load() > 0) {
    g_exit_after_write.store(sig);
    return;
  }
  say("\ngpumembench: stopped at once (no file is left half-written)\n");
  say(g_hint);
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_handlers(bool finish_case) {
  g_finish_case.store(finish_case);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void set_stop_hint(const std::string& line) {
  const std::size_t n = std::min(line.size(), sizeof g_hint - 2);
  std::memcpy(g_hint, line.data(), n);
  g_hint[n] = n ? '\n' : '\0';
  g_hint[n + 1] = '\0';
}

bool forward_stop_signals_to(pid_t pid) {
  for (auto& slot : g_forward) {
    pid_t free = 0;
    if (slot.compare_exchange_strong(free, pid)) return true;
  }
  return false;
}

void stop_forwarding_to(pid_t pid) {
  for (auto& slot : g_forward) {
    pid_t p = pid;
    if (slot.compare_exchange_strong(p, 0)) return;
  }
}

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal() { return g_signal.load(); }

SignalsHeld::SignalsHeld() {
  ++g_writing;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

SignalsHeld::~SignalsHeld() {
  if (--g_writing == 0 && g_exit_after_write.load()) {
    say("\ngpumembench: stopped at once (no file is left half-written)\n");
    say(g_hint);
    ::_exit(128 + g_exit_after_write.load());
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace gmb
