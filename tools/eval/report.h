// aft-eval's output: a small table (default) or one JSON object (--json).
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "tools/eval/scoring.h"

namespace aft::eval {

struct Report {
  std::string model;
  std::string text_file;
  std::optional<std::string> reference;
  std::string tokenizer;  // "byte" or "char": what a character is
  size_t window = 0;      // 0: one stream
  size_t windows = 0;
  bool decode = false;  // fed one token per call
  Totals totals;
  double seconds = 0.0;  // evaluating (both models with a reference), loading excluded
};

void write_text(const Report& report, std::FILE* out);
void write_json(const Report& report, std::FILE* out);

}  // namespace aft::eval
