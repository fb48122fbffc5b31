#include "tools/bench/machine.h"

#include <cctype>
#include <fstream>
#include <string>
#include <thread>

#include "engine/runtime/physical_cores.h"

namespace aft::bench {
namespace {

std::string trim(const std::string& s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == "model name") {
      return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

// Sizes in /sys look like "32K" or "480M".
std::size_t parse_size(const std::string& text) {
  std::size_t value = 0, i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  }
  if (i < text.size() && text[i] == 'K') return value << 10;
  if (i < text.size() && text[i] == 'M') return value << 20;
  if (i < text.size() && text[i] == 'G') return value << 30;
  return value;
}

std::size_t last_level_cache_bytes() {
  int best_level = 0;
  std::size_t bytes = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) break;
    if (level >= best_level) best_level = level, bytes = parse_size(size);
  }
  return bytes;
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo info;
  info.cpu = cpu_model();
  info.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  info.physical_cores = physical_cores();
  info.llc_bytes = last_level_cache_bytes();
  return info;
}

}  // namespace aft::bench
