#pragma once
// A loader's position as loader::state() saves it and loader::resume() reads it: what must match
// for a resume (the dataset, and the options that set the order and the batches) and where the
// epoch stands (its epoch, the world it was split over, the next batch and the plan of positions
// this rank had).

#include <cstdint>
#include <string>
#include <vector>

#include "pinfeed/runtime/epoch_order.hpp"

namespace pinfeed::detail {

struct loader_state {
  static constexpr int kVersion = 2;  ///< the format state() writes and resume() reads

  std::string dataset;  ///< a digest of the source's identity and size
  std::uint64_t dataset_size = 0;
  std::uint64_t seed = 0;
  std::string order;  ///< epoch_order::kind()
  std::uint64_t batch_size = 0;
  bool drop_last = false;
  bool drop_remainder = false;
  std::uint32_t epoch = 0;
  std::uint64_t world = 1, rank = 0;
  std::uint64_t next_batch = 0;
  std::vector<position_range> plan;  ///< the positions this rank takes in `epoch`

  /// One JSON object (built in place: a failed allocation throws std::bad_alloc and leaks nothing).
  [[nodiscard]] std::string to_json() const;
  /// Parses a state. Throws pinfeed::invalid_argument naming what is wrong: not JSON, a field it
  /// lacks, another version, a field of the wrong kind (epoch over 32 bits, world outside 1 to
  /// 2^24, a plan that is not [begin, end] ranges).
  [[nodiscard]] static loader_state from_json(const std::string& text);
  /// Throws pinfeed::invalid_argument naming the first field in which `saved` belongs to another
  /// loader than this state's (the dataset, seed, order, batching or split over ranks), with both
  /// values and why it matters.
  void check_same_loader(const loader_state& saved) const;
};

/// A digest of a source's identity and its size, as loader_state::dataset holds it.
[[nodiscard]] std::string dataset_digest(const std::string& identity, std::uint64_t size);

}  // namespace pinfeed::detail
