/* state_fork: a sequence's state saved to bytes, restored, and forked.
 *
 *   state_fork MODEL PROMPT [N]
 *
 * Evaluates the prompt, saves the session's state and forks the session, then continues greedily
 * for N tokens (default 32) three ways: the original session uninterrupted, the original again
 * after restoring the saved bytes (rewinding it to the end of the prompt), and the fork. The state
 * holds no logits, so the prompt's last logits are kept beside it. Prints the three continuations;
 * exits 1 unless they are the same tokens. */
#include "example_util.h"

/* Continues greedily from logits (the last token's) for n tokens into out; prints them. */
static int continue_greedily(const aft_model* model, aft_session* session, const float* logits,
                             size_t n_vocab, long n, int32_t* out, const char* label) {
  float* current = malloc(n_vocab * sizeof(float));
  if (!current) return 1;
  memcpy(current, logits, n_vocab * sizeof(float));
  printf("%-13s|", label);
  int error = 0;
  for (long i = 0; i < n && !error; ++i) {
    out[i] = greedy_token(current, n_vocab);
    error = print_token(model, out[i]) ||
            failed(aft_session_eval(session, &out[i], 1, AFT_LOGITS_LAST, current), "continuing");
  }
  printf("|\n");
  free(current);
  return error;
}

/* Saves session's state in a malloc'ed buffer the caller frees; NULL on error (reported). */
static void* save_state(const aft_session* session, size_t* size) {
  *size = aft_session_state_size(session);
  void* bytes = malloc(*size);
  if (!bytes || failed(aft_session_state_save(session, bytes, *size, size), "saving the state")) {
    free(bytes);
    return NULL;
  }
  return bytes;
}

static int demo(const aft_model* model, aft_session* session, const char* prompt, long n) {
  aft_model_info info;
  if (failed(aft_model_get_info(model, &info), "reading the model")) return 1;
  const size_t n_vocab = (size_t)info.vocab_size;
  size_t n_prompt = 0;
  int32_t* tokens = tokenize_text(model, prompt, &n_prompt);
  float* logits = malloc(n_vocab * sizeof(float));
  int32_t* continuations = calloc(3 * (size_t)n + 1, sizeof(int32_t));
  void* state = NULL;
  size_t state_size = 0;
  aft_session* fork = NULL;
  int error = !tokens || !logits || !continuations ||
              failed(aft_session_eval(session, tokens, n_prompt, AFT_LOGITS_LAST, logits),
                     "evaluating the prompt") ||
              !(state = save_state(session, &state_size)) ||
              failed(aft_session_fork(session, &fork), "forking");
  if (!error) {
    printf("prompt \"%s\": %zu tokens, state %zu bytes\n", prompt, n_prompt, state_size);
    int32_t* uninterrupted = continuations;
    int32_t* restored = continuations + n;
    int32_t* forked = continuations + 2 * n;
    error = continue_greedily(model, session, logits, n_vocab, n, uninterrupted, "uninterrupted") ||
            failed(aft_session_state_load(session, state, state_size), "restoring the state") ||
            continue_greedily(model, session, logits, n_vocab, n, restored, "restored") ||
            continue_greedily(model, fork, logits, n_vocab, n, forked, "fork");
    if (!error && (memcmp(uninterrupted, restored, (size_t)n * sizeof(int32_t)) != 0 ||
                   memcmp(uninterrupted, forked, (size_t)n * sizeof(int32_t)) != 0)) {
      fprintf(stderr, "state_fork: the continuations differ\n");
      error = 1;
    }
  }
  if (!error) printf("the restored and forked sessions continue as the uninterrupted one\n");
  aft_session_free(fork);
  free(state);
  free(continuations);
  free(logits);
  free(tokens);
  return error;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N]\n", argv[0]);
    return 2;
  }
  const long n = argc == 4 ? parse_count(argv[3]) : 32;
  if (n < 0) return 2;

  aft_model* model = NULL;
  if (failed(aft_model_load(argv[1], NULL, &model), "loading the model")) return 1;
  aft_session* session = NULL;
  const int error = failed(aft_session_create(model, NULL, &session), "creating a session") ||
                    demo(model, session, argv[2], n);
  aft_session_free(session);
  aft_model_free(model);
  return error;
}
