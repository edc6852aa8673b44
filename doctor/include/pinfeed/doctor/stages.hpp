#pragma once
/// @file stages.hpp
/// What the doctor puts at a stage of a pipeline to measure what the stages before it cost (the
/// caching method, see README): caches that skip the stages before them, slow
/// storage and a slow host-to-device link emulated, and the stand-in training step. Each is a
/// wrapper around a production piece (an image_reader, a source, the loader's copy hook); the
/// pieces themselves know nothing of them. `pinfeed run --cache/--latency-ms/...` uses them too.

#include <cstddef>
#include <functional>
#include <memory>

#include "pinfeed/loaders/pipeline_source.hpp"
#include "pinfeed/runtime/cuda_api.hpp"
#include "pinfeed/runtime/source.hpp"

namespace pinfeed {

/// Slow storage, emulated: every read waits `latency_ms`, and reads share one link of
/// `bandwidth_mb_s` (a read of B bytes holds it B / bandwidth seconds, in turn). 0 turns each off.
struct storage_emulation {
  double latency_ms = 0.0;
  double bandwidth_mb_s = 0.0;
  [[nodiscard]] bool active() const noexcept { return latency_ms > 0.0 || bandwidth_mb_s > 0.0; }
};

/// `base` behind emulated slow storage: read() and read_stored() return after the delay the bytes
/// they read would take. Throws std::invalid_argument for a null base or a negative or non-finite
/// figure (naming it).
[[nodiscard]] std::shared_ptr<loaders::image_reader> make_slow_storage(std::shared_ptr<loaders::image_reader> base,
                                                                       storage_emulation storage);

/// Where a cache sits in the pipeline.
enum class cache_stage {
  none,
  raw,       ///< the stored bytes and labels: storage is skipped, decoding and transforms still run
             ///< (for a reader that does not store encoded images, the same as `decoded`)
  decoded,   ///< the decoded full image and its labels; every transform still runs
  steps,     ///< the image after the first `after_steps` host transforms; the rest still run
  finished,  ///< the finished sample: reads, decoding and every transform are skipped
};

/// A cache of a pool of distinct samples standing in for the dataset: sample i is served from
/// pool entry i mod pool, made once from sample (i mod pool) of the epoch that first needs it.
struct sample_cache {
  cache_stage stage = cache_stage::none;
  std::size_t after_steps = 0;  ///< for cache_stage::steps
  std::size_t pool = 64;
  /// The most bytes the pool's entries may hold together; 0: half of this process's memory in the node plan (pinfeed::this_node_plan()). A
  /// pool that needs more fails with a fatal_error (up front where the entries' size is known).
  std::size_t max_bytes = 0;
};

/// `base` with its reads cached at `stage` (raw or decoded), or after the host transforms
/// `before` (then the reader yields their output, and the pipeline over it runs only the rest).
/// A cached image is lent to the pipeline (read_result::data), never copied per sample. An entry
/// whose sample fails fails every sample it serves, with the original error and index in the
/// message. The entries hold at most `max_bytes` together (see sample_cache::max_bytes): past it,
/// fatal_error. Throws std::invalid_argument for a null base, a pool of 0, stage none or finished, or
/// `before` with a stage other than decoded.
[[nodiscard]] std::shared_ptr<loaders::image_reader> make_cached_reader(std::shared_ptr<loaders::image_reader> base,
                                                                        cache_stage stage, std::size_t pool,
                                                                        loaders::pipeline before = {},
                                                                        std::size_t max_bytes = 0);

/// What runs a pipeline with a cache: the source to hand the loader, and the pipeline_source
/// inside it whose failures() and replaced() count the run's bad samples.
struct cached_pipeline {
  std::shared_ptr<pinfeed::source> source;
  std::shared_ptr<loaders::pipeline_source> pipeline;
};

/// `full` with a cache at `cache`: `full` itself (none), a pool in front of it (finished), or the
/// cached reader of its reader under a pipeline_source of the steps left (raw, decoded, steps).
/// Throws std::invalid_argument for a null pipeline, a pool of 0, or `after_steps` beyond its host
/// transforms.
/// After a steps cache the steps left draw from the streams of their new positions (step 0, 1,
/// ... of the shorter pipeline): the same distributions as the full pipeline, not the same bits.
/// Under error_policy::skip every sample served by a pool entry that failed counts as bad.
[[nodiscard]] cached_pipeline make_cached_pipeline(const std::shared_ptr<loaders::pipeline_source>& full,
                                                   const sample_cache& cache);

/// `base` served from a pool of its finished samples (caching the whole pipeline, to measure what
/// producing costs): sample i is a copy of pool entry i mod pool, produced once as sample
/// (i mod pool). A pool larger than the dataset is capped at its size. An entry that fails to
/// produce fails every sample it serves, with the original error. Throws std::invalid_argument
/// for a null base or a pool of 0, and fatal_error for a pool over `max_bytes` (0: half of this
/// machine's memory; see sample_cache::max_bytes).
[[nodiscard]] std::shared_ptr<source> make_pooled_source(std::shared_ptr<source> base, std::size_t pool,
                                                         std::size_t max_bytes = 0);

/// A loader_options::after_copy hook that emulates a host-to-device link of `mb_s` MB/s: after each
/// batch's copy the copy stream stays busy for bytes / rate. Throws std::invalid_argument unless
/// mb_s > 0 and finite.
[[nodiscard]] std::function<void(std::size_t, cudaStream_t)> throttle_copy(double mb_s);

/// A stand-in training step: keeps the calling thread busy for `ms` milliseconds (CPU consumer).
void busy_wait_ms(double ms) noexcept;
/// The same on the GPU: queues a kernel that keeps one SM busy for `ms` milliseconds on `stream`.
/// Asynchronous; throws cuda_error if the launch fails (and, built without CUDA, always).
void busy_kernel_ms(double ms, cudaStream_t stream);

}  // namespace pinfeed
