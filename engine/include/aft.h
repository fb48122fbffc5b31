/* aft: CPU inference for Attention Free Transformer language models. Public C API.
 *
 * Every function that can fail returns an aft_status; on failure aft_last_error() holds a message
 * naming the problem (file, tensor, expected vs found). Handles are opaque; every int-typed enum
 * value may be passed (bad ones are refused with AFT_ERR_INVALID_ARGUMENT).
 *
 * Threads: a model is immutable after loading; any number of threads may use it at once (create
 * sessions, tokenize, read its info). A session and a sampler are used by one thread at a time;
 * different sessions (of one model or of several) may run on different threads at once. The
 * library's global settings (the log callback) are set before other threads use the library.
 * How many threads a session computes with: aft_session_params.n_threads.
 */
#ifndef AFT_H
#define AFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; aft_version() gives the library's, which may be newer. */
#define AFT_VERSION_MAJOR 0
#define AFT_VERSION_MINOR 5
#define AFT_VERSION_PATCH 0

typedef enum aft_status {
  AFT_OK = 0,
  AFT_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, bad parameter value */
  AFT_ERR_IO = 2,               /* the file cannot be opened, read or mapped */
  AFT_ERR_FORMAT = 3,           /* a model file or a saved session state is malformed */
  AFT_ERR_OUT_OF_RANGE = 4, /* token id outside the vocabulary, position past the model's limit */
  AFT_ERR_TOKENIZE = 5,     /* text the tokenizer cannot represent */
  AFT_ERR_BUFFER_TOO_SMALL = 6, /* the output buffer is too small; the needed size is reported */
  AFT_ERR_OUT_OF_MEMORY = 7,
  AFT_ERR_INTERNAL = 8,
  AFT_ERR_ABORTED =
      9, /* the session's abort callback asked to stop (aft_session_set_abort_callback) */
  AFT_STATUS_MIN_ENUM = -0x7FFFFFFF - 1, /* the enum's type is int */
  AFT_STATUS_MAX_ENUM = 0x7FFFFFFF
} aft_status;

/* ---- Library ------------------------------------------------------------------------------- */

/* The library's version, "MAJOR.MINOR.PATCH". */
const char* aft_version(void);

/* The version of the model file format (docs/format.md) this library reads, and of the session
 * state bytes it writes and reads (aft_session_state_save). */
uint32_t aft_model_file_version(void);
uint32_t aft_session_state_version(void);

/* A static string naming the status ("invalid argument", ...). */
const char* aft_status_string(aft_status status);

/* The message of the last failed call on this thread ("" if none). Valid until the next failing
 * call. */
const char* aft_last_error(void);

/* Which SIMD instruction set the kernels use on this machine ("avx512amx", "avx512bf16",
 * "avx512vnni", "avx512", "avx2", "sse2", "neondot", "neon", "scalar"). Set the environment
 * variable AFT_ISA to one of these to force a path. */
const char* aft_kernel_isa(void);

/* What computes the matrix products of a prompt: the library, its version, how the work is split
 * and the implementations it picked on this machine (limit them with ONEDNN_MAX_CPU_ISA). */
const char* aft_matmul_implementation(void);

/* The matrix units that the products of bf16 weights run on, with the activations rounded to
 * bf16 (for decode and batches too): on AMX aft's own tile kernels ("aft's AMX tile kernels
 * (amx_bf16, amx_int8)", which also take q8_0 prompts and batches); with AVX512-BF16 oneDNN's
 * implementation for prompts ("brg:avx512_core_bf16 (oneDNN)") and vdpbf16ps for the rest; ""
 * where the CPU has neither, where its AVX512-BF16 is slower than FMAs (Intel's cores without AMX;
 * the environment variable AFT_MATRIX_UNITS=on takes it there too), or with AFT_MATRIX_UNITS=off
 * (the weights are then widened to f32 and multiplied in f32). */
const char* aft_matrix_units(void);

typedef enum aft_log_level {
  AFT_LOG_ERROR = 0,
  AFT_LOG_WARNING = 1,
  AFT_LOG_INFO = 2,
  AFT_LOG_LEVEL_MIN_ENUM = -0x7FFFFFFF - 1, /* the enum's type is int */
  AFT_LOG_LEVEL_MAX_ENUM = 0x7FFFFFFF
} aft_log_level;

/* Receives the library's messages (one line each, without a newline) instead of stderr, where by
 * default warnings and errors go. May be called from any thread that uses the library. */
typedef void (*aft_log_callback)(aft_log_level level, const char* message, void* user_data);

/* Sends messages to callback (NULL: back to stderr). Not thread-safe: set it before other threads
 * use the library. */
void aft_log_set_callback(aft_log_callback callback, void* user_data);

/* ---- Model ---------------------------------------------------------------------------------- */

typedef struct aft_model aft_model;

/* How the products of a prompt (more than 8 tokens at once) with f32 weights are computed. */
typedef enum aft_matmul_precision {
  AFT_MATMUL_PRECISION_F32 = 0, /* exactly, in f32 (the default) */
  /* On the matrix units (aft_matrix_units) where the CPU has them, several times faster: from a
   * copy of the weights rounded to bf16 (made at the first prompt; half the f32 weights' bytes),
   * the activations rounded to bf16, every product summed in f32, so a prompt's logits are the
   * bits of the same model stored in bf16 (aft-quantize). One token at a time (decoding) stays
   * f32. Where the CPU has no units this is AFT_MATMUL_PRECISION_F32; bf16 weights are on the
   * units either way, and q8_0 weights never. docs/benchmarks.md measures its KL divergence. */
  AFT_MATMUL_PRECISION_BF16 = 1,
  AFT_MATMUL_PRECISION_MIN_ENUM = -0x7FFFFFFF - 1, /* the enum's type is int */
  AFT_MATMUL_PRECISION_MAX_ENUM = 0x7FFFFFFF
} aft_matmul_precision;

typedef struct aft_model_params {
  int verify_checksums;                  /* 1 (default): check every tensor's CRC-32 at load */
  aft_matmul_precision matmul_precision; /* AFT_MATMUL_PRECISION_F32 (default) */
  /* 1 (default) or 0, which no longer differ: every weight matrix, f32 included, is packed
   * at load into the model's own memory (on 2 MiB pages where the system gives them), in the
   * layouts of the decode kernels; the file stays mapped for its other tensors. */
  int use_mmap;
} aft_model_params;

aft_model_params aft_model_default_params(void);

/* Memory-maps and validates a model file. params may be NULL (defaults). */
aft_status aft_model_load(const char* path, const aft_model_params* params, aft_model** model);
/* The same checks on the size bytes of a model file held in memory (messages name it "<memory>").
 * The model keeps a 64-byte aligned copy: data may have any alignment and may be freed as soon as
 * this returns. AFT_ERR_FORMAT for truncated or malformed bytes (size 0 included). */
aft_status aft_model_load_from_memory(const void* data, size_t size, const aft_model_params* params,
                                      aft_model** model);
void aft_model_free(aft_model* model);

typedef struct aft_model_info {
  const char* mixer;     /* "simple", "local", "conv", "full" or "decay" */
  const char* tokenizer; /* "byte", "char", "bpe" (byte-level BPE) or "world" (RWKV World) */
  int32_t vocab_size;
  int32_t d_model;
  int32_t n_layers;
  int32_t d_ff;
  int32_t window; /* local, conv: s; otherwise 0 */
  int32_t n_heads;
  int64_t max_positions; /* positions a session may reach; 0 = unlimited */
  int64_t n_parameters;
  uint64_t file_bytes;
  /* Weights of the linear layers (query, key, value, output, feed-forward up and down of every
   * layer) and of the head (vocab_size x d_model, the embedding when tied), biases excluded: the
   * weights decoding reads once per token, and half the FLOPs per token of a prompt. */
  int64_t n_matmul_parameters;
} aft_model_info;

aft_status aft_model_get_info(const aft_model* model, aft_model_info* info);

/* The model file's header as key/value strings: every key of its config ("config.d_model" ->
 * "512", "config.mixer" -> "local"), the tokenizer's kind ("tokenizer.type" -> "byte") and every
 * entry of its free-form metadata ("metadata.producer" -> "aft-export"). Strings are given as
 * they are, other values as their JSON text. Keys are sorted; the strings live as long as the
 * model. */
size_t aft_model_metadata_count(const aft_model* model); /* 0 if model is NULL */
aft_status aft_model_metadata_at(const aft_model* model, size_t index, const char** key,
                                 const char** value);
/* The value of key, or NULL if the model (or key) is NULL or has no such key. */
const char* aft_model_metadata_get(const aft_model* model, const char* key);

/* The model's fingerprint: the CRC-32 of its header (config, tokenizer, every tensor's shape, place
 * and CRC-32), which its saved session states carry (docs/format.md, "Session state"). Names the
 * model, e.g. to keep caches of states of different models apart; 0 if model is NULL. */
uint32_t aft_model_fingerprint(const aft_model* model);

/* ---- Tokenizer ------------------------------------------------------------------------------ */

/* Encodes text_len bytes of UTF-8 text. *n_tokens receives the number of tokens; if it exceeds
 * capacity, AFT_ERR_BUFFER_TOO_SMALL is returned and nothing is written (tokens may be NULL then).
 */
aft_status aft_tokenize(const aft_model* model, const char* text, size_t text_len, int32_t* tokens,
                        size_t capacity, size_t* n_tokens);

/* The bytes of one token (a byte for byte models, a UTF-8 character for character models, any
 * number of bytes for "bpe" and "world" models, none for an id with no token such as a World
 * model's end of text), written to text without a terminating NUL; *text_len receives their
 * number. Same buffer rule: a BPE token can be long, so ask for the size first or retry. A token's
 * bytes may be part of a character; aft_detokenizer gives whole characters. */
aft_status aft_token_to_text(const aft_model* model, int32_t token, char* text, size_t capacity,
                             size_t* text_len);

/* The token that ends a text, which generation stops at without printing it (since 0.5): a World
 * model's 0, or the file's tokenizer.end_of_text (docs/format.md; a Pile model's <|endoftext|>,
 * which aft-import-rwkv and aft.tokenizers write); -1 if the model has none or is NULL. */
int32_t aft_model_end_of_text(const aft_model* model);

/* Tokens to text for printing as they come: the output is always valid UTF-8. A character whose
 * bytes span tokens is held until its last byte arrives; bytes that cannot form a character are
 * replaced by U+FFFD (one per maximal ill-formed sequence) once that is certain. The model must
 * outlive the detokenizer; one thread at a time uses a detokenizer. */
typedef struct aft_detokenizer aft_detokenizer;

aft_status aft_detokenizer_create(const aft_model* model, aft_detokenizer** detokenizer);
void aft_detokenizer_free(aft_detokenizer* detokenizer); /* accepts NULL */

/* Adds a token; the text now complete goes to text (no NUL), its length to *text_len (possibly 0).
 * If it exceeds capacity, AFT_ERR_BUFFER_TOO_SMALL: nothing is written and the token is not
 * consumed (push it again with a larger buffer; *text_len says how large). 3 x (the token's
 * bytes + 3) always suffices. An id outside the vocabulary: AFT_ERR_OUT_OF_RANGE, nothing
 * consumed. */
aft_status aft_detokenizer_push(aft_detokenizer* detokenizer, int32_t token, char* text,
                                size_t capacity, size_t* text_len);
/* Ends the text: held bytes of an unfinished character come out as U+FFFD (3 bytes at most), and
 * the detokenizer starts afresh. Same buffer rule. */
aft_status aft_detokenizer_flush(aft_detokenizer* detokenizer, char* text, size_t capacity,
                                 size_t* text_len);

/* ---- Session: the state of one sequence ----------------------------------------------------- */

typedef struct aft_session aft_session;

typedef struct aft_session_params {
  /* 0 (default): automatic, chosen at each call: the physical cores shared by the sessions
   * computing at the same moment (one session alone uses every core, two at once half each), so
   * that sessions on several threads never oversubscribe the machine, and no more than the CPUs
   * that other processes leave free (at least one; where the process may run on every CPU).
   * N > 0: N threads, whatever else runs. At most AFT_MAX_THREADS. Results are the same bits for
   * every thread count. */
  int32_t n_threads;
} aft_session_params;

#define AFT_MAX_THREADS 1024

aft_session_params aft_session_default_params(void);

aft_status aft_session_create(const aft_model* model, const aft_session_params* params,
                              aft_session** session);
void aft_session_free(aft_session* session);

/* Changes the session's thread count (as aft_session_params.n_threads; 0 = automatic). */
aft_status aft_session_set_threads(aft_session* session, int32_t n_threads);
/* The thread count asked for (0 = automatic); -1 if session is NULL. */
int32_t aft_session_threads(const aft_session* session);

/* Called by aft_session_eval between chunks of a long prompt (every 512 tokens); a nonzero
 * return stops the evaluation with AFT_ERR_ABORTED. The chunks already done stay consumed:
 * aft_session_position tells how far it got, and feeding the rest of the tokens from there
 * continues as if nothing had stopped. callback NULL: never stop. */
typedef int (*aft_abort_callback)(void* user_data);
aft_status aft_session_set_abort_callback(aft_session* session, aft_abort_callback callback,
                                          void* user_data);

/* Forgets every token: back to position 0. */
aft_status aft_session_reset(aft_session* session);

/* Tokens consumed so far (the position of the next token). */
int64_t aft_session_position(const aft_session* session); /* -1 if session is NULL */

typedef enum aft_logits_mode {
  AFT_LOGITS_NONE = 0, /* only advance the state */
  AFT_LOGITS_LAST = 1, /* logits of the last token: vocab_size floats */
  AFT_LOGITS_ALL = 2,  /* logits of every token: n_tokens x vocab_size floats, row-major */
  /* These two make the enum's type int, every int value valid, so bad ones can be refused. */
  AFT_LOGITS_MODE_MIN_ENUM = -0x7FFFFFFF - 1,
  AFT_LOGITS_MODE_MAX_ENUM = 0x7FFFFFFF
} aft_logits_mode;

/* Feeds n_tokens tokens (a prompt at once, or one token when decoding) and writes logits as mode
 * asks. On any error but AFT_ERR_ABORTED the session is unchanged: tokens and positions are checked
 * before work starts, and a failure part-way (AFT_ERR_OUT_OF_MEMORY, AFT_ERR_INTERNAL) restores it.
 * Determinism: the same tokens fed in the same calls give bit-identical logits whatever n_threads
 * and on every kernel path; feeding them in other calls (a prompt at once or in pieces) gives the
 * same logits to within float rounding. */
aft_status aft_session_eval(aft_session* session, const int32_t* tokens, size_t n_tokens,
                            aft_logits_mode mode, float* logits);

/* Advances n_sessions sessions of one model by one token each (tokens[i] to sessions[i]) in a
 * single pass that reads every weight once for all of them: N sequences decode in far less than N
 * times the time of one (docs/benchmarks.md). logits: with AFT_LOGITS_LAST or AFT_LOGITS_ALL (the
 * same here), n_sessions x vocab_size floats, row i for sessions[i]; may be NULL with
 * AFT_LOGITS_NONE. Each session's logits and state are bit-identical to
 * aft_session_eval(sessions[i], &tokens[i], 1, ...). The sessions must be distinct and of one
 * model; the pass uses sessions[0]'s thread count. On any error (a NULL or repeated session, a
 * token or position out of range anywhere, out of memory part-way) no session changes. */
aft_status aft_batch_decode(aft_session* const* sessions, const int32_t* tokens, size_t n_sessions,
                            aft_logits_mode mode, float* logits);

/* ---- Session state: save, restore, fork -------------------------------------------------------
 */

/* A sequence's whole state (the position and, per layer, the AFT running sums and the window or
 * the kept keys and values) as bytes: AFT-simple O(d) per layer, AFT-local and AFT-conv O(s d),
 * AFT-full O(t d) at position t. Saved, restored and continued, it gives the same bits as never
 * saving. The bytes name the model they belong to (a checksum of its header: config, tokenizer and
 * every tensor's checksum) and carry a checksum of their own. */

/* The bytes aft_session_state_save needs now (it grows with the position for AFT-full); 0 if
 * session is NULL. */
size_t aft_session_state_size(const aft_session* session);

/* Writes the state to buffer. *written (may be NULL) receives the state's size; if it exceeds
 * capacity, AFT_ERR_BUFFER_TOO_SMALL is returned and nothing is written. */
aft_status aft_session_state_save(const aft_session* session, void* buffer, size_t capacity,
                                  size_t* written);

/* Replaces the session's state with a saved one. AFT_ERR_FORMAT, with the session unchanged, for
 * bytes that are truncated, corrupted, of another format version or of another model. */
aft_status aft_session_state_load(aft_session* session, const void* buffer, size_t size);

/* A new session on the same model and thread count at the same point of the same sequence:
 * continuing either gives the tokens and logits the original would. The abort callback is not
 * copied. Free it with aft_session_free. */
aft_status aft_session_fork(const aft_session* session, aft_session** fork);

/* ---- Sampling ------------------------------------------------------------------------------- */

typedef struct aft_sampler aft_sampler;

typedef struct aft_logit_bias {
  int32_t token;
  float bias; /* added to the token's logit; -INFINITY bans it */
} aft_logit_bias;

/* The chain, in order (llama.cpp's): logit bias, penalties over the recent tokens, top-k, top-p,
 * min-p, temperature, then a draw from the sampler's own generator (or, at temperature 0, the
 * most likely token). */
typedef struct aft_sampler_params {
  float temperature; /* 0: greedy (argmax); default 0.8 */
  int32_t top_k;     /* keep the k most likely tokens; 0 = all; default 40 */
  float top_p;       /* keep the smallest set with probability >= p; 1 = all; default 0.95 */
  float min_p; /* drop tokens less likely than min_p x the most likely; 0 = off; default 0.05 */
  /* Penalties on the tokens among the last repeat_last_n recorded (aft_sampler_accept, and every
   * token sampled): a repeated token's logit is divided by repeat_penalty if positive, multiplied
   * if negative (1 = off, the default), then lowered by frequency_penalty x its count and by
   * presence_penalty once (0 = off, the defaults). */
  int32_t repeat_last_n; /* default 64; 0 = no penalties; -1 = every token since the reset */
  float repeat_penalty;
  float frequency_penalty;
  float presence_penalty;
  const aft_logit_bias* logit_bias; /* n_logit_bias entries, copied at creation; may be NULL */
  size_t n_logit_bias;
  uint64_t seed; /* same seed, same logits: same tokens; default 0 */
} aft_sampler_params;

aft_sampler_params aft_sampler_default_params(void);

aft_status aft_sampler_create(const aft_sampler_params* params, aft_sampler** sampler);
void aft_sampler_free(aft_sampler* sampler);

/* Picks a token from n_vocab logits (not modified) and records it as accept would.
 * AFT_ERR_INVALID_ARGUMENT for a NaN or +inf logit, or when no token is left to pick (every logit
 * -inf after the bias): never a made-up token 0. */
aft_status aft_sampler_sample(aft_sampler* sampler, const float* logits, size_t n_vocab,
                              int32_t* token);

/* Records a token in the penalties' history without sampling (a prompt's tokens, say). */
aft_status aft_sampler_accept(aft_sampler* sampler, int32_t token);

/* Forgets the history and restarts the generator from the seed. */
aft_status aft_sampler_reset(aft_sampler* sampler);

#ifdef __cplusplus
}
#endif

#endif /* AFT_H */
