#pragma once
// The pinfeed tool's commands: each file adds its subcommand(s) to the app with its options and
// registers how to run it; main() runs the one parsed.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace pinfeed::tool {

struct command {
  CLI::App* app = nullptr;         ///< the subcommand
  std::function<int()> run;        ///< after parsing; the exit status
  std::function<std::size_t()> workers;  ///< worker threads it asks for (for TBB's cap; may be empty)
};
using command_list = std::vector<command>;

/// The command line this process was started with, each argument quoted for a POSIX shell where it
/// needs it (main() records it; a report shows it).
[[nodiscard]] const std::string& command_line();
void record_command_line(int argc, const char* const* argv);

void add_info(CLI::App& app, command_list& out);
void add_run(CLI::App& app, command_list& out);
void add_doctor(CLI::App& app, command_list& out);
void add_sample(CLI::App& app, command_list& out);
void add_pack(CLI::App& app, command_list& out);  ///< pack and index
void add_preview(CLI::App& app, command_list& out);
void add_bench(CLI::App& app, command_list& out);  ///< bench's subcommands (none in a build without benchmarks)

}  // namespace pinfeed::tool
