// Makes a workload's steps' ops for the runner, piece by piece: a step is one piece, or several
// where the workload gives it in pieces (StepInfo::more). For a workload that allows it
// (Workload::makes_ops_ahead), a worker thread makes piece k + 1 while the runner's thread runs
// piece k, so the thread that launches kernels and calls the allocator spends no time making
// events (the harness must not be what is measured); otherwise each piece is made on demand.
// Given a NeedTracker, each piece made (the end step's excepted) is added to it, in order, on
// the thread that made it: the workload's need without a pass of its own. Every piece's allocs
// and frees get their buffers' slots there too (buffer_slots.h).
#pragma once

#include <sched.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "harness/run/buffer_slots.h"
#include "harness/run/workload_need.h"
#include "workloads/workload.h"

namespace gmb {

class StepOpsAhead {
 public:
  // A cache line each: the worker fills one while the runner reads the other.
  struct alignas(64) Step {
    std::vector<Op> ops;
    StepInfo info;                // the piece's: info.more, the step goes on in the next piece
    std::uint32_t slots_end = 0;  // every Op::slot of this piece and the ones before is below it
    std::uint64_t step = 0;       // the step the piece belongs to
  };

  // `need` (may be null) is read by the caller only once this object is destroyed.
  // threads_beside: threads of this process that run beside the run (RunSettings): the worker
  // is started only where a core is left for it, else it would take turns with them.
  StepOpsAhead(Workload& workload, std::uint64_t steps, NeedTracker* need = nullptr, unsigned threads_beside = 0)
      : workload_(workload),
        steps_(steps),
        threaded_(workload.makes_ops_ahead() && steps > 1 && cpus() > 1 + static_cast<int>(threads_beside)),
        need_(need) {
    if (threaded_) worker_ = std::thread([this] { work(); });
  }
  ~StepOpsAhead() {
    if (!threaded_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  StepOpsAhead(const StepOpsAhead&) = delete;
  StepOpsAhead& operator=(const StepOpsAhead&) = delete;

  // Piece `piece` (asked for in order, 0, 1, ...: for a workload without pieces, piece k is
  // step k); then starts on the next piece, unless this one ends the last step or is the
  // workload's end (StepInfo::end). The returned piece stays valid until the next call. `steps`
  // may be Workload::kUnknownSteps.
  const Step& get(std::uint64_t piece) {
    Step& s = made_[piece & 1];
    if (!threaded_) {
      make(s);
      return s;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (piece == 0) {
      ask(0);
      cv_.notify_all();  // the worker may already be waiting
    }
    cv_.wait(lock, [&] { return done_ == piece || error_; });
    if (error_) std::rethrow_exception(error_);
    if (s.info.more || (s.step + 1 < steps_ && !s.info.end)) ask(piece + 1);
    lock.unlock();
    cv_.notify_all();
    return s;
  }

 private:
  // The CPUs this process may run on. On one, a worker would only take turns with the runner's
  // thread: a piece then costs two thread switches and gains nothing.
  static int cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
  }
  // The next piece, of step making_.
  void make(Step& s) {
    s.ops.clear();
    s.info = StepInfo{};
    s.step = making_;
    workload_.step_ops(making_, s.ops, s.info);
    if (workload_.gives_slots()) {
      s.slots_end = workload_.slots_end();
    } else {
      slots_.assign(s.ops);
      s.slots_end = slots_.end();
    }
    if (need_ && !s.info.end) need_->add_piece(s.ops, s.slots_end, !s.info.more);
    if (!s.info.more) ++making_;
  }
  void ask(std::uint64_t piece) { asked_ = piece, has_ask_ = true; }  // mu_ held

  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return has_ask_ || quit_; });
      if (quit_) return;
      const std::uint64_t piece = asked_;
      has_ask_ = false;
      lock.unlock();
      std::exception_ptr error;
      try {
        make(made_[piece & 1]);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      done_ = piece;
      error_ = error;
      cv_.notify_all();
      if (error_) return;
    }
  }

  Workload& workload_;
  const std::uint64_t steps_;
  const bool threaded_;
  NeedTracker* const need_;
  BufferSlots slots_;  // used by whichever thread makes the pieces, one at a time
  std::uint64_t making_ = 0;  // the step whose pieces are being made (that thread's too)
  Step made_[2];
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t asked_ = 0, done_ = ~std::uint64_t(0);
  bool has_ask_ = false, quit_ = false;
  std::exception_ptr error_;
};

}  // namespace gmb
