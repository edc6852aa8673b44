#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "pinfeed/runtime/detail/json_release.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/exception.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/node_plan.hpp"

namespace pinfeed {
namespace {
constexpr const char* kSchema = "pinfeed.config/1";

/// v is the string `text`. (Not `v == text`: nlohmann's comparison with a scalar is noexcept and
/// builds a JSON string, so a failed allocation there would end the process.)
bool is_text(const nlohmann::json& v, const char* text) { return v.is_string() && v.get_ref<const std::string&>() == text; }

nlohmann::json count_or_auto(std::size_t v) { return v == auto_tune ? nlohmann::json("auto") : nlohmann::json(v); }
}  // namespace

void loader_config::apply_to(loader_options& o) const {
  if (workers) o.workers = *workers;
  if (prefetch) o.prefetch = *prefetch;
  if (memory_budget) o.memory_budget = *memory_budget;
}

std::string loader_config::to_json() const {
  // Built member by member: an initializer list leaves temporary arrays whose destructor allocates
  // (detail/json_release.hpp).
  nlohmann::json j = nlohmann::json::object();
  const detail::json_releaser release(j);
  j["schema"] = kSchema;
  if (workers) j["workers"] = count_or_auto(*workers);
  if (prefetch) j["prefetch"] = count_or_auto(*prefetch);
  if (memory_budget) j["memory_budget"] = *memory_budget;
  if (requests_in_flight) j["requests_in_flight"] = *requests_in_flight;
  if (decode) j["decode"] = *decode;
  if (expected_speedup) j["expected_speedup"] = *expected_speedup;
  if (!measured.empty()) j["measured"] = measured;
  return j.dump(2);
}

loader_config loader_config::from_json(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  const detail::json_releaser release(j);
  try {
    detail::parse_json_into(j, text);
  } catch (const nlohmann::json::exception& e) {
    throw pinfeed::invalid_argument("config '" + origin + "' is not JSON: " + e.what());
  }
  if (!j.is_object()) throw pinfeed::invalid_argument("config '" + origin + "' is not a JSON object: " + j.dump());
  auto bad = [&](const std::string& key, const std::string& want) {
    return pinfeed::invalid_argument("config '" + origin + "': \"" + key + "\" is " + j.at(key).dump() + ", expected " + want);
  };
  if (!j.contains("schema") || !is_text(j["schema"], kSchema))
    throw pinfeed::invalid_argument("config '" + origin + "': \"schema\" is " + (j.contains("schema") ? j["schema"].dump() : "missing") +
                                ", expected \"" + kSchema + "\"");
  loader_config c;
  auto positive = [&](const std::string& key, std::uint64_t most) -> std::uint64_t {
    const auto& v = j.at(key);
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 || v.get<std::uint64_t>() > most)
      throw bad(key, "a whole number from 1 to " + std::to_string(most));
    return v.get<std::uint64_t>();
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "schema") continue;
    if (key == "workers" || key == "prefetch") {
      const std::size_t v = is_text(value, "auto") ? auto_tune : static_cast<std::size_t>(positive(key, key == "workers" ? 1024 : 4095));
      (key == "workers" ? c.workers : c.prefetch) = v;
    } else if (key == "memory_budget") {
      c.memory_budget = positive(key, ~std::uint64_t{0});
    } else if (key == "requests_in_flight") {
      c.requests_in_flight = positive(key, 1024);
    } else if (key == "decode") {
      if (!is_text(value, "host") && !is_text(value, "device") && !is_text(value, "device-inexact"))
        throw bad(key, "\"host\", \"device\" or \"device-inexact\"");
      c.decode = value.get<std::string>();
    } else if (key == "expected_speedup") {
      if (!value.is_number() || !(value.get<double>() > 0)) throw bad(key, "a positive number");
      c.expected_speedup = value.get<double>();
    } else if (key == "measured") {
      if (!value.is_string()) throw bad(key, "a string");
      c.measured = value.get<std::string>();
    } else {
      throw pinfeed::invalid_argument("config '" + origin + "': unknown field \"" + key +
                                  "\" (known: schema, workers, prefetch, memory_budget, requests_in_flight, "
                                  "decode, expected_speedup, measured)");
    }
  }
  return c;
}

loader_config loader_config::read(const std::string& path) {
  const auto text = detail::read_whole_file(path);
  if (!text) throw pinfeed::runtime_error("cannot read config '" + path + "'" + (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  return from_json(*text, path);
}

void loader_config::write(const std::string& path) const {
  detail::write_whole_file(path, to_json() + "\n", "cannot write config '" + path + "'");
}

std::string loader::tuning_report::to_string() const {
  auto one = [](std::size_t now, bool automatic, std::size_t most) {
    return std::to_string(now) + (automatic ? " (auto, of " + std::to_string(most) + ")" : std::string(" (fixed)"));
  };
  return "workers " + one(workers, workers_auto, workers_most) + ", prefetch " + one(prefetch, prefetch_auto, prefetch_most) +
         ": " + reason;
}

std::string loader::tuning_report::to_json() const {
  nlohmann::json steps = nlohmann::json::array();
  for (const window& w : path)
    steps.push_back({{"index", w.index},
                     {"seconds", w.seconds},
                     {"images_per_s", w.images_per_s},
                     {"consumer_wait", w.consumer_wait},
                     {"cpu_utilization", w.cpu_utilization},
                     {"workers", w.workers},
                     {"prefetch", w.prefetch},
                     {"changed", w.changed},
                     {"reason", w.reason}});
  return nlohmann::json{{"workers", workers},         {"workers_auto", workers_auto}, {"workers_most", workers_most},
                        {"prefetch", prefetch},       {"prefetch_auto", prefetch_auto}, {"prefetch_most", prefetch_most},
                        {"windows", windows},         {"changes", changes},          {"settled", settled},
                        {"reason", reason},           {"path", std::move(steps)}}
      .dump();
}

/// The options alone, before anything is made (plan_slots() then checks what they add up to).
void validate(const loader_options& o) {
  if (o.batch_size == 0) throw pinfeed::invalid_argument("loader option batch_size must be positive, got 0");
  if (o.prefetch == 0) throw pinfeed::invalid_argument("loader option prefetch must be at least 1 (or auto_tune), got 0");
  if (o.max_batches_in_use == 0)
    throw pinfeed::invalid_argument("loader option max_batches_in_use must be at least 1, got 0");
  if (o.workers > 1024 && o.workers != auto_tune)
    throw pinfeed::invalid_argument("loader option workers must be at most 1024 (or auto_tune), got " + std::to_string(o.workers));
  if (o.memory_budget && *o.memory_budget == 0)
    throw pinfeed::invalid_argument("loader option memory_budget must be positive bytes, got 0");
  if (const node_plan& plan = this_node_plan_without_gpu(); o.memory_budget && plan.memory > 0 && *o.memory_budget > plan.memory)
    throw pinfeed::invalid_argument("loader option memory_budget " + format_bytes(*o.memory_budget) +
                                " is more than the memory this process may use (" + format_bytes(plan.memory) + ", " +
                                plan.memory_source + ")");
  if (o.max_batches_in_use > 4096 || (o.prefetch != auto_tune && o.prefetch + o.max_batches_in_use > 4096))
    throw pinfeed::invalid_argument("loader options prefetch + max_batches_in_use must be at most 4096, got " +
                                (o.prefetch == auto_tune ? "auto + " + std::to_string(o.max_batches_in_use)
                                                         : std::to_string(o.prefetch + o.max_batches_in_use)));
}

}  // namespace pinfeed
