#include "tools/eval/report.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace aft::eval {
namespace {

struct Figures {
  double bits_per_char, bits_per_token, perplexity, tokens_per_s;
};

Figures figures(const Report& r) {
  const double bits = r.totals.nats / std::log(2.0);
  const auto tokens = static_cast<double>(r.totals.tokens);
  return {bits / static_cast<double>(r.totals.characters), bits / tokens,
          std::exp(r.totals.nats / tokens), r.seconds > 0.0 ? tokens / r.seconds : 0.0};
}

std::string windowing(const Report& r) {
  if (r.window == 0) return "one stream";
  return std::to_string(r.windows) + " x " + std::to_string(r.window) + " tokens";
}

}  // namespace

void write_text(const Report& r, std::FILE* out) {
  const Figures f = figures(r);
  std::fprintf(out, "| model | %s |\n|---|---|\n", r.model.c_str());
  std::fprintf(out, "| text | %s |\n", r.text_file.c_str());
  std::fprintf(out, "| bits per %s | %.6f |\n", r.tokenizer == "byte" ? "byte" : "character",
               f.bits_per_char);
  std::fprintf(out, "| bits per token | %.6f |\n", f.bits_per_token);
  std::fprintf(out, "| perplexity | %.4f |\n", f.perplexity);
  std::fprintf(out, "| tokens scored | %lld |\n", static_cast<long long>(r.totals.tokens));
  std::fprintf(out, "| characters scored | %lld |\n", static_cast<long long>(r.totals.characters));
  std::fprintf(out, "| windows | %s |\n", windowing(r).c_str());
  std::fprintf(out, "| fed | %s |\n", r.decode ? "one token per call" : "prompt chunks");
  if (r.reference) {
    const auto tokens = static_cast<double>(r.totals.tokens);
    std::fprintf(out, "| reference | %s |\n", r.reference->c_str());
    std::fprintf(out, "| KL divergence, mean (nats) | %.6g |\n", r.totals.kld_sum / tokens);
    std::fprintf(out, "| KL divergence, max (nats) | %.6g |\n", r.totals.kld_max);
    std::fprintf(out, "| top-1 agreement | %.4f%% |\n",
                 100.0 * static_cast<double>(r.totals.top1_agreements) / tokens);
  }
  std::fprintf(out, "| tokens/s | %.1f |\n", f.tokens_per_s);
  std::fprintf(out, "| seconds | %.3f |\n", r.seconds);
}

void write_json(const Report& r, std::FILE* out) {
  const Figures f = figures(r);
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["text"] = r.text_file;
  j["tokenizer"] = r.tokenizer;
  j["bits_per_char"] = f.bits_per_char;
  j["bits_per_token"] = f.bits_per_token;
  j["perplexity"] = f.perplexity;
  j["tokens"] = r.totals.tokens;
  j["characters"] = r.totals.characters;
  j["window"] = r.window;
  j["windows"] = r.windows;
  j["decode"] = r.decode;
  if (r.reference) {
    const auto tokens = static_cast<double>(r.totals.tokens);
    j["reference"] = *r.reference;
    j["kld_mean"] = r.totals.kld_sum / tokens;
    j["kld_max"] = r.totals.kld_max;
    j["top1_agreement"] = static_cast<double>(r.totals.top1_agreements) / tokens;
  }
  j["tokens_per_s"] = f.tokens_per_s;
  j["seconds"] = r.seconds;
  std::fprintf(out, "%s\n", j.dump(2).c_str());
}

}  // namespace aft::eval
