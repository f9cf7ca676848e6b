/* kamera.h: the public C API of kamera, a CPU inference engine with a position-free KV cache.
 *
 * One header, C99, no C++ types. Link with -lkamera (pkg-config --cflags --libs kamera).
 * docs/API.md walks through it with a complete program; examples/reuse.c is one to copy.
 *
 * Handles (opaque, created by a *_new / *_load / *_from_* call, released by the matching
 * *_free, which accepts NULL):
 *   kamera_model    a loaded model (weights, tokenizer); immutable
 *   kamera_context  the model's engine, KV pool and chunk store (with its tiers)
 *   kamera_chunk    a chunk: token ids or embedding rows with relative (t, h, w) positions, and
 *                   its content id; once cached, a view of its canonical KV
 *   kamera_seq      a sequence of a context's KV pool (assembled from chunks, or empty) that
 *                   evaluates tokens and returns logits
 *   kamera_window   the agent window: ordered chunk slots over one pool sequence
 *   kamera_logits   logits returned by an evaluation (rows x n_vocab floats)
 *   kamera_sampler  next-token sampling state (greedy, temperature, top-k, top-p, seed)
 *   kamera_vision   a vision or audio tower (mmproj GGUF): pictures, frames or audio clips ->
 *                   embedding chunks
 *
 * Lifetimes: a handle keeps alive what it was made from. A context keeps its model; a sequence,
 * window or logits object keeps its context (and its KV), so any free order is safe. A chunk
 * keeps its content and, after kamera_context_cache_chunk, the canonical KV it was given.
 *
 * Errors: every call that can fail returns a kamera_status (KAMERA_OK = 0, otherwise the kind of
 * failure). kamera_last_error() then returns a message that names the input and what is wrong.
 * Null handles and bad arguments return KAMERA_ERR_INVALID_ARGUMENT; no call aborts on bad
 * input and no C++ exception crosses this API (an allocation failure is
 * KAMERA_ERR_OUT_OF_MEMORY). A failed call sets its output handles to NULL and leaves every
 * handle valid; assembly and evaluation leave the sequence as it was. (A window reorder that
 * fails while forming patches may have re-patched some slots; the window stays consistent.)
 *
 * Threads: a kamera_model may be used from any number of threads at once. Every other handle is
 * not thread-safe: calls on one context, and on the sequences, windows and chunks it serves, must
 * not overlap. Distinct contexts (on the same model or not) may run on different threads at once.
 * Functions marked "thread-safe" below may be called from any thread at any time.
 *
 * Strings are UTF-8. Token ids are int32_t. Positions are (t, h, w) triples: text uses
 * t = h = w; a vision frame uses one t and an (h, w) grid (M-RoPE models).
 */
#ifndef KAMERA_H
#define KAMERA_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KAMERA_API
#else
#define KAMERA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KAMERA_API_VERSION 1
#define KAMERA_FULL_RANK (-1) /* a patch of full rank (exact conditioned KV) */
#define KAMERA_ID_HEX_SIZE 33 /* 32 hex digits of a chunk id and a NUL */

/* ---- status and errors ------------------------------------------------------------------- */

typedef enum kamera_status {
  KAMERA_OK = 0,
  KAMERA_ERR_INVALID_ARGUMENT = 1, /* the caller's input is wrong (null, range, shape, option) */
  KAMERA_ERR_NOT_FOUND = 2,        /* a named thing (file, chunk, slot) does not exist */
  KAMERA_ERR_OUT_OF_MEMORY = 3,    /* the KV pool or an allocation is full; nothing changed */
  KAMERA_ERR_CORRUPT_DATA = 4,     /* a file or stored entry is malformed or fails its checksum */
  KAMERA_ERR_UNSUPPORTED = 5,      /* well-formed but not implemented (tensor type, arch) */
  KAMERA_ERR_INTERNAL = 6,         /* a numerical or library failure, not the caller's fault */
  KAMERA_ERR_IO = 7,               /* the operating system refused a read or write */
  KAMERA_STATUS_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_status;

/* "ok", "invalid_argument", "not_found", "out_of_memory", "corrupt_data", "unsupported",
 * "internal", "io"; "unknown" for other values. Thread-safe. */
KAMERA_API const char* kamera_status_name(kamera_status status);

/* The message of the most recent failing call on the calling thread ("" when none). Valid until
 * the next failing call on this thread. Thread-safe (the message is per thread). */
KAMERA_API const char* kamera_last_error(void);

/* "0.1.0". Thread-safe. */
KAMERA_API const char* kamera_version(void);

/* ---- models ------------------------------------------------------------------------------ */

typedef struct kamera_model kamera_model;

/* Loads a GGUF file, or a llama2.c checkpoint with its tokenizer.bin (tokenizer_path; NULL for
 * GGUF, whose files carry their tokenizer). Thread-safe. */
KAMERA_API kamera_status kamera_model_load(const char* path, const char* tokenizer_path,
                                           kamera_model** out);
KAMERA_API void kamera_model_free(kamera_model* model);

typedef struct kamera_model_info {
  const char* arch;   /* "llama", "qwen2", "qwen2vl", "deepseek2", "qwen3", "qwen3moe", "qwen3vl",
                         "qwen3vlmoe" (static storage) */
  const char* format; /* "gguf", "llama2c-v0", "llama2c-v1" (valid while the model lives) */
  int32_t n_vocab;
  int32_t dim; /* residual width */
  int32_t n_layers;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t ctx_len; /* trained context length */
  int32_t bos, eos;
  int32_t has_tokenizer;
  int32_t n_kv_channels; /* KV channels per layer (2: k, v for GQA; c_kv, k_pe for MLA) */
  int32_t input_dim;     /* width of an embedding row: dim, or dim x (1 + deepstack layers) for
                            qwen3vl / qwen3vlmoe (the row, then the slice added after each of the
                            first layers) */
} kamera_model_info;

/* Thread-safe. */
KAMERA_API kamera_status kamera_model_get_info(const kamera_model* model, kamera_model_info* out);

typedef struct kamera_kv_channel {
  const char* name; /* "k", "v", "c_kv", "k_pe" (valid while the model lives) */
  int32_t width;    /* floats per token per layer */
  int32_t rotated;  /* carries RoPE; stored pre-rotation (position-free) */
} kamera_kv_channel;

/* Channel `channel` (0 .. n_kv_channels - 1) of the model's KV layout. Thread-safe. */
KAMERA_API kamera_status kamera_model_kv_channel(const kamera_model* model, int32_t channel,
                                                 kamera_kv_channel* out);

/* Tokenizer flags. */
#define KAMERA_TOKENIZE_ADD_BOS 1u /* put BOS in front */
#define KAMERA_TOKENIZE_RAW                                        \
  2u /* no dummy space prefix: the text is taken as it is (a chunk \
        in the middle of a context carries its own spaces) */

/* Tokenizes `text_len` bytes of UTF-8. *n_tokens receives the count. tokens may be NULL (with
 * capacity 0) to ask for the count; a capacity below the count fails with
 * KAMERA_ERR_INVALID_ARGUMENT and still sets *n_tokens. Thread-safe. */
KAMERA_API kamera_status kamera_tokenize(const kamera_model* model, const char* text,
                                         size_t text_len, uint32_t flags, int32_t* tokens,
                                         int32_t capacity, int32_t* n_tokens);

/* The text of n_tokens ids, NUL-terminated in buf. *length receives the byte count without the
 * NUL; buf may be NULL (capacity 0) to ask for it; too small a buffer fails as for
 * kamera_tokenize. Thread-safe. */
KAMERA_API kamera_status kamera_detokenize(const kamera_model* model, const int32_t* tokens,
                                           int32_t n_tokens, char* buf, size_t capacity,
                                           size_t* length);

/* ---- contexts and the chunk store -------------------------------------------------------- */

typedef struct kamera_context kamera_context;

typedef struct kamera_context_params {
  int32_t n_threads;     /* engine threads (default 2) */
  int64_t kv_tokens;     /* KV pool capacity in tokens over all live sequences (0: four times
                            the model's context, at most 2^20) */
  int32_t page_tokens;   /* tokens per pool page (default 16) */
  uint64_t store_bytes;  /* bytes of canonicals and patches kept in memory (default 1 GiB) */
  const char* disk_dir;  /* a disk tier of the store in this directory, or NULL */
  const int32_t* anchor; /* the prefix every canonical is formed behind (NULL: BOS) */
  int32_t n_anchor;
  int32_t kv_type;  /* KV pool storage, a kamera_dtype: KAMERA_DTYPE_F32 (default), _F16, _BF16 */
  int32_t swa_full; /* sliding-window layers (gemma3, gpt-oss): 0 (default) keeps their rows only
                       while a query can read them (a cached prompt keeps its last window and is
                       resumed at its end; no segment reuse), 1 every token's row and every reuse
                       path, more KV memory (kamera --swa-full); other models ignore it */
} kamera_context_params;

/* The defaults above. Thread-safe. */
KAMERA_API kamera_context_params kamera_context_default_params(void);

/* A context on `model` (params NULL: defaults). Thread-safe with respect to the model. */
KAMERA_API kamera_status kamera_context_new(kamera_model* model,
                                            const kamera_context_params* params,
                                            kamera_context** out);
KAMERA_API void kamera_context_free(kamera_context* ctx);

typedef struct kamera_store_stats {
  int64_t canonical_hits, canonical_misses; /* memory tier lookups */
  int64_t patch_hits, patch_misses;
  int64_t tier_canonical_hits, tier_patch_hits; /* found in a slower tier (disk) */
  int64_t canonical_evictions, patch_evictions; /* LRU evictions from memory */
  int64_t canonical_entries, patch_entries;
  uint64_t canonical_bytes, patch_bytes; /* held in memory */
  uint64_t byte_budget, patch_byte_budget;
  uint64_t bytes_saved; /* KV bytes served from the store instead of recomputed */
  int32_t n_tiers;
} kamera_store_stats;

KAMERA_API kamera_status kamera_store_get_stats(kamera_context* ctx, kamera_store_stats* out);

typedef struct kamera_tier_stats {
  char name[16]; /* "disk" */
  int64_t hits, misses, writes, errors, discarded;
  int64_t bytes; /* held by the tier */
} kamera_tier_stats;

/* Tier `index` (0 .. n_tiers - 1), asked in order on a memory miss. */
KAMERA_API kamera_status kamera_store_get_tier_stats(kamera_context* ctx, int32_t index,
                                                     kamera_tier_stats* out);
/* Memory budget of the store (LRU entries are evicted past it), and a cap on its patch bytes. */
KAMERA_API kamera_status kamera_store_set_budget(kamera_context* ctx, uint64_t bytes);
KAMERA_API kamera_status kamera_store_set_patch_budget(kamera_context* ctx, uint64_t bytes);
/* Adds a disk tier (crash-safe files with the model's fingerprint and a checksum) under dir. */
KAMERA_API kamera_status kamera_store_add_disk_tier(kamera_context* ctx, const char* dir);
/* Empties the memory tier (slower tiers keep their entries; served sequences are unaffected). */
KAMERA_API kamera_status kamera_store_clear(kamera_context* ctx);

typedef struct kamera_pool_stats {
  int32_t pages_total, pages_used, sequences;
  int64_t tokens;     /* over all sequences */
  int64_t cow_copies; /* pages copied because a fork shared them */
} kamera_pool_stats;

KAMERA_API kamera_status kamera_context_pool_stats(kamera_context* ctx, kamera_pool_stats* out);

/* ---- chunks ------------------------------------------------------------------------------ */

typedef struct kamera_chunk kamera_chunk;

typedef struct kamera_pos {
  int32_t t, h, w;
} kamera_pos;

/* A chunk of token ids (relative positions 0 .. n-1). Its id is a hash of the model and the
 * content, never of where it will sit. Thread-safe with respect to the model. */
KAMERA_API kamera_status kamera_chunk_from_tokens(const kamera_model* model, const int32_t* tokens,
                                                  int32_t n_tokens, kamera_chunk** out);

/* A chunk of n_rows embedding rows of `dim` floats (dim must be the model's input_dim), with one
 * relative position per row (layout NULL: t = h = w = row index). E.g. a frame on a g x g grid: (0,
 * row, col). Thread-safe with respect to the model. */
KAMERA_API kamera_status kamera_chunk_from_embeddings(const kamera_model* model, const float* rows,
                                                      int32_t n_rows, int32_t dim,
                                                      const kamera_pos* layout, kamera_chunk** out);
KAMERA_API void kamera_chunk_free(kamera_chunk* chunk);

KAMERA_API int32_t kamera_chunk_n_tokens(const kamera_chunk* chunk); /* 0 for NULL */
/* Positions the chunk occupies (max relative position + 1): the next chunk starts this far on. */
KAMERA_API int32_t kamera_chunk_extent(const kamera_chunk* chunk);
/* The content id as 32 lowercase hex digits. */
KAMERA_API kamera_status kamera_chunk_id(const kamera_chunk* chunk, char out[KAMERA_ID_HEX_SIZE]);

/* Makes the chunk's canonical KV (KV(chunk | anchor), position-free) available in the context's
 * store: found in memory or a slower tier, or formed with one forward. *formed (may be NULL)
 * tells whether this call ran the forward. The chunk then holds the entry (see kamera_chunk_kv). */
KAMERA_API kamera_status kamera_context_cache_chunk(kamera_context* ctx, kamera_chunk* chunk,
                                                    int32_t* formed);

/* A read-only view of the chunk's canonical KV for (layer, channel): rows = the chunk's tokens,
 * cols = the channel's width, row-major f32; rope channels are pre-rotation. Valid while the
 * chunk lives (caching it again, e.g. in another context, does not invalidate a view).
 * KAMERA_ERR_NOT_FOUND before kamera_context_cache_chunk. */
KAMERA_API kamera_status kamera_chunk_kv(const kamera_chunk* chunk, int32_t layer, int32_t channel,
                                         const float** data, int32_t* rows, int32_t* cols);

/* ---- sequences: assembly, evaluation, logits ------------------------------------------- */

typedef struct kamera_seq kamera_seq;
typedef struct kamera_logits kamera_logits;

typedef enum kamera_policy {
  KAMERA_POLICY_BLIND = 0,               /* canonical rows relocated; zero forwards */
  KAMERA_POLICY_PATCH = 1,               /* canonical + the low-rank patch of its antecedents */
  KAMERA_POLICY_REPREFILL = 2,           /* every chunk through the forward (the exact reference) */
  KAMERA_POLICY_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_policy;

typedef enum kamera_dtype {
  KAMERA_DTYPE_F32 = 0,
  KAMERA_DTYPE_BF16 = 1,
  KAMERA_DTYPE_F16 = 2,                 /* KV pool storage only (kamera_context_params.kv_type) */
  KAMERA_DTYPE_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_dtype;

typedef struct kamera_serve_options {
  kamera_policy policy;     /* default KAMERA_POLICY_PATCH */
  int32_t rank;             /* patch rank, or KAMERA_FULL_RANK (default 32) */
  const char* layers;       /* layers patched: "all", "deep-half" or a list "0,2,4" (NULL: all) */
  int32_t form_on_miss;     /* form a missing patch (one forward), else serve blind (default 1) */
  int32_t per_head;         /* factor each KV head's slice separately (default 0) */
  int32_t cap_rank;         /* clamp the rank to each block's min(tokens, width) (default 1) */
  kamera_dtype patch_dtype; /* storage of the factors (default f32) */
} kamera_serve_options;

KAMERA_API kamera_serve_options kamera_serve_default_options(void);

/* A new sequence [anchor][chunk 0][chunk 1]...: chunk i starts where chunk i-1's extent ends,
 * and chunks 0..i-1 are its antecedents. Chunk 0 is served exactly from its canonical (a prefix
 * hit); the others by the policy. Canonicals and patches that are missing are formed (and kept
 * in the store). options NULL: defaults. */
KAMERA_API kamera_status kamera_seq_assemble(kamera_context* ctx, const kamera_chunk* const* chunks,
                                             int32_t n_chunks, const kamera_serve_options* options,
                                             kamera_seq** out);
/* An empty sequence (no anchor): evaluate a whole prompt on it, BOS included. */
KAMERA_API kamera_status kamera_seq_new(kamera_context* ctx, kamera_seq** out);
/* A copy-on-write fork: it shares every KV page until one of the two writes. */
KAMERA_API kamera_status kamera_seq_fork(const kamera_seq* seq, kamera_seq** out);
KAMERA_API void kamera_seq_free(kamera_seq* seq);

KAMERA_API int32_t kamera_seq_n_tokens(const kamera_seq* seq);      /* 0 for NULL */
KAMERA_API int32_t kamera_seq_next_position(const kamera_seq* seq); /* where input goes next */

typedef struct kamera_serve_report {
  int32_t n_segments;      /* one per chunk */
  int32_t forwards;        /* forward passes run by the assembly */
  int64_t tokens_computed; /* tokens that went through a forward */
  int64_t tokens_reused;   /* chunk tokens written from the store */
} kamera_serve_report;

typedef enum kamera_segment_source {
  KAMERA_SOURCE_CANONICAL = 0,    /* exact: no antecedent */
  KAMERA_SOURCE_PATCH_HIT = 1,    /* canonical + a stored patch */
  KAMERA_SOURCE_PATCH_FORMED = 2, /* canonical + a patch formed by this assembly */
  KAMERA_SOURCE_BLIND = 3,        /* canonical only */
  KAMERA_SOURCE_REPREFILLED = 4,  /* computed by the forward */
  /* the runs of a prompt served by kamera_prompt_eval (the sources of the server's
   * usage.kamera.segments): */
  KAMERA_SOURCE_PREFIX = 5,               /* the exact token prefix an earlier prompt computed */
  KAMERA_SOURCE_CONTEXT_EXACT = 6,        /* a segment's rows from a context with its antecedents */
  KAMERA_SOURCE_CONTEXT_NEAREST = 7,      /* ... from the context nearest to this one */
  KAMERA_SOURCE_PATCH_EXACT = 8,          /* its canonical plus that context's patch */
  KAMERA_SOURCE_PATCH_NEAREST = 9,        /* ... plus the nearest context's patch */
  KAMERA_SOURCE_KEEP = 10,                /* its latest rows, relocated as they are */
  KAMERA_SOURCE_STORE_PATCH = 11,         /* canonical and patch from a shared store tier */
  KAMERA_SOURCE_STORE_PATCH_NEAREST = 12, /* ... the nearest stored context's patch */
  KAMERA_SOURCE_RECOMPUTED = 13,          /* prefilled by this call */
  KAMERA_SOURCE_PREFIX_APPROXIMATE = 14,  /* an earlier turn's rows, computed behind a segment
                                             served from another context (not what a cold run
                                             computes) */
  KAMERA_SEGMENT_SOURCE_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_segment_source;

typedef struct kamera_segment {
  char id[KAMERA_ID_HEX_SIZE]; /* "" for a run of prompt tokens with no id (prefix, recomputed) */
  int32_t first_token;         /* index in the sequence */
  int32_t n_tokens;
  int32_t position; /* position of the chunk's start */
  kamera_segment_source source;
} kamera_segment;

/* What the assembly did (all zero for kamera_seq_new and forks). For kamera_prompt_eval: one
 * segment per run of the prompt (the anchor in none, the last token's run last), tokens_reused:
 * the prompt tokens served without a forward, tokens_computed: those prefilled. */
KAMERA_API kamera_status kamera_seq_get_report(const kamera_seq* seq, kamera_serve_report* out);
KAMERA_API kamera_status kamera_seq_get_segment(const kamera_seq* seq, int32_t index,
                                                kamera_segment* out);

typedef enum kamera_logits_mode {
  KAMERA_LOGITS_NONE = 0,
  KAMERA_LOGITS_LAST = 1,                     /* the last input row */
  KAMERA_LOGITS_ALL = 2,                      /* every input row */
  KAMERA_LOGITS_MODE_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_logits_mode;

/* Appends n_tokens ids at the next positions (t = h = w) and runs the forward. With mode NONE
 * *out is set to NULL (out may be NULL); otherwise *out receives the logits. On failure (e.g. a
 * full pool: KAMERA_ERR_OUT_OF_MEMORY) the sequence is unchanged. */
KAMERA_API kamera_status kamera_seq_eval_tokens(kamera_seq* seq, const int32_t* tokens,
                                                int32_t n_tokens, kamera_logits_mode mode,
                                                kamera_logits** out);
/* Same for a chunk's content (tokens or embedding rows) placed with its layout at the next
 * position; the sequence advances by the chunk's extent. */
KAMERA_API kamera_status kamera_seq_eval_chunk(kamera_seq* seq, const kamera_chunk* chunk,
                                               kamera_logits_mode mode, kamera_logits** out);

/* Row-major rows x n_vocab floats, valid until kamera_logits_free. NULL / 0 for NULL. */
KAMERA_API const float* kamera_logits_data(const kamera_logits* logits);
KAMERA_API int32_t kamera_logits_rows(const kamera_logits* logits);
KAMERA_API int32_t kamera_logits_n_vocab(const kamera_logits* logits);
KAMERA_API void kamera_logits_free(kamera_logits* logits);

/* ---- prompts served from what the context has seen ---------------------------------------- */

/* The policies of kamera_prompt_eval (as `kamera serve`'s request field "reuse"). */
typedef enum kamera_reuse_policy {
  KAMERA_REUSE_PATCH = 0,     /* the exact prefix, then every segment (a message, a paragraph) seen
                                 in an earlier context, from its KV there (the nearest context's) */
  KAMERA_REUSE_KEEP = 1,      /* the prefix, then each segment's latest KV relocated as it is */
  KAMERA_REUSE_PREFIX = 2,    /* the exact prefix only: the logits are a full prefill's */
  KAMERA_REUSE_BLIND = 3,     /* the prefix; segments recomputed */
  KAMERA_REUSE_REPREFILL = 4, /* nothing reused */
  KAMERA_REUSE_POLICY_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_reuse_policy;

/* Evaluates a prompt of token ids on a new sequence, served from the context's caches as the
 * server serves a request (one assembler: the exact prefix an earlier prompt computed, then the
 * segments seen before, the rest prefilled). A leading run equal to the context's anchor (BOS by
 * default) is the anchor; otherwise the anchor is put in front. The prompt is cut into segments at
 * the tokenizer's line and turn ends. *out receives the sequence (its report names each run's
 * source: kamera_seq_get_report, kamera_seq_get_segment); *logits (NULL: not wanted) the last
 * token's logits. The prompt and the segments it computed are kept for later prompts;
 * kamera_seq_remember keeps what was evaluated after it too. */
KAMERA_API kamera_status kamera_prompt_eval(kamera_context* ctx, const int32_t* tokens,
                                            int32_t n_tokens, kamera_reuse_policy policy,
                                            kamera_seq** out, kamera_logits** logits);

/* kamera_prompt_eval with a repair budget (KAMERA_REUSE_PATCH only; 0 is kamera_prompt_eval):
 * the share, in [0, 1], of the prompt tokens that would be served from another context (a
 * segment's KV from the nearest context it was seen in) that are recomputed in context instead,
 * the segments whose context differs most first, each whole while its tokens fit (1: every such
 * segment, the logits of a full prefill up to the batch shapes). Such spans report
 * KAMERA_SOURCE_RECOMPUTED. A budget outside [0, 1], or above 0 with another policy:
 * KAMERA_ERR_INVALID_ARGUMENT. */
KAMERA_API kamera_status kamera_prompt_eval_budget(kamera_context* ctx, const int32_t* tokens,
                                                   int32_t n_tokens, kamera_reuse_policy policy,
                                                   double reuse_budget, kamera_seq** out,
                                                   kamera_logits** logits);

/* Keeps what a kamera_prompt_eval sequence holds (its prompt and the tokens evaluated on it since,
 * e.g. a reply) in the context's prefix cache: a later prompt that repeats them reuses their KV.
 * The cache shares the sequence's pages (copy-on-write); the sequence stays usable. */
KAMERA_API kamera_status kamera_seq_remember(kamera_seq* seq);

typedef struct kamera_chat_message {
  const char* role; /* "system", "user", "assistant", "tool" */
  const char* content;
} kamera_chat_message;

/* Chat messages rendered with a chat template and tokenized (control tokens where the rendered
 * text holds them; a BOS when the vocabulary wants one). chat_template: a built-in name
 * ("chatml", "llama3", ...), a Jinja source, or NULL for the model's own (chatml when it has
 * none). add_generation_prompt: end with the assistant's header. Counts and buffers as
 * kamera_tokenize. */
KAMERA_API kamera_status kamera_chat_tokenize(const kamera_model* model, const char* chat_template,
                                              const kamera_chat_message* messages,
                                              int32_t n_messages, int32_t add_generation_prompt,
                                              int32_t* tokens, int32_t capacity, int32_t* n_tokens);

/* One token for each of n_seqs sequences (distinct) at its next position, in one batched forward
 * (as llama_decode with a llama_batch of one token per sequence). *out receives n_seqs rows of
 * logits, row i for seqs[i]. On failure no sequence has changed. */
KAMERA_API kamera_status kamera_decode_batch(kamera_seq* const* seqs, const int32_t* tokens,
                                             int32_t n_seqs, kamera_logits** out);

/* ---- sampling ---------------------------------------------------------------------------- */

typedef struct kamera_sampler kamera_sampler;

typedef struct kamera_sampler_params {
  float temperature; /* <= 0: greedy (argmax, first on ties); default 0 */
  int32_t top_k;     /* 0: off */
  float top_p;       /* 1: off */
  uint64_t seed;
} kamera_sampler_params;

KAMERA_API kamera_sampler_params kamera_sampler_default_params(void);
KAMERA_API kamera_status kamera_sampler_new(const kamera_sampler_params* params,
                                            kamera_sampler** out);
KAMERA_API void kamera_sampler_free(kamera_sampler* sampler);
/* Draws a token from one row of n_vocab logits. */
KAMERA_API kamera_status kamera_sampler_sample(kamera_sampler* sampler, const float* logits,
                                               int32_t n_vocab, int32_t* token);

/* ---- the agent window -------------------------------------------------------------------- */

typedef struct kamera_window kamera_window;

typedef struct kamera_window_policy {
  int32_t rank;               /* patch rank or KAMERA_FULL_RANK (default 32) */
  int32_t deep_half;          /* patches on the deepest half of the layers only (default 0) */
  int32_t form_on_miss;       /* a missing patch is formed, else blind on a miss (default 1) */
  uint64_t patch_byte_budget; /* cap on the store's patch bytes (default UINT64_MAX) */
  kamera_dtype patch_dtype;   /* default f32 */
  int32_t orbit_orderings;    /* orderings averaged into an orbit patch (default 24) */
} kamera_window_policy;

typedef enum kamera_recall_mode {
  KAMERA_RECALL_FRESH = 0,                    /* a patch formed on its new antecedents */
  KAMERA_RECALL_STALE = 1,                    /* the patch it carried when evicted */
  KAMERA_RECALL_BLIND = 2,                    /* canonical only */
  KAMERA_RECALL_MODE_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_recall_mode;

typedef enum kamera_reorder_mode {
  KAMERA_REORDER_TRANSFER = 0, /* every chunk keeps its rows */
  KAMERA_REORDER_EXACT = 1,    /* each ordering's own patches */
  KAMERA_REORDER_ORBIT = 2,    /* one orbit patch per chunk, valid for any order of its set */
  KAMERA_REORDER_BLIND = 3,    /* canonicals */
  KAMERA_REORDER_MODE_FORCE_INT32 = 0x7fffffff /* not a value: keeps the enum int-sized */
} kamera_reorder_mode;

KAMERA_API kamera_window_policy kamera_window_default_policy(void);

/* An empty window (the anchor only) on a new sequence of the context's pool (policy NULL:
 * defaults). Note: the policy's patch_byte_budget is applied to the context's store. */
KAMERA_API kamera_status kamera_window_new(kamera_context* ctx, const kamera_window_policy* policy,
                                           kamera_window** out);
KAMERA_API void kamera_window_free(kamera_window* window);
KAMERA_API kamera_status kamera_window_set_policy(kamera_window* window,
                                                  const kamera_window_policy* policy);

/* Admission at the back: the chunk is conditioned on the whole window (its patch, formed on a
 * miss per the policy). At the front: exact (no antecedent); every other slot becomes stale. */
KAMERA_API kamera_status kamera_window_admit_back(kamera_window* window, const kamera_chunk* chunk);
KAMERA_API kamera_status kamera_window_admit_front(kamera_window* window,
                                                   const kamera_chunk* chunk);
/* Evicts slot `slot`; the survivors after it move back by its extent (a position-metadata write:
 * their KV bytes are not touched). The chunk stays in the store for a recall. */
KAMERA_API kamera_status kamera_window_evict(kamera_window* window, int32_t slot);
/* Re-admits a chunk whose canonical is in the store (by id, 32 hex digits) before slot `at`
 * (at == number of slots: at the back). */
KAMERA_API kamera_status kamera_window_recall(kamera_window* window, const char* chunk_id,
                                              int32_t at, kamera_recall_mode mode);
/* New slot i = old slot order[i] (a permutation of 0 .. n - 1, n = number of slots). */
KAMERA_API kamera_status kamera_window_reorder(kamera_window* window, const int32_t* order,
                                               int32_t n, kamera_reorder_mode mode);
/* Clean view: the slot's rows become its canonical. Recondition: canonical + its patch again. */
KAMERA_API kamera_status kamera_window_clean_view(kamera_window* window, int32_t slot);
KAMERA_API kamera_status kamera_window_recondition(kamera_window* window, int32_t slot);
/* Slots conditioned on antecedents other than the ones now before them; *n receives the count
 * (slots may be NULL with capacity 0 to ask for it). refresh re-forms one slot's patch. */
KAMERA_API kamera_status kamera_window_stale_slots(const kamera_window* window, int32_t* slots,
                                                   int32_t capacity, int32_t* n);
KAMERA_API kamera_status kamera_window_refresh(kamera_window* window, int32_t slot);
/* A copy-on-write fork of the window (it shares every page until it writes). */
KAMERA_API kamera_status kamera_window_fork(const kamera_window* window, kamera_window** out);
/* Logits (mode LAST or ALL) of a query chunk placed after the window, evaluated on a scratch
 * fork (the window is unchanged). */
KAMERA_API kamera_status kamera_window_query(kamera_window* window, const kamera_chunk* query,
                                             kamera_logits_mode mode, kamera_logits** out);

KAMERA_API int32_t kamera_window_n_slots(const kamera_window* window);       /* 0 for NULL */
KAMERA_API int32_t kamera_window_next_position(const kamera_window* window); /* after the last */

typedef struct kamera_window_slot {
  char id[KAMERA_ID_HEX_SIZE];
  int32_t first_token; /* index in the window's sequence */
  int32_t n_tokens;
  int32_t extent;
  int32_t position;    /* position of the chunk's start */
  int32_t patched;     /* a patch is applied to its canonical rows */
  int32_t conditioned; /* its rows carry conditioning on the slots before it */
  int32_t orbit;       /* the patch is an orbit patch */
  int32_t clean;       /* clean view */
} kamera_window_slot;

KAMERA_API kamera_status kamera_window_get_slot(const kamera_window* window, int32_t slot,
                                                kamera_window_slot* out);
/* Recomputes the pool's and the window's invariants (tests): KAMERA_ERR_INTERNAL when broken. */
KAMERA_API kamera_status kamera_window_check(const kamera_window* window);

/* ---- vision ------------------------------------------------------------------------------ */

typedef struct kamera_vision kamera_vision;

typedef struct kamera_vision_info {
  int32_t image_size; /* square RGB frames of image_size x image_size x 3 bytes (0: any size) */
  int32_t token_grid; /* output tokens per side (0: per image) */
  int32_t n_tokens;   /* token_grid^2 rows per frame (0: per image) */
  int32_t out_dim;    /* width of the rows (the decoder's input width: dim, x (1 + deepstack) for
                         qwen3vl) */
} kamera_vision_info;

/* Loads a vision encoder (an mmproj-style GGUF, general.architecture "clip"): llama.cpp's
 * mmproj of a Qwen2-VL, Qwen2.5-VL or Qwen3-VL model (clip.projector_type "qwen2vl_merger",
 * "qwen2.5vl_merger" or "qwen3vl_merger"; images of any size through kamera_chunk_from_image),
 * llama.cpp's mmproj of Kimi-VL (clip.projector_type "kimivl": MoonViT, for a deepseek2 decoder;
 * images through kamera_chunk_from_image), llama.cpp's mmproj of SmolVLM / SmolVLM2 ("idefics3",
 * beside a llama decoder), Gemma 3 ("gemma3", beside a gemma3 decoder), InternVL ("internvl",
 * beside a qwen2 / qwen3 decoder) or LLaVA-1.5 ("mlp", beside a llama decoder) (these four are
 * loaded, and paired with the decoder, on a context's first picture: kamera_chunk_from_image
 * reports a decoder that is not their pair), an mmproj holding an audio tower (Qwen2.5-Omni's
 * "qwen2.5o", Qwen2-Audio's "qwen2a": loaded and paired on a context's first clip, clips through
 * kamera_chunk_from_audio), or the mini-VL's fixed-size encoder (kamera_vision_encode). */
KAMERA_API kamera_status kamera_vision_load(const char* path, kamera_vision** out);
KAMERA_API void kamera_vision_free(kamera_vision* vision);
KAMERA_API kamera_status kamera_vision_get_info(const kamera_vision* vision,
                                                kamera_vision_info* out);
/* Encodes one frame (n_bytes = image_size^2 x 3, row-major RGB) into an embedding chunk for
 * `decoder` with layout (0, row, col) over the token grid. Not thread-safe per vision handle. */
KAMERA_API kamera_status kamera_vision_encode(kamera_vision* vision, const kamera_model* decoder,
                                              const uint8_t* rgb, size_t n_bytes,
                                              kamera_chunk** out);

/* Images through a Qwen2-VL / Qwen2.5-VL tower, for the context's decoder (a qwen2vl model whose
 * width is the tower's output width), or a Qwen3-VL tower for a qwen3vl / qwen3vlmoe decoder
 * (rows of the decoder's width and its deepstack slices). The image (PNG or JPEG) is decoded,
 * resized and normalised as Hugging Face's Qwen2-VL processor does and encoded into one row per
 * merged 2 x 2 patch block, with the relative layout (0, row, col) over its grid: extent max(rows,
 * cols). Write the vision delimiters around it yourself, as the chat template does: a token chunk
 * ending in
 * <|vision_start|>, the image chunk, a token chunk starting with <|vision_end|>. The result is a
 * chunk like any other (sequences, windows, the store; relocation shifts t, h and w alike).
 * A Kimi-VL tower takes a deepseek2 decoder of its output width: the image is preprocessed as
 * Hugging Face's KimiVLImageProcessor does (native size, padded to multiples of 28; downscaled
 * over 4096 patches) into one row per merged 2 x 2 patch block on linear positions 0..n-1 (the
 * decoder's rope is 1-D). Its chat template writes <|media_start|>image<|media_content|> before
 * the image and <|media_end|> after it: write those tokens around the chunk yourself.
 * The SmolVLM, Gemma 3, InternVL and LLaVA towers give one chunk per picture on linear positions
 * 0..n-1, cut and laid out as the family's processor and llama.cpp's mtmd do (docs/VISION.md):
 * SmolVLM's chunk holds its tiles' rows with their row / column / global-image tokens' rows (no
 * delimiters to write); write <start_of_image> / <end_of_image> (Gemma 3) or <img> / </img>
 * (InternVL) around the chunk yourself; LLaVA's rows stand alone. One picture per chunk: several
 * frames fail (KAMERA_ERR_INVALID_ARGUMENT, naming the family).
 * An image is encoded once per vision handle and decoder: its key is a hash of the decoded
 * pixels, the preprocessing parameters and both models' fingerprints, and a second call with the
 * same picture returns the cached rows. The rows are also kept in the context's store under that
 * key and written through to its tiers (a disk tier: <dir>/image/), so a restarted process or
 * another context on the same directory reads them back instead of running the tower; a
 * corrupt or forged entry is a miss. Bad input (not an image, truncated, over the size limits)
 * fails with a message naming it. Not thread-safe per vision handle or context. */
KAMERA_API kamera_status kamera_chunk_from_image(kamera_context* ctx, kamera_vision* vision,
                                                 const char* path, kamera_chunk** out);
/* The same from encoded bytes (a PNG or JPEG file's contents) in memory. */
KAMERA_API kamera_status kamera_chunk_from_image_bytes(kamera_context* ctx, kamera_vision* vision,
                                                       const uint8_t* bytes, size_t n_bytes,
                                                       kamera_chunk** out);
/* Video: frames (image files, already sampled) paired in time as the processor pairs them (an
 * odd count repeats the last frame), all resized to the first frame's size; layout (t, row, col).
 * A Qwen2-VL tower's t is the pair index k; a Qwen2.5-VL tower's is scaled by seconds,
 * t = trunc(k * 2 / fps * 2) (transformers' get_rope_index with second_per_grid_t = 2 / fps and
 * tokens_per_second = 2), at the processor's default of 2 frames per second here. A Qwen3-VL
 * tower takes one pair at most (KAMERA_ERR_UNSUPPORTED beyond: its video is pairs placed as
 * images with timestamp text between); a Kimi-VL tower one frame (KAMERA_ERR_UNSUPPORTED beyond:
 * its video path is not here). */
KAMERA_API kamera_status kamera_chunk_from_frames(kamera_context* ctx, kamera_vision* vision,
                                                  const char* const* paths, int32_t n_paths,
                                                  kamera_chunk** out);
/* The same at the frames' rate fps (frames per second; 0: the default, 2). Qwen2-VL towers ignore
 * it. fps must be 0 or in (0, 1000]. The embeddings are shared between rates (encoded once). */
KAMERA_API kamera_status kamera_chunk_from_frames_at(kamera_context* ctx, kamera_vision* vision,
                                                     const char* const* paths, int32_t n_paths,
                                                     double fps, kamera_chunk** out);

/* Audio clips through an audio tower: a vision handle loaded from an mmproj that holds one
 * (clip.has_audio_encoder: llama.cpp's Qwen2.5-Omni mmproj, "qwen2.5o", whose audio half kamera
 * loads; Qwen2-Audio's "qwen2a"), paired with the context's decoder on its first clip (a qwen2vl
 * thinker of the tower's width whose vocabulary has <|audio_bos|> and <|audio_eos|>; otherwise
 * KAMERA_ERR_INVALID_ARGUMENT naming the mismatch). kamera_vision_get_info's out_dim is the
 * tower's projection width. The clip (a WAV, FLAC or MP3 file, told apart by its first bytes) is
 * decoded, mixed to mono and resampled to 16 kHz as kamera serve decodes an input_audio part, cut
 * into Whisper's 30-s log-mel windows and encoded into 750 rows a window, on the relative
 * positions (i, i, i): extent = rows, so it relocates like text. Write the delimiters around it
 * yourself, as the chat template does: a token chunk ending in <|audio_bos|>, the clip chunk, a
 * token chunk starting with <|audio_eos|>. A clip is encoded once per vision handle and decoder
 * (its key: the 16 kHz samples and both models' fingerprints) and kept in the context's store and
 * its tiers as pictures are (kamera_vision_get_stats counts clips with pictures). Errors:
 * KAMERA_ERR_INVALID_ARGUMENT for a picture tower (a Qwen2.5-Omni file's handle takes pictures
 * too, through its vision half: kamera_chunk_from_image), KAMERA_ERR_UNSUPPORTED for bytes that are
 * not WAV, FLAC or MP3 (or a format libsndfile does not decode), KAMERA_ERR_CORRUPT_DATA for a
 * truncated or malformed file, KAMERA_ERR_NOT_FOUND for a missing path. Not thread-safe per vision
 * handle or context. */
KAMERA_API kamera_status kamera_chunk_from_audio(kamera_context* ctx, kamera_vision* vision,
                                                 const char* path, kamera_chunk** out);
/* The same from encoded bytes (a WAV, FLAC or MP3 file's contents) in memory. */
KAMERA_API kamera_status kamera_chunk_from_audio_bytes(kamera_context* ctx, kamera_vision* vision,
                                                       const uint8_t* bytes, size_t n_bytes,
                                                       kamera_chunk** out);

typedef struct kamera_vision_stats {
  int64_t encodes;    /* images (or frame sets) run through the tower */
  int64_t hits;       /* served from memory (the handle's cache or the context's store) */
  int64_t store_hits; /* embeddings read back from a slower tier of the context's store (disk):
                         written there by another process or context, not re-encoded */
  double encode_ms;   /* wall time in the tower, preprocessing included */
} kamera_vision_stats;

/* Counters of a vision handle's tower (pictures, and an audio tower's clips; all zero for the
 * mini-VL's encoder). */
KAMERA_API kamera_status kamera_vision_get_stats(const kamera_vision* vision,
                                                 kamera_vision_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* KAMERA_H */
