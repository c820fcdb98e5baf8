/* libmmt_rank: the model's ranking and decision policy as a C library, for processes that
 * bring their own torch (the Python package's use_model hook inside torch.compile, its
 * torch-free `recommend`). It links no LibTorch. Requests and answers are JSON text, the
 * same documents `matmul_toolkit recommend --json` and export-lut's policy work with, so
 * every caller decides through the same C++ code.
 *
 * Every function is safe to call from several threads at once on one model. No function
 * aborts, throws or prints: each returns a status and, on failure, writes one line
 * "<subject>: <what is wrong>" into `error` (always NUL-terminated, cut to error_size).
 *
 * Output buffers: a function that answers in `out` writes the JSON and its terminating NUL
 * when out_size is large enough and returns MMT_RANK_OK; otherwise it writes nothing into
 * `out`, returns MMT_RANK_BUFFER_TOO_SMALL, and in both cases sets *needed (when not NULL)
 * to the bytes the answer takes, NUL included, so the caller can retry with a larger buffer.
 * The retry (same thread, same model, same request) gets the answer the first call computed,
 * of exactly that size: recommend's ranking_ms would differ in a new one. On any other
 * failure *needed is 0.
 *
 * The library links the toolkit's C++ statically and needs only the C and C++ runtimes
 * (tests/rank checks that no libtorch, libc10, libcuda, libcublas or libnvrtc is among its
 * dependencies); it exports the mmt_rank_* functions and nothing else. */
#ifndef MATMUL_TOOLKIT_MMT_RANK_H
#define MATMUL_TOOLKIT_MMT_RANK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MMT_RANK_API_VERSION 1

enum mmt_rank_status {
    MMT_RANK_OK = 0,
    MMT_RANK_ERROR = 1,            /* anything else: a bug, out of memory */
    MMT_RANK_BAD_INPUT = 2,        /* a request, model file or argument that is wrong */
    MMT_RANK_BUFFER_TOO_SMALL = 3  /* `out` cannot hold the answer: see *needed */
};

typedef struct mmt_rank_model mmt_rank_model;

/* MMT_RANK_API_VERSION of the library loaded (a caller checks it against its own). */
int mmt_rank_api_version(void);

/* Opens a checkpoint (train's .pt), without LibTorch; path NULL or "": the default model,
 * looked up as the CLI looks it up without --model (model_or_default; also the models folder
 * two above this library: beside the binary, or share/matmul_toolkit/models when installed).
 * NULL on failure, with the reason in `error` ("<path>: no such file", "<path>: not a
 * matmul_toolkit checkpoint: ..."); every failure to open is bad input. */
mmt_rank_model* mmt_rank_open(const char* path, char* error, size_t error_size);

/* Frees a model (NULL is a no-op). No call on it may be running. */
void mmt_rank_close(mmt_rank_model* model);

/* The model as JSON: {"path", "hardware", "is_gpu" (the hardware table's), "default_dtype"
 * (what recommend ranks without --dtype), "sha256" (of the file's bytes), "toolkit_version"
 * (that trained it), "library_version" (this library's), "feature_names": [...],
 * "vendor_rows": bool, "ensemble": int, "model_type": "base" | "deep", "hidden_dims": [...]
 * (deep: [the residual width], and "num_layers")}. */
int mmt_rank_info(const mmt_rank_model* model, char* out, size_t out_size, size_t* needed,
                  char* error, size_t error_size);

/* What `matmul_toolkit recommend --json --no-prune` prints, for a request holding recommend's
 * options by their names without dashes, with the same defaults and the same checks and
 * error lines ("--m: required (or give --shapeset)"), resolved by the same C++ code:
 *   {"op": "mm", "m": 1024, "n": 4096, "k": 4096, "batch": 1, "dtype": "bfloat16",
 *    "layout": "nn"}  or  {"shapeset": "path.json"}  or  {"problems": [{"op": "mm_nt",
 *    "shape": <a shapeset shape object>}, ...]},
 *   plus "top_k": 5, "search_space": "DEFAULT" | "EXHAUSTIVE", "allow_tf32": false.
 * "problems" excludes the one-problem options and "shapeset"; an unknown key is bad input.
 * The same bytes the CLI prints, but for ranking_ms, which is measured here. The space is not
 * pruned by a backend ("pruned": false), as recommend --no-prune. */
int mmt_rank_recommend(mmt_rank_model* model, const char* request_json, char* out, size_t out_size,
                       size_t* needed, char* error, size_t error_size);

/* The decision policy's table for one problem, for a request
 *   {"op": "mm_nt", "shape": <shape object>, "policy": "graph" | "isolated" (optional: export-lut's
 *    default), "search_space": "DEFAULT" (optional), "allow_tf32": false (optional)}
 * answered as
 *   {"policy": "graph", "entries": [{"template_id": "aten::mm"} | {"template_id": "triton::mm",
 *    "BLOCK_M": ..., ... as export-lut writes a table entry}, ...],
 *    "predicted_ms": [per entry, the model's time], "kernel_ms": best kernel config's predicted
 *    time, "vendor_ms": ATen's predicted time (null for a model without vendor rows),
 *    "decision": "kernel" (one kernel config alone) | "aten" (ATen alone) | "pair" (a kernel
 *    config and other entries: Inductor times them)}
 * The entries are exactly what `export-lut --policy P --shapeset --no-prune` writes under the
 * problem's own key (the same C++ writes them); an ATen entry's predicted_ms is vendor_ms. */
int mmt_rank_decide(mmt_rank_model* model, const char* request_json, char* out, size_t out_size,
                    size_t* needed, char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* MATMUL_TOOLKIT_MMT_RANK_H */
