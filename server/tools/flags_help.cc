// See flags_help.h.
#include "server/tools/flags_help.h"

#include <algorithm>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convoy::tools {

std::string FlagList() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    // Abseil's own flags (--flagfile, --fromenv, the usage flags) are described by --helpfull.
    if (!absl::StrContains(flag->Filename(), "absl/")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) { return a->Name() < b->Name(); });
  std::string out = "flags:\n";
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string value = flag->DefaultValue();
    absl::StrAppend(&out, "  --", flag->Name(), "=", value.empty() ? "\"\"" : value, "\n      ", flag->Help(), "\n");
  }
  return out;
}

bool PrintHelpIfAsked(int argc, char** argv, absl::string_view usage, std::ostream& out) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") {
      out << usage << (absl::EndsWith(usage, "\n") ? "" : "\n") << "\n" << FlagList();
      return true;
    }
  }
  return false;
}

}  // namespace convoy::tools
