#include "tools/bench/mapped_pages.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace aft::bench {
namespace {

// A mapping's first line: "start-end perms offset dev inode [path]", the path the rest of the
// line (it may hold spaces). Its fields follow as "Name:  value kB".
bool is_mapping_line(const std::string& line, std::string& path) {
  std::istringstream in(line);
  std::string range, perms, offset, device, inode;
  if (!(in >> range >> perms >> offset >> device >> inode)) return false;
  if (range.find('-') == std::string::npos || range.back() == ':') return false;
  path.clear();
  std::getline(in >> std::ws, path);
  return true;
}

uint64_t field_bytes(const std::string& line, const char* name) {
  const std::string prefix = std::string(name) + ":";
  if (line.compare(0, prefix.size(), prefix) != 0) return 0;
  std::istringstream in(line.substr(prefix.size()));
  uint64_t kib = 0;
  return in >> kib ? kib * 1024 : 0;
}

}  // namespace

MappedPages mapped_pages(std::istream& smaps, const std::string& file) {
  MappedPages pages;
  pages.known = true;
  bool in_file = false;
  std::string line, path;
  while (std::getline(smaps, line)) {
    if (is_mapping_line(line, path)) {
      in_file = path == file;
    } else if (in_file) {
      pages.resident_bytes += field_bytes(line, "Rss");
      pages.huge_page_bytes += field_bytes(line, "FilePmdMapped");
    }
  }
  return pages;
}

MappedPages mapped_pages_of(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::error_code error;
  const std::filesystem::path file = std::filesystem::canonical(path, error);
  if (!smaps || error) return {};
  return mapped_pages(smaps, file.string());
}

}  // namespace aft::bench
