// The pipeline, the transform registry, the text parser and the pipeline-file loader.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "pinfeed/runtime/detail/json_release.hpp"
#include "pinfeed/runtime/detail/read_file.hpp"
#include "pinfeed/runtime/exception.hpp"

#include "common.hpp"
#include "kinds.hpp"

namespace pinfeed::loaders {

pipeline::pipeline(std::vector<std::shared_ptr<transform>> steps) : steps_(std::move(steps)) {
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (!steps_[i]) throw pinfeed::invalid_argument("pipeline step " + std::to_string(i) + " is null");
}

image_spec pipeline::output_spec(const image_spec& in) const {
  image_spec s = in;
  for (const auto& t : steps_) s = t->output_spec(s);
  if (!s.fixed())
    throw pinfeed::invalid_argument("pipeline '" + to_string() + "' has no fixed output shape for input " +
                                std::to_string(in.height) + "x" + std::to_string(in.width) +
                                ": end it with a crop when image sizes vary");
  return s;
}

std::string pipeline::to_string() const {
  std::string s;
  for (const auto& t : steps_) {
    if (!s.empty()) s += ',';
    s += t->name();
  }
  return s;
}

pipeline pipeline::host_part() const {
  std::size_t end = steps_.size();
  while (end > 0 && steps_[end - 1]->pointwise().has_value()) --end;
  return pipeline({steps_.begin(), steps_.begin() + static_cast<std::ptrdiff_t>(end)});
}

pipeline pipeline::device_tail() const {
  std::size_t end = steps_.size();
  while (end > 0 && steps_[end - 1]->pointwise().has_value()) --end;
  return pipeline({steps_.begin() + static_cast<std::ptrdiff_t>(end), steps_.end()});
}

namespace {

[[noreturn]] void parse_error(std::string_view text, std::size_t at, const std::string& what) {
  throw pinfeed::invalid_argument("transforms: " + what + " at character " + std::to_string(at) + "\n  " +
                              std::string(text) + "\n  " + std::string(at, ' ') + "^");
}

/// The registry: the built-in kinds first, then those registered at run time. Guarded by a mutex
/// (registration may race with parsing on another thread).
struct registry {
  std::mutex mutex;
  std::vector<transform_kind> kinds;
  registry() {
    add_crop_kinds(kinds);
    add_resize_kinds(kinds);
    add_random_resized_crop_kinds(kinds);
    add_random_mask_kinds(kinds);
    add_random_hflip_kinds(kinds);
    add_pointwise_kinds(kinds);
    add_colour_kinds(kinds);
  }
};
registry& the_registry() {
  static registry r;
  return r;
}

std::string known_names(const std::vector<transform_kind>& kinds) {
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : ", ") + k.names.front();
  return out;
}

std::shared_ptr<transform> make_step(std::string_view text, std::size_t at, const std::string& name,
                                     const std::vector<double>& args, std::size_t args_at) {
  transform_kind kind;
  {
    auto& r = the_registry();
    std::lock_guard lock(r.mutex);
    const auto it = std::find_if(r.kinds.begin(), r.kinds.end(), [&](const transform_kind& k) {
      return std::find(k.names.begin(), k.names.end(), name) != k.names.end();
    });
    if (it == r.kinds.end()) parse_error(text, at, "unknown transform '" + name + "' (known: " + known_names(r.kinds) + ")");
    kind = *it;
  }
  if (args.size() < kind.min_args || args.size() > kind.max_args)
    parse_error(text, args_at,
                name + " takes " +
                    (kind.min_args == kind.max_args ? std::to_string(kind.min_args)
                                                    : std::to_string(kind.min_args) + " to " + std::to_string(kind.max_args)) +
                    " argument(s), got " + std::to_string(args.size()) + " (" + kind.usage + ")");
  try {
    return kind.make(args);
  } catch (const std::invalid_argument& e) {
    parse_error(text, args_at, e.what());
  }
}

}  // namespace

pipeline parse_pipeline(std::string_view text) {
  std::vector<std::shared_ptr<transform>> steps;
  std::size_t i = 0;
  auto skip_ws = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_ws();
  if (i == text.size()) return pipeline();
  for (;;) {
    skip_ws();
    const std::size_t at = i;
    std::string name;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) name += text[i++];
    if (name.empty()) parse_error(text, at, "expected a transform name");
    skip_ws();
    std::vector<double> args;
    std::size_t args_at = i;
    if (i < text.size() && text[i] == '(') {
      ++i;
      args_at = i;
      for (;;) {
        skip_ws();
        if (i < text.size() && text[i] == ')' && args.empty()) {
          ++i;
          break;
        }
        const std::size_t num_at = i;
        std::size_t used = 0;
        double v = 0;
        try {
          v = std::stod(std::string(text.substr(i)), &used);
        } catch (const std::exception&) {
          parse_error(text, num_at, "expected a number");
        }
        if (!std::isfinite(v)) parse_error(text, num_at, "expected a finite number");
        args.push_back(v);
        i += used;
        skip_ws();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == ')') {
          ++i;
          break;
        }
        parse_error(text, i, "expected ',' or ')'");
      }
    }
    steps.push_back(make_step(text, at, name, args, args_at));
    skip_ws();
    if (i == text.size()) break;
    if (text[i] != ',') parse_error(text, i, "expected ',' between transforms");
    ++i;
  }
  return pipeline(std::move(steps));
}

pipeline parse_pipeline_json(std::string_view text, const std::string& origin) {
  const std::string where = "pipeline file '" + origin + "'";
  nlohmann::json j;
  const pinfeed::detail::json_releaser release(j);
  try {
    pinfeed::detail::parse_json_into(j, text);
  } catch (const nlohmann::json::exception& e) {
    throw pinfeed::invalid_argument(where + " is not JSON: " + e.what());
  }
  if (j.is_object() && !j.contains("transforms"))
    throw pinfeed::invalid_argument(where + " has no \"transforms\" list");
  // (A view, not a copy: replacing the document would destroy it whole, which allocates.)
  const nlohmann::json& list = j.is_object() ? j.at("transforms") : j;
  if (!list.is_array()) throw pinfeed::invalid_argument(where + ": transforms must be a list of strings");
  std::vector<std::shared_ptr<transform>> steps;
  for (std::size_t k = 0; k < list.size(); ++k) {
    if (!list[k].is_string())
      throw pinfeed::invalid_argument(where + ": entry " + std::to_string(k) + " (" + list[k].dump() + ") is not a string");
    try {
      const pipeline one = parse_pipeline(list[k].get_ref<const std::string&>());
      steps.insert(steps.end(), one.steps().begin(), one.steps().end());
    } catch (const std::invalid_argument& e) {
      throw pinfeed::invalid_argument(where + ", entry " + std::to_string(k) + ": " + e.what());
    }
  }
  return pipeline(std::move(steps));
}

pipeline load_pipeline_file(const std::string& path) {
  const auto text = pinfeed::detail::read_whole_file(path);
  if (!text) throw pinfeed::invalid_argument("pipeline file '" + path + "' cannot be opened");
  return parse_pipeline_json(*text, path);
}

void register_transform(transform_kind kind) {
  if (kind.names.empty()) throw pinfeed::invalid_argument("register_transform: a transform needs a name");
  if (!kind.make) throw pinfeed::invalid_argument("register_transform: '" + kind.names.front() + "' has no make function");
  if (kind.min_args > kind.max_args)
    throw pinfeed::invalid_argument("register_transform: '" + kind.names.front() + "' takes at least " +
                                std::to_string(kind.min_args) + " but at most " + std::to_string(kind.max_args) +
                                " arguments");
  for (const auto& n : kind.names) {
    const bool word = !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    });
    if (!word) throw pinfeed::invalid_argument("register_transform: name '" + n + "' is not made of letters, digits and _");
  }
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  for (const auto& n : kind.names)
    for (const auto& k : r.kinds)
      if (std::find(k.names.begin(), k.names.end(), n) != k.names.end())
        throw pinfeed::invalid_argument("register_transform: the name '" + n + "' is taken by " + k.usage);
  r.kinds.push_back(std::move(kind));
}

std::vector<std::string> transform_names() {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& k : r.kinds) out.insert(out.end(), k.names.begin(), k.names.end());
  return out;
}

}  // namespace pinfeed::loaders
