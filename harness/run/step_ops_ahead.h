// Makes a workload's steps' ops for the runner. For a workload that allows it
// (Workload::makes_ops_ahead), a worker thread makes step k + 1 while the runner's thread runs
// step k, so the thread that launches kernels and calls the allocator spends no time making
// events (the harness must not be what is measured); otherwise each step is made on demand.
// Given a NeedTracker, each step made (the end step excepted) is added to it, in step order, on
// the thread that made it: the workload's need without a pass of its own. Every step's allocs
// and frees get their buffers' slots there too (buffer_slots.h).
#pragma once

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
    StepInfo info;
    std::uint32_t slots_end = 0;  // every Op::slot of this step and the ones before is below it
  };

  // `need` (may be null) is read by the caller only once this object is destroyed.
  StepOpsAhead(Workload& workload, std::uint64_t steps, NeedTracker* need = nullptr)
      : workload_(workload), steps_(steps), threaded_(workload.makes_ops_ahead() && steps > 1), need_(need) {
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

  // The ops of `step` (steps are asked for in order, 0, 1, ...); then starts on step + 1 unless
  // this step is the workload's end (StepInfo::end). The returned step stays valid until the
  // next call. `steps` may be Workload::kUnknownSteps.
  const Step& get(std::uint64_t step) {
    Step& s = made_[step & 1];
    if (!threaded_) {
      make(step, s);
      return s;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (step == 0) {
      ask(0);
      cv_.notify_all();  // the worker may already be waiting
    }
    cv_.wait(lock, [&] { return done_ == step || error_; });
    if (error_) std::rethrow_exception(error_);
    if (step + 1 < steps_ && !s.info.end) ask(step + 1);
    lock.unlock();
    cv_.notify_all();
    return s;
  }

 private:
  void make(std::uint64_t step, Step& s) {
    s.ops.clear();
    s.info = StepInfo{};
    workload_.step_ops(step, s.ops, s.info);
    if (workload_.gives_slots()) {
      s.slots_end = workload_.slots_end();
    } else {
      slots_.assign(s.ops);
      s.slots_end = slots_.end();
    }
    if (need_ && !s.info.end) need_->add_step(s.ops, s.slots_end);
  }
  void ask(std::uint64_t step) { asked_ = step, has_ask_ = true; }  // mu_ held

  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return has_ask_ || quit_; });
      if (quit_) return;
      const std::uint64_t step = asked_;
      has_ask_ = false;
      lock.unlock();
      std::exception_ptr error;
      try {
        make(step, made_[step & 1]);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      done_ = step;
      error_ = error;
      cv_.notify_all();
      if (error_) return;
    }
  }

  Workload& workload_;
  const std::uint64_t steps_;
  const bool threaded_;
  NeedTracker* const need_;
  BufferSlots slots_;  // used by whichever thread makes the steps, one step at a time
  Step made_[2];
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t asked_ = 0, done_ = ~std::uint64_t(0);
  bool has_ask_ = false, quit_ = false;
  std::exception_ptr error_;
};

}  // namespace gmb
