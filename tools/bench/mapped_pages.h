// How much of a mapped file this process has resident, and how much of that on 2 MiB pages: the
// kernel maps a large folio of the page cache whole (Linux 6.x, a file system with large folios,
// such as ext4 from 6.16) and 4 KiB at a time otherwise, and mapped f32 decode runs 1.1-1.3x
// faster on the larger pages, so a figure means little without the share it had
// (docs/benchmarks.md, "f32 weights in the process's memory").
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
