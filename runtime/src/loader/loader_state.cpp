// loader::state() and loader::resume(): the position saved as detail::loader_state, and a resume
// on the same world size (each rank goes on with its own share) or on another one (what the saved
// ranks had not delivered is split over this world's ranks).
#include "loader_state.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "loader_impl.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/detail/json_release.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/log.hpp"

namespace pinfeed {
namespace detail {

std::string dataset_digest(const std::string& identity, std::uint64_t size) {
  const std::string id = identity + "#" + std::to_string(size);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash_bytes(id.data(), id.size())));
  return hex;
}

std::string loader_state::to_json() const {
  // Built member by member: an initializer list leaves temporary arrays whose destructor allocates
  // (detail/json_release.hpp).
  nlohmann::json j = nlohmann::json::object();
  const json_releaser release(j);
  j["version"] = kVersion;
  // What must match for a resume, then the position.
  j["dataset"] = dataset; j["dataset_size"] = dataset_size; j["seed"] = seed; j["order"] = order;
  j["batch_size"] = batch_size; j["drop_last"] = drop_last; j["drop_remainder"] = drop_remainder;
  j["epoch"] = epoch; j["world"] = world; j["rank"] = rank; j["next_batch"] = next_batch;
  auto& ranges = j["plan"] = nlohmann::json::array();
  for (const auto& r : plan) {
    // In place: a range built aside would be destroyed whole if the push failed.
    ranges.push_back(nlohmann::json::array());
    auto& range = ranges.back();
    range.push_back(r.begin);
    range.push_back(r.end);
  }
  return j.dump();
}

namespace {

/// The fields of a parsed state, each named in the error when it lacks or has another kind.
class state_reader {
 public:
  explicit state_reader(const nlohmann::json& j) : j_(j) {}
  const nlohmann::json& field(const char* name) const {
    if (!j_.is_object() || !j_.contains(name))
      throw pinfeed::invalid_argument(std::string("loader state lacks '") + name + "'");
    return j_.at(name);
  }
  std::uint64_t unsigned_number(const char* name) const {
    const auto& v = field(name);
    if (!v.is_number_unsigned())
      throw pinfeed::invalid_argument(std::string("loader state: ") + name + " " + v.dump() + " is not an unsigned number");
    return v.get<std::uint64_t>();
  }
  std::string text(const char* name) const {
    const auto& v = field(name);
    if (!v.is_string()) throw pinfeed::invalid_argument(std::string("loader state: ") + name + " " + v.dump() + " is not a string");
    return v.get<std::string>();
  }
  bool flag(const char* name) const {
    const auto& v = field(name);
    if (!v.is_boolean()) throw pinfeed::invalid_argument(std::string("loader state: ") + name + " " + v.dump() + " is not true or false");
    return v.get<bool>();
  }
  std::vector<position_range> ranges(const char* name) const {
    const auto& v = field(name);
    if (!v.is_array())
      throw pinfeed::invalid_argument("loader state: " + std::string(name) + " " + v.dump() + " is not a list of [begin, end] ranges");
    std::vector<position_range> out;
    for (const auto& r : v) {
      if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned())
        throw pinfeed::invalid_argument("loader state: " + std::string(name) + " range " + r.dump() + " is not [begin, end]");
      out.push_back({r[0].get<std::uint64_t>(), r[1].get<std::uint64_t>()});
    }
    return out;
  }

 private:
  const nlohmann::json& j_;
};

}  // namespace

loader_state loader_state::from_json(const std::string& text) {
  nlohmann::json j;
  const json_releaser release(j);
  try {
    parse_json_into(j, text);
  } catch (const nlohmann::json::exception& e) {
    throw pinfeed::invalid_argument(std::string("loader state is not JSON: ") + e.what());
  }
  const state_reader in(j);
  const auto& version = in.field("version");
  if (version != kVersion)
    throw pinfeed::invalid_argument("loader state version " + version.dump() + " is not supported: this pinfeed reads version " +
                                    std::to_string(kVersion) + " (start the epoch anew with start_epoch())");
  loader_state s;
  s.dataset_size = in.unsigned_number("dataset_size");
  s.dataset = in.text("dataset");
  s.seed = in.unsigned_number("seed");
  s.order = in.text("order");
  s.batch_size = in.unsigned_number("batch_size");
  s.drop_last = in.flag("drop_last");
  s.drop_remainder = in.flag("drop_remainder");
  const auto& epoch_j = in.field("epoch");
  if (!epoch_j.is_number_unsigned() || epoch_j.get<std::uint64_t>() > 0xFFFFFFFFull)
    throw pinfeed::invalid_argument("loader state: epoch " + epoch_j.dump() + " is not a 32-bit unsigned number");
  s.epoch = epoch_j.get<std::uint32_t>();
  const auto& world_j = in.field("world");
  if (!world_j.is_number_unsigned() || world_j.get<std::uint64_t>() < 1 || world_j.get<std::uint64_t>() > 1u << 24)
    throw pinfeed::invalid_argument("loader state: world " + world_j.dump() + " is not a world size (1 to 16777216)");
  s.world = world_j.get<std::uint64_t>();
  if (j.contains("rank")) s.rank = in.unsigned_number("rank");
  s.next_batch = in.unsigned_number("next_batch");
  s.plan = in.ranges("plan");
  return s;
}

void loader_state::check_same_loader(const loader_state& saved) const {
  auto expect = [](const char* name, const nlohmann::json& there, const nlohmann::json& here, const char* why) {
    if (there != here)
      throw pinfeed::invalid_argument(std::string("loader state does not match this loader: ") + name + " is " +
                                      there.dump() + " there, " + here.dump() + " here (" + why + ")");
  };
  expect("dataset_size", saved.dataset_size, dataset_size, "another dataset");
  expect("dataset", saved.dataset, dataset, "another dataset: its files or shards differ");
  expect("seed", saved.seed, seed, "another seed gives another order");
  expect("order", saved.order, order, "another kind of order");
  expect("batch_size", saved.batch_size, batch_size, "positions are counted in batches");
  expect("drop_last", saved.drop_last, drop_last, "positions are counted in batches");
  expect("drop_remainder", saved.drop_remainder, drop_remainder, "the split over ranks differs");
}

}  // namespace detail

detail::loader_state loader::impl::current_state() const {
  const auto& o = *order;
  const auto& opt = core->options;
  detail::loader_state s;
  s.dataset = detail::dataset_digest(src->identity(), dataset_size);
  s.dataset_size = dataset_size;
  s.seed = opt.seed;
  s.order = o.kind();
  s.batch_size = opt.batch_size;
  s.drop_last = opt.drop_last;
  s.drop_remainder = o.drops_remainder();
  s.epoch = epoch;
  s.world = static_cast<std::uint64_t>(o.world());
  s.rank = static_cast<std::uint64_t>(o.rank());
  s.next_batch = next_batch;
  return s;
}

epoch_order loader::impl::saved_order(const detail::loader_state& s, bool whole) const {
  const auto& o = *order;
  epoch_order_options saved_opt;
  saved_opt.shuffle = o.shuffled();
  saved_opt.rank = 0;
  saved_opt.world = static_cast<int>(s.world);
  saved_opt.drop_remainder = o.drops_remainder();
  saved_opt.groups = o.groups();
  try {
    epoch_order saved(dataset_size, core->options.seed, saved_opt);
    if (!whole) saved.restrict(s.epoch, s.plan);
    return saved;
  } catch (const std::invalid_argument& ex) {
    throw pinfeed::invalid_argument(std::string("loader state: ") + ex.what());
  }
}

loader::impl::resume_plan loader::impl::plan_resume(const detail::loader_state& s) const {
  const auto& o = *order;
  const auto& opt = core->options;
  const bool whole = s.plan.size() == 1 && s.plan[0] == position_range{0, dataset_size};
  const epoch_order saved = saved_order(s, whole);
  const std::uint32_t e = s.epoch;
  const std::uint64_t saved_batches = detail::batches_in(saved.size(e), opt), next = s.next_batch;
  if (next > saved_batches)
    throw pinfeed::invalid_argument("loader state: next_batch " + std::to_string(next) + " is not in [0, " +
                                    std::to_string(saved_batches) + "]");
  resume_plan r{o, next, {}, {}};
  if (saved.world() == o.world()) {  // the same split: every rank goes on with its own share
    if (whole) r.order.unrestrict();
    else r.order.restrict(e, s.plan);
    return r;
  }
  // Another world size: what the saved ranks had not delivered yet is split over this one's.
  const std::uint64_t taken = next == saved_batches ? saved.size(e) : next * opt.batch_size;
  auto remaining = saved.remaining_after(e, taken);
  std::uint64_t left = 0;
  for (const auto& range : remaining) left += range.end - range.begin;
  r.order.restrict(e, std::move(remaining));
  r.first = 0;
  const std::uint64_t mine = r.order.size(e), world = static_cast<std::uint64_t>(o.world());
  if (o.drops_remainder() && mine * world < left)
    r.warning = "loader: resuming epoch " + std::to_string(e) + " with drop_remainder drops the " +
                std::to_string(left - mine * world) + " of its " + std::to_string(left) +
                " remaining samples that do not divide over " + std::to_string(world) + " ranks";
  r.note = "loader: resuming epoch " + std::to_string(e) + " saved by " + std::to_string(saved.world()) +
           " ranks after " + std::to_string(next) + " batches each on " + std::to_string(world) + " ranks: " +
           std::to_string(left) + " samples left, " + std::to_string(mine) + " for this rank";
  return r;
}

std::string loader::state() const {
  detail::loader_state s = impl_->current_state();
  s.plan = impl_->order->plan(impl_->epoch);
  return s.to_json();
}

void loader::resume(const std::string& state) {
  const detail::loader_state saved = detail::loader_state::from_json(state);
  auto& im = *impl_;
  im.current_state().check_same_loader(saved);
  impl::resume_plan r = im.plan_resume(saved);
  im.cancel();  // no worker reads the order while it changes
  *im.order = std::move(r.order);
  im.positioned = true;
  im.start(saved.epoch, r.first);  // a thread that cannot start leaves the loader stopped there: next() starts it
  if (!r.warning.empty()) log(log_level::warn, r.warning);
  if (!r.note.empty()) log(log_level::info, r.note);
}

}  // namespace pinfeed
