#include "tools/eval/eval_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "tools/cli/vocabulary.h"

namespace aft::eval {
namespace {

std::string describe(const std::string& text) {
  std::string shown;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      static const char kHex[] = "0123456789abcdef";
      shown += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    } else {
      shown += c;
    }
  }
  return "\"" + shown + "\"";
}

}  // namespace

EvalModel::EvalModel(const std::string& path, int32_t n_threads, aft_matmul_precision precision)
    : path_(path) {
  aft_model_params params = aft_model_default_params();
  params.matmul_precision = precision;
  aft_model* model = nullptr;
  cli::check(aft_model_load(path.c_str(), &params, &model), "loading the model " + path);
  model_.reset(model);
  cli::check(aft_model_get_info(model, &info_), "reading the model " + path);

  aft_session_params session_params = aft_session_default_params();
  session_params.n_threads = n_threads;
  aft_session* session = nullptr;
  cli::check(aft_session_create(model, &session_params, &session), "creating a session on " + path);
  session_.reset(session);

  const bool byte_level = std::string(info_.tokenizer) == "byte";
  const cli::Vocabulary vocabulary(model, path);
  token_texts_ = vocabulary.texts();
  for (const std::string& text : token_texts_) {
    characters_.push_back(byte_level ? static_cast<int64_t>(text.size())
                                     : cli::code_points_starting(text));
  }
}

std::vector<int32_t> EvalModel::tokenize(const std::string& text, const std::string& file) const {
  const std::string doing = "tokenizing " + file + " for " + path_;
  size_t count = 0;
  const aft_status sized = aft_tokenize(model_.get(), text.data(), text.size(), nullptr, 0, &count);
  if (sized != AFT_ERR_BUFFER_TOO_SMALL) cli::check(sized, doing);
  std::vector<int32_t> tokens(count);
  cli::check(
      aft_tokenize(model_.get(), text.data(), text.size(), tokens.data(), tokens.size(), &count),
      doing);
  return tokens;
}

void EvalModel::require_same_vocabulary(const EvalModel& other) const {
  const std::string both = path_ + " and " + other.path_;
  if (info_.vocab_size != other.info_.vocab_size) {
    throw std::runtime_error(
        both + " have different vocabularies: " + std::to_string(info_.vocab_size) + " " +
        info_.tokenizer + " tokens vs " + std::to_string(other.info_.vocab_size) + " " +
        other.info_.tokenizer + " tokens");
  }
  for (size_t token = 0; token < token_texts_.size(); ++token) {
    if (token_texts_[token] != other.token_texts_[token]) {
      throw std::runtime_error(both + " have different vocabularies: token " +
                               std::to_string(token) + " is " + describe(token_texts_[token]) +
                               " vs " + describe(other.token_texts_[token]));
    }
  }
}

}  // namespace aft::eval
