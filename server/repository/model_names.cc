// See model_names.h.
#include "server/repository/model_names.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace convoy::repository {

constexpr size_t kQuoteLimit = 64;

std::string QuoteClientString(absl::string_view text) {
  if (text.size() <= kQuoteLimit) return absl::StrCat("'", absl::CHexEscape(text), "'");
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, kQuoteLimit)), "...' (", text.size(), " bytes)");
}

absl::Status CheckModelName(absl::string_view name) {
  const char* problem = nullptr;
  if (name.empty()) {
    problem = "is empty";
  } else if (name == "." || name == "..") {
    problem = "is not a folder name ('.' and '..' are not models)";
  } else if (name.find_first_of(absl::string_view("/\\\0", 3)) != absl::string_view::npos) {
    problem = "contains '/', '\\\\' or NUL (a model is a folder directly inside the repository)";
  } else if (name.size() > 255) {
    problem = "is longer than 255 bytes";
  }
  if (problem == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model name ", QuoteClientString(name), " ", problem));
}

}  // namespace convoy::repository
