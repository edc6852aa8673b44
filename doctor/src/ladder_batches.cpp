// The ladder's cached-batch modes: L4 and L5 replay whole batches made once from a pool of finished
// samples, from host memory (with a GPU: copied each step) or from device memory.
#include <cstring>

#include "ladder.hpp"
#include "pinfeed/runtime/error.hpp"

namespace pinfeed::doctor_run {

/// Modes L4 and L5 replay whole batches made once from a pool of finished samples.
void ladder::make_batches() {
  if (!batch_sizes_.empty()) return;
  loader_options cpu_lo = loader_options_;
  cpu_lo.device = "cpu";
  cpu_lo.stream.reset();
  cpu_lo.trace = false;
  cpu_lo.after_copy = nullptr;
  // The batches as the consumer gets them, made on the CPU: a pipeline whose steps, tail or batch
  // op run on the device makes them here with every step on the host (the same bits).
  std::shared_ptr<source> made = source_for({cache_stage::finished, 0, pool_});
  if (piped_ && (piped_->augment_path() == loaders::augment_place::device || piped_->finishes_on_device() ||
                 piped_->decode_path() != loaders::decode_place::host)) {
    auto options = piped_->options();
    options.decode = loaders::decode_place::host;
    options.augment_on = loaders::augment_place::host;
    made = make_pooled_source(std::make_shared<loaders::pipeline_source>(piped_->reader(), piped_->steps(), options), pool_);
  }
  loader l(made, cpu_lo);
  r_.workers = l.workers();
  store_.layout(l.fields(), o_.loader.batch_size);
  host_batches_ = host_buffer(store_.bytes * pool_batches(), gpu_);
  for (std::size_t i = 0; i < pool_batches(); ++i) {
    const batch b = next_cycling(l, "the cached host batches");
    for (std::size_t f = 0; f < b.field_count(); ++f) {
      const auto v = b.field(f);
      std::memcpy(host_batches_.data() + i * store_.bytes + store_.offsets[f], v.data, v.bytes());
    }
    batch_sizes_.push_back(b.size());
  }
}

/// L4 on the CPU path: the step on cached host batches.
void ladder::run_host_batches(doctor_mode& m) {
  make_batches();
  std::size_t j = 0;
  measure(m, [&] {
    const std::size_t i = j++ % batch_sizes_.size();
    (*consume_)(store_.view(host_batches_.data() + i * store_.bytes, batch_sizes_[i], {}, nullptr));
    return step_result{batch_sizes_[i], 0.0};
  }, {});
}

/// With a GPU: L4 copies each cached host batch and steps on it, L5 steps on batches already there.
void ladder::run_device_batches(doctor_mode& m, bool copy_each) {
  make_batches();
  const memory_location where{memory_location::kind::cuda, dev_.index};
  if (copy_each) {
    // Copy + step, two device buffers in turn, as the loader's copy engine does.
    const cuda_stream copy = cuda_stream::create();
    device_buffer device(store_.bytes * 2);
    const cuda_event copied[2] = {cuda_event::create(), cuda_event::create()};
    const cuda_event released[2] = {cuda_event::create(), cuda_event::create()};
    bool used[2] = {false, false};
    std::size_t j = 0;
    measure(m, [&] {
      const std::size_t i = j % batch_sizes_.size(), d = j % 2;
      ++j;
      std::byte* dst = device.data() + d * store_.bytes;
      if (used[d]) PINFEED_CUDA_TRY(cudaEventSynchronize(released[d].get()));  // at most two in flight
      const std::size_t bytes = store_.bytes;
      PINFEED_CUDA_TRY(cudaMemcpyAsync(dst, host_batches_.data() + i * store_.bytes, bytes, cudaMemcpyHostToDevice,
                                       copy.get()));
      if (o_.loader.after_copy) o_.loader.after_copy(bytes, copy.get());  // the same hook as the loader's copy
      PINFEED_CUDA_TRY(cudaEventRecord(copied[d].get(), copy.get()));
      PINFEED_CUDA_TRY(cudaStreamWaitEvent(consumer_stream_, copied[d].get(), 0));
      (*consume_)(store_.view(dst, batch_sizes_[i], where, consumer_stream_));
      PINFEED_CUDA_TRY(cudaEventRecord(released[d].get(), consumer_stream_));
      used[d] = true;
      return step_result{batch_sizes_[i], 0.0};
    }, {});
    wait_for_stream(copy.get(), drained_.get());
  } else {
    device_buffer device(store_.bytes * batch_sizes_.size());
    PINFEED_CUDA_TRY(cudaMemcpy(device.data(), host_batches_.data(), device.size(), cudaMemcpyHostToDevice));
    std::size_t j = 0;
    measure(m, [&] {
      const std::size_t i = j++ % batch_sizes_.size();
      (*consume_)(store_.view(device.data() + i * store_.bytes, batch_sizes_[i], where, consumer_stream_));
      return step_result{batch_sizes_[i], 0.0};
    }, {});
  }
}

}  // namespace pinfeed::doctor_run
