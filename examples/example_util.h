/* What the examples share: error reports, tokenizing a prompt, printing a token, greedy picks. */
#ifndef AFT_EXAMPLE_UTIL_H
#define AFT_EXAMPLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aft.h"

/* Prints "<what>: <status> (<message>)" if status is an error; returns whether it is. */
static inline int failed(aft_status status, const char* what) {
  if (status == AFT_OK) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, aft_status_string(status), aft_last_error());
  return 1;
}

/* The tokens of text, in a malloc'ed array the caller frees (NULL on error, reported). Shows the
 * buffer-size convention: ask with no buffer, then allocate what was reported. */
static inline int32_t* tokenize_text(const aft_model* model, const char* text, size_t* n_tokens) {
  const size_t length = strlen(text);
  aft_status status = aft_tokenize(model, text, length, NULL, 0, n_tokens);
  if (status != AFT_ERR_BUFFER_TOO_SMALL) {
    if (!failed(status, "tokenizing")) fprintf(stderr, "tokenizing: the text is empty\n");
    return NULL;
  }
  int32_t* tokens = malloc(*n_tokens * sizeof(int32_t));
  if (!tokens) {
    fprintf(stderr, "tokenizing: out of memory\n");
    return NULL;
  }
  if (failed(aft_tokenize(model, text, length, tokens, *n_tokens, n_tokens), "tokenizing")) {
    free(tokens);
    return NULL;
  }
  return tokens;
}

/* Writes a token's bytes to stdout. A BPE or World token may be long: a short buffer first, then
 * one of the size reported. (Its bytes may be part of a character; aft_detokenizer, which aft-run
 * uses, prints whole characters only.) */
static inline int print_token(const aft_model* model, int32_t token) {
  char piece[16];
  size_t length = 0;
  aft_status status = aft_token_to_text(model, token, piece, sizeof(piece), &length);
  if (status == AFT_ERR_BUFFER_TOO_SMALL) {
    char* long_piece = malloc(length);
    if (!long_piece) {
      fprintf(stderr, "decoding a token: out of memory\n");
      return 1;
    }
    status = aft_token_to_text(model, token, long_piece, length, &length);
    if (status == AFT_OK) fwrite(long_piece, 1, length, stdout);
    free(long_piece);
    return failed(status, "decoding a token");
  }
  if (failed(status, "decoding a token")) return 1;
  fwrite(piece, 1, length, stdout);
  return 0;
}

/* The most likely token of n_vocab logits (the lowest id among equals, as the greedy sampler). */
static inline int32_t greedy_token(const float* logits, size_t n_vocab) {
  size_t best = 0;
  for (size_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return (int32_t)best;
}

/* text as a token count in [0, 100000]; -1 (reported) if it is not one. */
static inline long parse_count(const char* text) {
  char* end = NULL;
  const long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > 100000) {
    fprintf(stderr, "\"%s\" is not a token count (0 to 100000)\n", text);
    return -1;
  }
  return value;
}

#endif /* AFT_EXAMPLE_UTIL_H */
