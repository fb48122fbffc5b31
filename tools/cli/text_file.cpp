#include "tools/cli/text_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace aft::cli {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw std::runtime_error(path + ": is a directory, not " + what);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open " + what);
  std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad()) throw std::runtime_error(path + ": cannot read " + what);
  return text;
}

}  // namespace aft::cli
