// Names that come from clients: the rules a model name must follow to address a repository folder, and how error
// messages quote any client-supplied string (model names, tensor names, datatypes, parameters).
//
//   CONVOY_RETURN_IF_ERROR(CheckModelName(name));            // before touching <repository>/<name>
//   absl::NotFoundError(absl::StrCat("unknown model ", QuoteClientString(name)));
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_NAMES_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_NAMES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace convoy::repository {

// A client-supplied string as error messages quote it: in single quotes, C-escaped, cut to 64 characters ("..."
// and the full length after that), so a megabyte of junk or control bytes never travels back in a status.
std::string QuoteClientString(absl::string_view text);

// OK when `name` can name a model folder directly inside the repository: not empty, not "." or "..", no '/', '\\'
// or NUL, at most 255 bytes. Otherwise INVALID_ARGUMENT saying which rule it breaks.
absl::Status CheckModelName(absl::string_view name);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_NAMES_H_
