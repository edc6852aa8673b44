#pragma once
/// @file error.hpp
/// pinfeed's exceptions and the CUDA error-checking macros. Each derives from pinfeed::error
/// (exception.hpp) and from one standard exception.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/exception.hpp"

namespace pinfeed {

/// A CUDA runtime call failed. Carries the call text, the source location and CUDA's error name
/// and message.
class cuda_error : public runtime_error {
 public:
  cuda_error(cuda_result code, const char* call, const char* file, int line);
  [[nodiscard]] cuda_result code() const noexcept { return code_; }
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] int line() const noexcept { return line_; }

 private:
  cuda_result code_;
  std::string call_;
  std::string file_;
  int line_;
};

/// Producing one sample failed. Names the sample index, the stage that failed and, where the
/// sample came from a file, its path; `what()` includes all of these and the original message.
class sample_error : public runtime_error {
 public:
  sample_error(std::uint64_t index, std::string stage, std::string path, const std::string& message);
  [[nodiscard]] std::uint64_t index() const noexcept { return index_; }
  [[nodiscard]] const std::string& stage() const noexcept { return stage_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The message of the original exception, without pinfeed's context.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  std::uint64_t index_;
  std::string stage_;
  std::string path_;
  std::string message_;
};

/// An error that ends the run whatever the bad-sample policy: not the sample's fault (a memory
/// budget exceeded, an option that cannot work). Never counted or skipped as a bad sample;
/// neither is std::bad_alloc.
class fatal_error : public runtime_error {
 public:
  using runtime_error::runtime_error;
};

/// For a catch (...) around one stage of one sample: rethrows the exception in flight as a
/// sample_error of `index` at `stage` from `path`, unless it already is one or is not the sample's
/// fault (fatal_error, std::bad_alloc, or not a std::exception), which pass unchanged.
[[noreturn]] void rethrow_as_sample_error(std::uint64_t index, const std::string& stage, const std::string& path);

/// The loader was closed (destroyed or restarted) while a call was waiting on it.
class loader_closed : public runtime_error {
 public:
  using runtime_error::runtime_error;
};

/// loader::next() was called while the consumer held more batches than
/// loader_options::max_batches_in_use (batch objects, or DLPack views of released ones): waiting
/// could never end once every slot is held, so the call is refused at once. The message names the
/// counts, the prefetch and what to do; releasing a batch lets the next call go on.
class batches_held_error : public logic_error {
 public:
  batches_held_error(std::size_t held, std::size_t limit, const std::string& message)
      : logic_error(message), held_(held), limit_(limit) {}
  [[nodiscard]] std::size_t held() const noexcept { return held_; }
  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }

 private:
  std::size_t held_, limit_;
};

namespace detail {
[[noreturn]] void throw_cuda_error(cuda_result code, const char* call, const char* file, int line);
/// Logs a failed CUDA call made from a destructor; tolerates cudaErrorCudartUnloading.
void report_cuda_error_nothrow(cuda_result code, const char* call, const char* file, int line) noexcept;
/// Clears the calling thread's last CUDA error (after a failed call was reported).
inline void clear_last_cuda_error() noexcept { (void)PINFEED_CUDART(cudaGetLastError)(); }
}  // namespace detail

}  // namespace pinfeed

/// Evaluates a CUDA runtime call and, when it did not return cudaSuccess, clears the thread's last
/// error and hands the status, the call's text and where it was made to `report`.
#define PINFEED_CUDA_CHECK_(call, report)                                       \
  do {                                                                          \
    const ::pinfeed::cuda_result pinfeed_err_ = (call);                         \
    if (pinfeed_err_ != PINFEED_CUDART(cudaSuccess)) {                          \
      ::pinfeed::detail::clear_last_cuda_error();                               \
      report(pinfeed_err_, #call, __FILE__, __LINE__);                          \
    }                                                                           \
  } while (0)

/// Evaluates a CUDA runtime call and throws pinfeed::cuda_error if it did not return cudaSuccess.
#define PINFEED_CUDA_TRY(call) PINFEED_CUDA_CHECK_(call, ::pinfeed::detail::throw_cuda_error)

/// For destructors and other noexcept paths: logs a failure instead of throwing.
#define PINFEED_CUDA_TRY_NOTHROW(call) PINFEED_CUDA_CHECK_(call, ::pinfeed::detail::report_cuda_error_nothrow)

/// After a kernel launch: surfaces launch-configuration errors without synchronizing.
#define PINFEED_CHECK_LAUNCH() PINFEED_CUDA_TRY(PINFEED_CUDART(cudaPeekAtLastError)())
