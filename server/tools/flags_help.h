// `--help` for Convoy's flag-parsing binaries (convoy_server, convoy_health_probe): Debian's Abseil (20220623) answers
// `--help` by listing only flags defined in a file named after the program (so "No flags matched" for server/main.cc)
// and exits 1. PrintHelpIfAsked prints the program's usage text and every flag defined outside Abseil itself (name,
// default, help) and tells main to return 0; `--helpfull` and the other Abseil usage flags keep their behaviour.
//
//   int main(int argc, char** argv) {
//     if (convoy::tools::PrintHelpIfAsked(argc, argv, kUsage, std::cout)) return 0;
//     absl::ParseCommandLine(argc, argv);
//     ...
#ifndef CONVOY_SERVER_TOOLS_FLAGS_HELP_H_
#define CONVOY_SERVER_TOOLS_FLAGS_HELP_H_

#include <ostream>
#include <string>

#include "absl/strings/string_view.h"

namespace convoy::tools {

// True when argv holds `--help` or `-h` (before a `--` separator); then `usage` and the flag list went to `out`.
bool PrintHelpIfAsked(int argc, char** argv, absl::string_view usage, std::ostream& out);

// The flag list PrintHelpIfAsked prints: "  --name=default" and the help text, sorted by name.
std::string FlagList();

}  // namespace convoy::tools

#endif  // CONVOY_SERVER_TOOLS_FLAGS_HELP_H_
