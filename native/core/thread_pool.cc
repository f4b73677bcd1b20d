#include "thread_pool.h"

#include <cstdlib>
#include <string>

namespace sinkflex {
namespace {
thread_local int t_worker_index = -1;  // >= 0 inside a pool task
}

ThreadPool& ThreadPool::Global() {
  static ThreadPool pool([] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("SINKFLEX_NUM_THREADS")) {
      const int v = std::atoi(env);
      if (v > 0) n = v;
    }
    return n < 1 ? 1 : (n > 256 ? 256 : n);
  }());
  return pool;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunTasks(int thread) {
  for (;;) {
    std::int64_t task;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= total_ || error_) return;
      task = next_++;
    }
    try {
      (*fn_)(task, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::WorkerLoop(int index) {
  t_worker_index = index;
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    RunTasks(index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --active_;
    }
    done_cv_.notify_all();
  }
}

void ThreadPool::ParallelFor(std::int64_t n, const std::function<void(std::int64_t, int)>& fn) {
  if (n <= 0) return;
  if (t_worker_index >= 0 || workers_.empty() || n == 1) {
    const int thread = t_worker_index >= 0 ? t_worker_index : 0;
    for (std::int64_t i = 0; i < n; ++i) fn(i, thread);
    return;
  }
  std::lock_guard<std::mutex> job(job_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    total_ = n;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  t_worker_index = 0;
  RunTasks(0);
  t_worker_index = -1;
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Workers that have not picked the job up yet will find no tasks left; wait for the rest.
    next_ = total_;
    done_cv_.wait(lock, [&] { return active_ == 0; });
    fn_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace sinkflex
