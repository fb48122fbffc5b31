// How much of a mapped file this process has resident, and how much of that on 2 MiB pages: the
// kernel maps a large folio of the page cache whole (the 6.18 kernels of this project's machines
// on ext4; not Debian 12's 6.1) and 4 KiB at a time otherwise, and mapped f32 decode ran 1.1-1.6x
// apart between the two, so a figure means little without the share it had (docs/benchmarks.md,
// "The page cache's pages and a step of 16").
#pragma once

#include <cstdint>
#include <istream>
#include <string>

namespace aft::bench {

struct MappedPages {
  bool known = false;  // whether the process's mappings could be read
  uint64_t resident_bytes = 0;
  uint64_t huge_page_bytes = 0;  // of resident_bytes, mapped as 2 MiB pages (FilePmdMapped)
};

// The mappings of `file` (a path as /proc/PID/smaps writes it) in an smaps listing: their Rss and
// FilePmdMapped summed.
MappedPages mapped_pages(std::istream& smaps, const std::string& file);

// This process's mappings of the file at `path`; not known where /proc/self/smaps is absent.
MappedPages mapped_pages_of(const std::string& path);

}  // namespace aft::bench
