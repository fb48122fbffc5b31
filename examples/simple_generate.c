/* simple_generate: the smallest complete generator on the aft C API.
 *
 *   simple_generate MODEL PROMPT N
 *
 * Loads the model, evaluates the prompt, samples N tokens (the sampler's defaults, seed 1) and
 * prints the prompt and its continuation: the text `aft-run MODEL --prompt PROMPT -n N --seed 1`
 * prints. */
#include "example_util.h"

/* Evaluates the prompt, then samples and prints n tokens. */
static int generate(const aft_model* model, aft_session* session, aft_sampler* sampler,
                    const char* prompt, long n) {
  aft_model_info info;
  if (failed(aft_model_get_info(model, &info), "reading the model")) return 1;
  size_t n_prompt = 0;
  int32_t* tokens = tokenize_text(model, prompt, &n_prompt);
  float* logits = malloc((size_t)info.vocab_size * sizeof(float));
  int error = !tokens || !logits;
  if (!error) {
    fputs(prompt, stdout);
    error = failed(aft_session_eval(session, tokens, n_prompt, AFT_LOGITS_LAST, logits),
                   "evaluating the prompt");
  }
  for (long i = 0; i < n && !error; ++i) {
    int32_t token = 0;
    error =
        failed(aft_sampler_sample(sampler, logits, (size_t)info.vocab_size, &token), "sampling") ||
        print_token(model, token);
    /* Models with position parameters end at max_positions; the last token needs no logits. */
    const int at_limit =
        info.max_positions > 0 && aft_session_position(session) >= info.max_positions;
    if (error || i + 1 == n || at_limit) break;
    error = failed(aft_session_eval(session, &token, 1, AFT_LOGITS_LAST, logits), "generating");
  }
  printf("\n");
  free(logits);
  free(tokens);
  return error;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL PROMPT N\n", argv[0]);
    return 2;
  }
  const long n = parse_count(argv[3]);
  if (n < 0) return 2;

  aft_model* model = NULL;
  if (failed(aft_model_load(argv[1], NULL, &model), "loading the model")) return 1;
  aft_session* session = NULL;
  aft_sampler* sampler = NULL;
  aft_sampler_params sampler_params = aft_sampler_default_params();
  sampler_params.seed = 1;
  int error = failed(aft_session_create(model, NULL, &session), "creating a session") ||
              failed(aft_sampler_create(&sampler_params, &sampler), "creating a sampler") ||
              generate(model, session, sampler, argv[2], n);
  aft_sampler_free(sampler); /* the free functions accept NULL */
  aft_session_free(session);
  aft_model_free(model);
  return error;
}
