// The pinfeed command line: a table of subcommands (commands.hpp), each in a file of its own.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <oneapi/tbb/global_control.h>

#include "commands.hpp"
#include "pinfeed/loaders/remote.hpp"
#include "pinfeed/runtime/log.hpp"
#include "pinfeed/runtime/random.hpp"
#include "pinfeed/version.hpp"

namespace pinfeed::tool {
namespace {
std::string recorded_command;

/// `a` as a POSIX shell reads it back: bare when it has only safe characters, else in single quotes.
std::string shell_quoted(const std::string& a) {
  const bool safe = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                      "_-+=/.,:@%") == std::string::npos;
  if (safe) return a;
  std::string out = "'";
  for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

const std::string& command_line() { return recorded_command; }

void record_command_line(int argc, const char* const* argv) {
  recorded_command.clear();
  for (int i = 0; i < argc; ++i) {
    // A location's user information and query (credentials, a pre-signed URL's signature) stay out
    // of reports, as everywhere else.
    std::string a = argv[i];
    for (std::size_t at = a.find("://"); at != std::string::npos; at = a.find("://", at + 3)) {
      const std::size_t start = a.find_last_of(":=,", at - 1) == std::string::npos ? 0 : a.find_last_of(":=,", at - 1) + 1;
      const std::size_t end = std::min(a.find_first_of(", ", at), a.size());
      const std::string shown = pinfeed::loaders::redact_location(a.substr(start, end - start));
      a.replace(start, end - start, shown);
      at = start + shown.size() - 3;
    }
    recorded_command += (i ? " " : "") + shell_quoted(a);
  }
}
}  // namespace pinfeed::tool

namespace {

/// The whole program but the last word on an exception: every allocation, the option set-up's
/// included, fails into main()'s handler.
int run_program(int argc, char** argv) {
  using namespace pinfeed::tool;
  record_command_line(argc, argv);
  CLI::App app{"pinfeed: keeps GPUs fed - a CUDA C++ data-loading runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pinfeed " PINFEED_VERSION_STRING);
  command_list commands;
  for (auto add : {&add_info, &add_run, &add_doctor, &add_sample, &add_pack, &add_preview, &add_bench}) add(app, commands);
  CLI11_PARSE(app, argc, argv);
  (void)pinfeed::get_log_level();  // reads PINFEED_LOG_LEVEL now: a value that is no level is named at once
  // This program owns its process, so it (not the library) sets TBB's process-wide thread cap: as
  // many workers as asked for, and one per hardware thread for --workers 0, plus the calling thread.
  std::size_t asked = std::max(1u, std::thread::hardware_concurrency());
  for (const auto& c : commands)
    if (c.workers) asked = std::max(asked, c.workers());
  // Held to the end and never destroyed (the process ends in std::_Exit): oneTBB 2021.8's
  // destructor of this control spins forever once a task_arena's initialize() ran out of memory
  // (found by the allocation sweep, tests/tools/tool_faults_test.sh).
  static std::optional<tbb::global_control> thread_cap;
  thread_cap.emplace(tbb::global_control::max_allowed_parallelism, asked + 1);
  try {
    // A bad PINFEED_SIMD is an error here, before any work (the library only logs it).
    if (const char* simd = std::getenv("PINFEED_SIMD"); simd != nullptr && *simd != '\0') {
      try {
        (void)pinfeed::parse_simd_level(simd);
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "pinfeed: error: PINFEED_SIMD: %s\n", e.what());
        return 2;
      }
    }
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const std::bad_alloc&) {
    throw;  // main() says it without allocating
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pinfeed: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Running out of memory anywhere (CLI11's option set-up, a command, a report) ends the program
  // with exit status 1 and one line that says so, never std::terminate.
  int status = 1;
  try {
    status = run_program(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("pinfeed: error: out of memory\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pinfeed: error: %s\n", e.what());
  }
  // Every command has written and closed what it makes: the process ends here, without the
  // libraries' static destructors, one of which (OpenCV core's thread-local storage) allocates in
  // a noexcept destructor and so aborts the finished program when memory runs out at exit.
  std::fflush(nullptr);
  std::_Exit(status);
}
