// A model as aft-eval uses it: loaded, with one session and its vocabulary's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/cli/api_call.h"

namespace aft::eval {

class EvalModel {
 public:
  EvalModel(const std::string& path, int32_t n_threads,
            aft_matmul_precision precision = AFT_MATMUL_PRECISION_F32);

  const std::string& path() const { return path_; }
  const aft_model_info& info() const { return info_; }
  aft_session* session() const { return session_.get(); }

  // The tokens of text read from file; throws naming the file for text outside the vocabulary.
  std::vector<int32_t> tokenize(const std::string& text, const std::string& file) const;
  // The characters a token stands for: code points for a char tokenizer, bytes for a byte one.
  int64_t characters(int32_t token) const { return characters_[static_cast<size_t>(token)]; }
  // Throws, naming both files, unless other's tokens are these with the same text.
  void require_same_vocabulary(const EvalModel& other) const;

 private:
  std::string path_;
  cli::Model model_;
  aft_model_info info_{};
  cli::Session session_;
  std::vector<std::string> token_texts_;
  std::vector<int64_t> characters_;
};

}  // namespace aft::eval
