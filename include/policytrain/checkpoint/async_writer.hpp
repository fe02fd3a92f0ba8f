#pragma once
/// \file
/// checkpoint::detail::AsyncWriter — the background thread of checkpoint::Disk's asynchronous writes (a detail:
/// Disk owns one; nothing else uses it). Knows no Trainer context and no checkpoint file: it runs jobs.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace policytrain::checkpoint::detail {

/// The background writer of asynchronous checkpoints: one thread, one job in flight at most, jobs in order.
/// A job's failure is kept and rethrown by the next `submit` or `wait`. The destructor finishes the job in
/// flight (an exception unwinding the Trainer does not abandon a write half way; a killed process leaves the
/// temporary file, never a partial checkpoint: write_atomic renames only a complete, fsynced file).
class AsyncWriter {
 public:
  /// Starts the writer thread.
  AsyncWriter() : thread_([this] { loop(); }) {}
  /// Finishes the job in flight, if any, and joins the thread.
  ~AsyncWriter() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  /// Waits for the job in flight (rethrowing its failure), then starts `job`.
  void submit(std::function<void()> job) {
    wait();
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = std::move(job);
    }
    cv_.notify_all();
  }
  /// Waits until no job is in flight; rethrows the failure of the last one, once.
  void wait() {
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&] { return !job_ && !running_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  /// Whether a job is in flight.
  bool busy() {
    std::lock_guard<std::mutex> lk(m_);
    return job_ || running_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || job_; });
      if (!job_) return;  // stop requested, nothing left
      auto job = std::move(job_);  // the job owns the payload: moved, never copied
      job_ = nullptr;
      running_ = true;
      lk.unlock();
      std::exception_ptr err;
      try {
        job();
      } catch (...) {
        err = std::current_exception();
      }
      job = nullptr;  // frees the payload
      lk.lock();
      running_ = false;
      if (err) error_ = err;
      done_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_;
  std::function<void()> job_;
  std::exception_ptr error_;
  bool stop_ = false, running_ = false;
  std::thread thread_;  // last: started once the rest is constructed
};

}  // namespace policytrain::checkpoint::detail
