// Runs f(i) for i in [0, n) on a fixed pool of threads; results land by index, so the output does not
// depend on the thread count or on timing. `on_done(completed)` is called (serialised) after each item.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zsim {

template <typename R>
std::vector<R> parallel_map(std::size_t n, unsigned threads, const std::function<R(std::size_t)>& f,
                            const std::function<void(std::size_t)>& on_done = {}) {
  std::vector<R> out(n);
  std::atomic<std::size_t> next{0};
  std::size_t completed = 0;
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        out[i] = f(i);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!error) error = std::current_exception();
        next = n;  // stop handing out work
      }
      std::lock_guard lock(mu);
      ++completed;
      if (on_done) on_done(completed);
    }
  };
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(std::max<std::size_t>(n, 1))));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace zsim
