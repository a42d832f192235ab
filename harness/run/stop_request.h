// Ctrl-C and SIGTERM during a run of many cases: the first asks the run to stop after the case
// it is running (its files written, the finished cases kept for --resume); a second one ends the
// process at once (status 128 + the signal). Files are written with the signals held
// (SignalsHeld), so that even the second one never leaves a file half-written.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>

namespace gmb {

// Installs the handlers (SIGINT, SIGTERM). finish_case false: there is one case only (replay),
// and the first signal ends the process at once as a second would (never inside a write).
void install_stop_handlers(bool finish_case = true);
// A line said when a second signal ends the process at once (how to resume); copied.
void set_stop_hint(const std::string& line);
// True once a first signal came; which one (0 before).
bool stop_requested();
int stop_signal();

// A sweep's worker processes (harness/sweep/worker_pool.h): every stop signal this process gets
// is passed on to them, the first (they finish their case) and the second (they end at once).
// At most kMaxStopForwards at a time; false when full (the worker then is not told).
constexpr int kMaxStopForwards = 1024;
bool forward_stop_signals_to(pid_t pid);
void stop_forwarding_to(pid_t pid);

// While alive, SIGINT and SIGTERM wait (they are delivered when it ends).
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t old_;
};

}  // namespace gmb
