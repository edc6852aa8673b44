#include "pinfeed/runtime/error.hpp"

#include <string>

#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace {
std::string cuda_message(cudaError_t code, const char* call, const char* file, int line) {
  return std::string("CUDA error ") + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
         ") in " + call + " at " + file + ":" + std::to_string(line);
}
std::string sample_message(std::uint64_t index, const std::string& stage, const std::string& path,
                           const std::string& message) {
  std::string s = "sample " + std::to_string(index);
  if (!path.empty()) s += " (" + path + ")";
  s += " failed in stage '" + stage + "': " + message;
  return s;
}
}  // namespace

cuda_error::cuda_error(cudaError_t code, const char* call, const char* file, int line)
    : runtime_error(cuda_message(code, call, file, line)),
      code_(code), call_(call), file_(file), line_(line) {}

sample_error::sample_error(std::uint64_t index, std::string stage, std::string path,
                           const std::string& message)
    : runtime_error(sample_message(index, stage, path, message)),
      index_(index), stage_(std::move(stage)), path_(std::move(path)), message_(message) {}

void rethrow_as_sample_error(std::uint64_t index, const std::string& stage, const std::string& path) {
  try {
    throw;
  } catch (const sample_error&) {
    throw;
  } catch (const fatal_error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw sample_error(index, stage, path, e.what());
  }
}

namespace detail {
void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw cuda_error(code, call, file, line);
}
void report_cuda_error_nothrow(cudaError_t code, const char* call, const char* file,
                               int line) noexcept {
  // At process exit the runtime may already be unloading; nothing is left to release then.
  if (code == cudaErrorCudartUnloading) return;
  log(log_level::error, cuda_message(code, call, file, line));
}
}  // namespace detail

}  // namespace pinfeed
