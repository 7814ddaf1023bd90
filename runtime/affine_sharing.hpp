// `affine_sharing`: CAF's work-sharing scheduler (one central queue,
// workers sleep on a condition variable when it is empty, nothing spins),
// changed in when it wakes a sleeping worker.
//
// CAF 0.17's `work_sharing` wakes a sleeper on every enqueue, also when a
// worker schedules an actor from inside another actor's turn. A lookup is
// such a chain (engine -> facade -> RAM and SSD -> facade -> engine): each
// link woke the other worker, which on this kind of 2-vCPU VM costs far more
// than running the next link on the worker that is already awake
// (bench_service prints both; docs/configuration.md has the figures). Here:
//
// - a job from outside the workers (an engine thread, an I/O completion,
//   a timer, shutdown) wakes a sleeper, as before;
// - a job a worker schedules while running an actor goes to the same queue
//   without a wake-up, unless `backlog` or more jobs are already waiting:
//   the worker takes it when its current turn ends, and a second worker is
//   woken only when work piles up;
// - the wake-up happens after the queue lock is released, so the woken
//   thread does not block on it at once.
//
// A job queued without a wake-up always has a worker that will take it: the
// one that queued it is running and returns to the queue when its turn
// ends (kvtier's actors never block a worker).
//
// Selected with `[scheduler] policy='affine'` (conf/kvtier.conf ships it);
// runtime/config.cpp loads it as CAF's scheduler module.
#pragma once

#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace kvtier::runtime {

class affine_sharing : public caf::policy::unprofiled {
public:
  /// Internal jobs queue without a wake-up while fewer than this many
  /// jobs wait ahead of them.
  static constexpr size_t backlog = 2;

  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }
    std::deque<caf::resumable*> queue;
    std::mutex lock;
    std::condition_variable cv;
    size_t sleepers = 0;
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }
  };

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(d(self), job, true);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, true);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job, false);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    // The job yielded its worker: behind everything else, like any
    // internal job.
    push(d(self->parent()), job, false);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& q = d(self->parent());
    std::unique_lock<std::mutex> guard{q.lock};
    if (q.queue.empty()) {
      ++q.sleepers;
      q.cv.wait(guard, [&] { return !q.queue.empty(); });
      --q.sleepers;
    }
    auto* job = q.queue.front();
    q.queue.pop_front();
    return job;
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {
    // nop: no per-worker queues
  }

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& q = d(self);
    std::unique_lock<std::mutex> guard{q.lock};
    while (!q.queue.empty()) {
      auto* job = q.queue.front();
      q.queue.pop_front();
      f(job);
    }
  }

private:
  static void push(coordinator_data& q, caf::resumable* job, bool external) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{q.lock};
      q.queue.push_back(job);
      wake = q.sleepers > 0 && (external || q.queue.size() > backlog);
    }
    if (wake)
      q.cv.notify_one();
  }
};

} // namespace kvtier::runtime
