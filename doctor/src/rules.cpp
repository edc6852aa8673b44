// The doctor's suggestion rules (analysis.hpp): each reads the priced stages and the full
// pipeline's measurement and says what to change, quoting the numbers behind it.
#include <algorithm>
#include <cmath>

#include "analysis.hpp"
#include "pinfeed/loaders/remote.hpp"

namespace pinfeed::analysis {

bool evidence::named(std::string_view stage) const {
  return std::find(r.bottleneck.begin(), r.bottleneck.end(), stage) != r.bottleneck.end();
}

const doctor_stage& evidence::stage(std::string_view name) const {
  return *std::find_if(r.stages.begin(), r.stages.end(), [&](const auto& x) { return x.name == name; });
}

std::string evidence::cost(std::string_view name, const std::string& what, int digits) const {
  const doctor_stage& s = stage(name);
  return what + " costs " + num(s.ms_per_image, digits) + " ms per image, " + pct(s.share) + " of the time per image";
}

namespace {

using advice = std::optional<doctor_suggestion>;

/// A suggestion that names a setting the doctor can try, and the value it proposes.
doctor_suggestion trying(std::string what, std::string evidence, const char* setting, std::uint64_t value) {
  doctor_suggestion s{std::move(what), std::move(evidence)};
  s.setting = setting;
  s.value = value;
  return s;
}

/// The cores the analysis holds the workers to: the node plan's for this process (the hardware
/// threads in a report that has none).
std::size_t cores_of(const doctor_report& r) { return r.plan_cores ? r.plan_cores : r.hardware_threads; }

std::string cores_text(const doctor_report& r) {
  const std::size_t c = cores_of(r);
  return std::to_string(c) + (c == 1 ? " core" : " cores") +
         (r.plan_cores ? " the node plan gives this process" + (r.plan_cores_source.empty() ? std::string() : " (" + r.plan_cores_source + ")")
                       : std::string(" (hardware threads)"));
}

/// The tuning pass moved this setting and settled: it measured what more of it gives and kept its
/// choice, so a suggestion to raise it would contradict a measurement with none of its own.
bool settled_by_tuner(const doctor_report& r, bool tuned_setting) { return r.tuned && r.tuning.settled && tuned_setting; }

/// The CPU idles while the consumer waits: more workers.
advice more_workers(const evidence& e) {
  const doctor_report& r = e.r;
  if (r.bottleneck.empty() || e.l0.cpu_utilization >= 0.75 || settled_by_tuner(r, r.tuning.workers_auto))
    return std::nullopt;
  const std::size_t cores = cores_of(r);
  const std::string why = "the CPU is busy " + pct(e.l0.cpu_utilization) + " of the " + cores_text(r) +
                          " while the consumer waits " + pct(e.l0.consumer_wait) + " (L0)";
  if (r.workers < cores)
    return trying("raise workers from " + std::to_string(r.workers) + " to " + std::to_string(cores), why, "workers", cores);
  return trying("raise workers beyond the core count (try " + std::to_string(2 * r.workers) + "): they wait rather than compute",
                why, "workers", 2 * r.workers);
}

/// More workers than the plan's cores, all busy: they preempt one another (oversubscription).
advice fewer_workers(const evidence& e) {
  const doctor_report& r = e.r;
  const std::size_t cores = cores_of(r);
  if (r.workers <= cores || e.l0.cpu_utilization < 0.9) return std::nullopt;
  return trying("lower workers from " + std::to_string(r.workers) + " to " + std::to_string(cores),
                std::to_string(r.workers) + " workers share the " + cores_text(r) + ", busy " + pct(e.l0.cpu_utilization) +
                    " (L0): the threads oversubscribe the cores and preempt one another; more workers help only a "
                    "source that waits (remote or slow storage)",
                "workers", cores);
}

/// The pipeline keeps up on average but stalls in bursts: enough batches ahead to cover the
/// longest stall at the consumer's own pace per step, and one more, so that a stall a little
/// longer than the one measured is still covered.
advice more_prefetch(const evidence& e) {
  const doctor_mode& l0 = e.l0;
  if (l0.consumer_wait < 0.02 || l0.consumer_wait > 0.6 || l0.wait_top_share <= 0.5 || l0.steps < 10 ||
      settled_by_tuner(e.r, e.r.tuning.prefetch_auto))
    return std::nullopt;
  const double own_ms = std::max(1e-3, l0.seconds * (1.0 - l0.consumer_wait) / static_cast<double>(l0.steps) * 1e3);
  const auto more = static_cast<std::size_t>(std::ceil(l0.max_wait_ms / own_ms)) + 1;
  // At most kMostPrefetch: past it the stall is not a burst to cover but a pace to fix.
  constexpr std::size_t kMostPrefetch = 64;
  const std::size_t to = std::min(std::max(e.r.prefetch + std::max<std::size_t>(more, 1), 2 * e.r.prefetch),
                                  std::max(kMostPrefetch, e.r.prefetch + 1));
  return trying("raise prefetch from " + std::to_string(e.r.prefetch) + " to " + std::to_string(to),
                pct(l0.wait_top_share) + " of the consumer's wait falls in the slowest 10% of steps (the longest " +
                    num(l0.max_wait_ms, 1) + " ms, against " + num(own_ms, 1) +
                    " ms of the consumer's own work per step): the pipeline keeps up on average but stalls in bursts",
                "prefetch", to);
}

/// The copy is a bottleneck: fewer bytes across.
advice fewer_copy_bytes(const evidence& e) {
  if (!e.named("copy")) return std::nullopt;
  const doctor_report& r = e.r;
  const doctor_mode* l4 = r.mode("L4");
  const std::string rate =
      l4 != nullptr && l4->ran ? ", " + num(l4->steps_per_s * static_cast<double>(r.batch_bytes) / 1e9, 2) + " GB/s" : "";
  const std::string per_batch = num(r.batch_bytes / 1048576.0, 1) + " MiB per batch" + rate;
  const std::string share = "the copy costs " + pct(e.stage("copy").share) + " of the time per image";
  if (r.float_images)
    return doctor_suggestion{"keep uint8 until the GPU: run the colour/scale/normalize tail on the device",
                             share + " and the images cross as float32, 4x the bytes of uint8 (" + per_batch + ")"};
  return doctor_suggestion{"send fewer bytes: labels as ids (not one-hot), binary maps packed into bits",
                           share + " (" + per_batch + ")"};
}

/// The application's own source is the bottleneck.
advice cheaper_source(const evidence& e) {
  if (!e.named("produce")) return std::nullopt;
  return doctor_suggestion{"make the source's produce() cheaper" +
                               std::string(e.l0.cpu_utilization < 0.75 ? "" : ", or give it more cores"),
                           "producing a sample costs " + num(e.stage("produce").ms_per_image, 3) + " ms, " +
                               pct(e.stage("produce").share) + " of the time per image"};
}

/// Remote reads are the bottleneck: room in the shard cache, more in flight, or whole shards.
advice remote_reads(const evidence& e) {
  const doctor_report& r = e.r;
  if (!e.named("read") || !r.remote) return std::nullopt;
  const std::string cost = e.cost("read", "fetching from remote storage");
  const std::uint64_t in_flight = std::max<std::uint64_t>(1, r.fetch.requests_in_flight);
  if (r.fetch.window_shards > 0 && r.fetch.streamed > 0) {
    // Four times the room it had, and up to the default's 1 GiB where the shards need it (never
    // more than they hold, and a MiB at least), in whole MiB as --remote-cache-mb takes it.
    const std::uint64_t want = std::max<std::uint64_t>(
        {4 * r.fetch.cache_bytes, std::min<std::uint64_t>(r.fetch.shard_bytes, loaders::remote_options{}.cache_bytes), 1ull << 20});
    const std::uint64_t mib = (want + (1ull << 20) - 1) >> 20;
    return trying("give the shard cache room for three windows of shards: raise --remote-cache-mb to " + std::to_string(mib) +
                      " (remote_options::cache_bytes), or narrow --shard-window",
                  cost + "; " + std::to_string(r.fetch.streamed) +
                      " samples were range-read one by one because their shard had no room in the cache",
                  "remote_cache_bytes", mib << 20);
  }
  const std::uint64_t most = loaders::kMaxRequestsInFlight;
  if (in_flight >= most) return std::nullopt;  // nothing more to ask for
  if (r.fetch.window_shards > 0)
    return trying("fetch more shards at once: raise --requests-in-flight from " + std::to_string(in_flight) + " to " +
                      std::to_string(std::min(2 * in_flight, most)) + " (remote_options::requests_in_flight), or use larger shards",
                  cost + " with whole shards fetched ahead", "requests_in_flight", std::min(2 * in_flight, most));
  const std::uint64_t more = std::min<std::uint64_t>(std::max<std::uint64_t>(8, 4 * in_flight), most);
  return trying("keep more remote reads in flight: raise --requests-in-flight from " + std::to_string(in_flight) + " to " +
                    std::to_string(more) + " (remote_options::requests_in_flight; unset, it follows the latency up to " +
                    std::to_string(loaders::kMaxRequestsInFlight) +
                    ") and remote_options::read_ahead; or read whole shards, the remote default (no --shard-window 0; a "
                    "shard-aware shuffle): one request per shard, not per sample",
                cost + " with " + std::to_string(r.fetch.requests_in_flight) + " requests in flight and " +
                    std::to_string(r.fetch.read_ahead_depth) + " samples read ahead",
                "requests_in_flight", more);
}

/// One file per sample is the bottleneck: tar shards.
advice pack_files(const evidence& e) {
  if (!e.named("read") || !e.r.encoded || e.r.sharded) return std::nullopt;
  return doctor_suggestion{"group the files into tar shards (pinfeed pack) and read those", e.cost("read", "reading files")};
}

/// A source that generates whole images is the bottleneck.
advice cheaper_generation(const evidence& e) {
  if (!e.named("read") || e.r.encoded) return std::nullopt;
  return doctor_suggestion{"make the source cheaper (it produces whole images that the first transform cuts down)" +
                               std::string(settled_by_tuner(e.r, e.r.tuning.workers_auto) ? "" : " or give it more workers"),
                           e.cost("read", "producing the images")};
}

/// The host's cores starve the GPU and the device path would take the decode and the steps after
/// it off them (the doctor's probe advised it).
advice decode_on_device(const evidence& e) {
  if (e.r.decode_choice != "device" || e.r.decode_path != "host" || !(e.named("decode") || e.named("transforms")))
    return std::nullopt;
  return doctor_suggestion{"decode JPEGs on the GPU (--decode device)", e.r.decode_why + "; " +
                                                                       e.cost(e.named("decode") ? "decode" : "transforms",
                                                                              e.named("decode") ? "decoding" : "the transforms")};
}

/// Decoding is the bottleneck: decode less, or elsewhere.
advice decode_less(const evidence& e) {
  if (!e.named("decode")) return std::nullopt;
  return doctor_suggestion{e.r.planned_decode
                               ? "store the images nearer the training size, or decode on the GPU" +
                                     std::string(e.l0.cpu_utilization < 0.75 && !settled_by_tuner(e.r, e.r.tuning.workers_auto)
                                                     ? ", or add workers"
                                                     : "") +
                                     ": JPEGs already decode only the window the first transform uses"
                               : "decode less: start the pipeline with rrc(...), a crop or resize(...) so JPEGs decode "
                                 "only that window, at a DCT scale when it is large",
                           e.cost("decode", "decoding")};
}

/// The transforms are the bottleneck: the costliest one.
advice cheaper_transform(const evidence& e) {
  const doctor_report& r = e.r;
  if (!e.named("transforms") || r.transforms.empty()) return std::nullopt;
  const auto top = std::max_element(r.transforms.begin(), r.transforms.end(),
                                    [](const auto& a, const auto& b) { return a.share < b.share; });
  const bool pointwise = top->name.find("(fused)") != std::string::npos;
  return doctor_suggestion{pointwise && r.gpu ? "run " + top->name + " on the GPU (the device tail)"
                                              : "make " + top->name + " cheaper, or move it to the GPU",
                           top->name + " costs " + num(top->ms_per_image, 3) + " ms per image, " + pct(top->share) +
                               " of transform time"};
}

constexpr rule kRules[] = {
    {"more_workers", &more_workers},   {"fewer_workers", &fewer_workers}, {"more_prefetch", &more_prefetch}, {"fewer_copy_bytes", &fewer_copy_bytes},
    {"cheaper_source", &cheaper_source}, {"remote_reads", &remote_reads}, {"pack_files", &pack_files},
    {"cheaper_generation", &cheaper_generation}, {"decode_on_device", &decode_on_device}, {"decode_less", &decode_less}, {"cheaper_transform", &cheaper_transform},
};

}  // namespace

std::span<const rule> suggestion_rules() { return kRules; }

}  // namespace pinfeed::analysis
