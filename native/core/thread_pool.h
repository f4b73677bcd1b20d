// A small fixed-size thread pool for data-parallel kernels. One job runs at a time (callers
// from other threads wait their turn); tasks are handed out dynamically; the calling thread
// works too. Exceptions thrown by a task are rethrown in the caller after all tasks stop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sinkflex {

class ThreadPool {
 public:
  /** The process-wide pool: SINKFLEX_NUM_THREADS threads, else one per core. */
  static ThreadPool& Global();

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /** Number of threads that run tasks (workers plus the caller). */
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /**
   * Calls fn(task, thread) for every task in [0, n); `thread` is in [0, size()) and no two
   * tasks run at once with the same `thread`, so it can index per-thread scratch space.
   * Called from inside a task it runs the tasks inline on the calling thread.
   */
  void ParallelFor(std::int64_t n, const std::function<void(std::int64_t task, int thread)>& fn);

 private:
  void WorkerLoop(int index);
  void RunTasks(int thread);

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;  // serialises jobs
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t total_ = 0;
  std::int64_t next_ = 0;
  int active_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace sinkflex
