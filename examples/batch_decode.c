/* batch_decode: several sequences advanced together with aft_batch_decode.
 *
 *   batch_decode MODEL N PROMPT...
 *
 * Starts one session per prompt, then decodes N tokens greedily for all of them at once, one
 * aft_batch_decode call per step (every weight read once per step for all sessions). Then decodes
 * each prompt again alone, with aft_session_eval, and checks that it gives the same tokens and the
 * same logits bit for bit. Prints each continuation; exits 1 on a mismatch. */
#include "example_util.h"

typedef struct sequence {
  aft_session* session;
  int32_t* tokens; /* the N tokens decoded for it */
} sequence;

/* A session that has evaluated prompt; its last logits go to logits. */
static aft_session* start(const aft_model* model, const char* prompt, float* logits) {
  size_t n_prompt = 0;
  int32_t* tokens = tokenize_text(model, prompt, &n_prompt);
  aft_session* session = NULL;
  if (!tokens || failed(aft_session_create(model, NULL, &session), "creating a session") ||
      failed(aft_session_eval(session, tokens, n_prompt, AFT_LOGITS_LAST, logits),
             "evaluating a prompt")) {
    aft_session_free(session);
    session = NULL;
  }
  free(tokens);
  return session;
}

/* Decodes every sequence together: n steps of aft_batch_decode. logits: one row per sequence. */
static int decode_together(sequence* sequences, size_t n_sequences, long n, float* logits,
                           size_t n_vocab) {
  aft_session** sessions = malloc(n_sequences * sizeof(aft_session*));
  int32_t* step_tokens = malloc(n_sequences * sizeof(int32_t));
  int error = !sessions || !step_tokens;
  for (size_t s = 0; s < n_sequences && !error; ++s) sessions[s] = sequences[s].session;
  for (long i = 0; i < n && !error; ++i) {
    for (size_t s = 0; s < n_sequences; ++s) {
      step_tokens[s] = sequences[s].tokens[i] = greedy_token(logits + s * n_vocab, n_vocab);
    }
    error = failed(aft_batch_decode(sessions, step_tokens, n_sequences, AFT_LOGITS_LAST, logits),
                   "batch decoding");
  }
  free(step_tokens);
  free(sessions);
  return error;
}

/* Decodes prompt alone and compares with what the batch gave: tokens, and the final logits. */
static int check_alone(const aft_model* model, const char* prompt, const sequence* batched,
                       const float* batched_logits, long n, size_t n_vocab) {
  float* logits = malloc(n_vocab * sizeof(float));
  aft_session* session = logits ? start(model, prompt, logits) : NULL;
  int error = !session;
  for (long i = 0; i < n && !error; ++i) {
    const int32_t token = greedy_token(logits, n_vocab);
    if (token != batched->tokens[i]) {
      fprintf(stderr, "\"%s\": token %ld is %d alone, %d in the batch\n", prompt, i, (int)token,
              (int)batched->tokens[i]);
      error = 1;
    } else {
      error = failed(aft_session_eval(session, &token, 1, AFT_LOGITS_LAST, logits), "decoding");
    }
  }
  if (!error && memcmp(logits, batched_logits, n_vocab * sizeof(float)) != 0) {
    fprintf(stderr, "\"%s\": the last logits differ between alone and in the batch\n", prompt);
    error = 1;
  }
  aft_session_free(session);
  free(logits);
  return error;
}

static int demo(const aft_model* model, char** prompts, size_t n_prompts, long n) {
  aft_model_info info;
  if (failed(aft_model_get_info(model, &info), "reading the model")) return 1;
  const size_t n_vocab = (size_t)info.vocab_size;
  sequence* sequences = calloc(n_prompts, sizeof(sequence));
  float* logits = malloc(n_prompts * n_vocab * sizeof(float));
  int error = !sequences || !logits;
  for (size_t s = 0; s < n_prompts && !error; ++s) {
    sequences[s].tokens = malloc(((size_t)n + 1) * sizeof(int32_t));
    sequences[s].session = start(model, prompts[s], logits + s * n_vocab);
    error = !sequences[s].tokens || !sequences[s].session;
  }
  error = error || decode_together(sequences, n_prompts, n, logits, n_vocab);
  for (size_t s = 0; s < n_prompts && !error; ++s) {
    printf("%s|", prompts[s]);
    for (long i = 0; i < n && !error; ++i) error = print_token(model, sequences[s].tokens[i]);
    printf("|\n");
    error =
        error || check_alone(model, prompts[s], &sequences[s], logits + s * n_vocab, n, n_vocab);
  }
  if (!error) printf("each batched sequence equals its decoding alone\n");
  for (size_t s = 0; sequences && s < n_prompts; ++s) {
    aft_session_free(sequences[s].session);
    free(sequences[s].tokens);
  }
  free(logits);
  free(sequences);
  return error;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL N PROMPT...\n", argv[0]);
    return 2;
  }
  const long n = parse_count(argv[2]);
  if (n < 0) return 2;
  aft_model* model = NULL;
  if (failed(aft_model_load(argv[1], NULL, &model), "loading the model")) return 1;
  const int error = demo(model, argv + 3, (size_t)(argc - 3), n);
  aft_model_free(model);
  return error;
}
