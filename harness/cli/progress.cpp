#include "harness/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace gmb {

namespace {

std::size_t terminal_width() {
  winsize ws{};
  return ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

void print_line(const std::string& line) {
  fmt::print(stderr, "\r\033[K{}", line);
  std::fflush(stderr);
}

}  // namespace

std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  auto t = static_cast<long long>(s + 0.5);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
}

Progress::Progress(bool enabled, std::size_t cases, std::uint64_t repeats)
    : enabled_(enabled), cases_(cases), repeats_(std::max<std::uint64_t>(repeats, 1)) {}

void Progress::start_case(std::size_t i, const std::string& label) {
  index_ = i;
  label_ = label;
  case_start_ = std::chrono::steady_clock::now();
  if (i == 0) run_start_ = case_start_;
  last_ = case_start_ - std::chrono::seconds(1);
}

void Progress::step(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200) && step != steps) return;
  last_ = now;
  const double in_case = std::chrono::duration<double>(now - case_start_).count();
  const double elapsed = std::chrono::duration<double>(now - run_start_).count();
  const double done = steps ? double(repeat * steps + step) / double(repeats_ * steps) : 0;
  std::string left = "?";
  if (done > 0) {
    const double this_case = in_case / done;  // the whole case at its pace so far
    const double mean_case = (elapsed - in_case + this_case) / double(index_ + 1);
    left = duration_text(this_case - in_case + mean_case * double(cases_ - index_ - 1));
  }
  auto line_with = [&](const std::string& label) {
    return fmt::format("case {}/{} {} | run {}/{} | step {}/{} | {} elapsed, ~{} left", index_ + 1, cases_, label,
                       repeat + 1, repeats_, step, steps ? std::to_string(steps) : "?", duration_text(elapsed), left);
  };
  std::string line = line_with(label_);
  // A line longer than the terminal would wrap, and \r could not take it back: shorten the
  // label first, then the line.
  const std::size_t width = terminal_width();
  if (line.size() >= width) {
    const std::size_t rest = line.size() - label_.size();
    line = line_with(label_.substr(0, rest + 12 < width ? width - rest - 2 : 10) + "~");
    if (line.size() >= width) line = line.substr(0, width - 2) + "~";
  }
  print_line(line);
}

void Progress::end_case() {
  if (enabled_) fmt::print(stderr, "\r\033[K");
}

SweepProgress::SweepProgress(bool enabled, std::size_t cases, std::size_t workers)
    : enabled_(enabled), cases_(cases), workers_(std::max<std::size_t>(workers, 1)) {
  start_ = std::chrono::steady_clock::now();
  last_ = start_ - std::chrono::seconds(1);
}

void SweepProgress::start_case(std::size_t index, const std::string& where) {
  running_[index] = Running{where};
  draw();
}

void SweepProgress::step(std::size_t index, std::uint64_t repeat, std::uint64_t step, std::uint64_t steps) {
  auto it = running_.find(index);
  if (it == running_.end()) return;
  it->second.repeat = repeat;
  it->second.step = step;
  it->second.steps = steps;
  draw();
}

void SweepProgress::end_case(std::size_t index) {
  running_.erase(index);
  ++done_;
  last_ = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  draw();
}

void SweepProgress::clear() {
  if (enabled_) fmt::print(stderr, "\r\033[K");
}

void SweepProgress::draw() {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string left = "?";
  if (done_) left = duration_text(elapsed / double(done_) * double(cases_ - done_));
  std::string line = fmt::format("cases {}/{} done, {} running | {} elapsed, ~{} left", done_, cases_,
                                 running_.size(), duration_text(elapsed), left);
  for (const auto& [index, r] : running_)
    line += fmt::format(" | {} case {} step {}/{}", r.where, index + 1, r.step, r.steps ? std::to_string(r.steps) : "?");
  const std::size_t width = terminal_width();
  if (line.size() >= width) line = line.substr(0, width - 2) + "~";
  print_line(line);
}

}  // namespace gmb
