// A whole file read as text, for the tools' options that take one (a prompt, a chat template).
#pragma once

#include <string>

namespace aft::cli {

// Throws std::runtime_error naming the file and `what` it was to be ("the prompt file").
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace aft::cli
