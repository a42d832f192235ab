// The progress line of a run on stderr, rewritten in place. Only on a terminal: a pipe or a log
// file gets nothing, and neither does --quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace gmb {

// A run of one process: case i/N, run r/R, step s/S, the time since the first case and an
// estimate of the time left for the whole run (this case at its pace so far, each later case as
// long as the mean case).
class Progress {
 public:
  Progress(bool enabled, std::size_t cases, std::uint64_t repeats);
  void start_case(std::size_t i, const std::string& label);
  // steps 0: not known (a trace read as a stream): no estimate of the time left.
  void step(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps);
  void end_case();

 private:
  bool enabled_;
  std::size_t cases_, index_ = 0;
  std::uint64_t repeats_;
  std::string label_;
  std::chrono::steady_clock::time_point run_start_, case_start_, last_;
};

// A sweep whose cases run in worker processes at once: cases done/N, the cases running with
// their step, the time since the start and an estimate of the time left (the cases left at the
// mean pace of those done, over the workers).
class SweepProgress {
 public:
  SweepProgress(bool enabled, std::size_t cases, std::size_t workers);
  void start_case(std::size_t index, const std::string& where);
  void step(std::size_t index, std::uint64_t repeat, std::uint64_t step, std::uint64_t steps);
  void end_case(std::size_t index);
  void clear();

 private:
  void draw();
  bool enabled_;
  std::size_t cases_, workers_, done_ = 0;
  struct Running {
    std::string where;
    std::uint64_t repeat = 0, step = 0, steps = 0;
  };
  std::map<std::size_t, Running> running_;
  std::chrono::steady_clock::time_point start_, last_;
};

// "12.3s", "4m05s", "2h10m".
std::string duration_text(double seconds);

}  // namespace gmb
