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
    add_blur_kinds(kinds);
    add_geometry_kinds(kinds);
    add_policy_kinds(kinds);
    add_erasing_kinds(kinds);
    add_mix_kinds(kinds);
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

/// A word of a step's text: NAME=VALUE (name, value and where each starts) or a positional word
/// (name, its place among the values in `place`).
struct word_arg {
  std::string name, value;
  std::size_t name_at = 0, value_at = 0, place = 0;
};

/// What the text gave one step: its positional values (a word's place holds 0 until the kind says
/// what the word is) and where each starts, its positional words, its options, and where its
/// arguments start.
struct step_args {
  std::vector<double> values;
  std::vector<std::size_t> at;
  std::vector<word_arg> words, named;
  std::size_t open_at = 0;
};

/// The text and a position in it.
struct cursor {
  std::string_view text;
  std::size_t i = 0;
  void skip_ws() {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  }
  [[nodiscard]] bool is(char c) const { return i < text.size() && text[i] == c; }
  [[nodiscard]] bool word_starts() const {
    return i < text.size() && (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_');
  }
  std::string identifier() {
    std::string out;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) out += text[i++];
    return out;
  }
  /// After an argument: ',' (true: another follows) or ')' (false); anything else is an error.
  bool next_or_close() {
    skip_ws();
    if (is(',')) return ++i, true;
    if (is(')')) return ++i, false;
    parse_error(text, i, "expected ',' or ')'");
  }
};

/// One argument at the cursor: a number, a word, or NAME=VALUE.
void read_argument(cursor& c, step_args& a) {
  const std::size_t starts = c.i;
  if (c.word_starts()) {
    word_arg w{c.identifier(), {}, starts, 0, 0};
    c.skip_ws();
    if (!c.is('=')) {  // a word in a positional place (auto_augment(imagenet))
      if (!a.named.empty()) parse_error(c.text, starts, "a positional argument after NAME=VALUE");
      w.place = a.values.size();
      a.words.push_back(std::move(w));
      a.values.push_back(0.0);
      a.at.push_back(starts);
      return;
    }
    ++c.i;
    c.skip_ws();
    w.value_at = c.i;
    while (c.i < c.text.size() && c.text[c.i] != ',' && c.text[c.i] != ')' && !std::isspace(static_cast<unsigned char>(c.text[c.i])))
      w.value += c.text[c.i++];
    if (w.value.empty()) parse_error(c.text, w.value_at, "expected a value for " + w.name);
    a.named.push_back(std::move(w));
    return;
  }
  if (!a.named.empty()) parse_error(c.text, starts, "a positional argument after NAME=VALUE");
  std::size_t used = 0;
  const double v = detail::read_number(std::string(c.text.substr(c.i)), used);
  if (used == 0) parse_error(c.text, starts, "expected a number");
  if (!std::isfinite(v)) parse_error(c.text, starts, "expected a finite number");
  a.values.push_back(v);
  a.at.push_back(starts);
  c.i += used;
}

/// A step's arguments, the cursor on its '(' (or past its name, where it has none).
step_args read_arguments(cursor& c) {
  step_args a;
  a.open_at = c.i;
  if (!c.is('(')) return a;
  a.open_at = ++c.i;
  c.skip_ws();
  if (c.is(')')) return ++c.i, a;
  do {
    c.skip_ws();
    read_argument(c, a);
  } while (c.next_or_close());
  return a;
}

std::string listed(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

transform_kind find_kind(std::string_view text, std::size_t at, const std::string& name) {
  auto& r = the_registry();
  std::lock_guard lock(r.mutex);
  const auto it = std::find_if(r.kinds.begin(), r.kinds.end(), [&](const transform_kind& k) {
    return std::find(k.names.begin(), k.names.end(), name) != k.names.end();
  });
  if (it == r.kinds.end()) parse_error(text, at, "unknown transform '" + name + "' (known: " + known_names(r.kinds) + ")");
  return *it;
}

/// The options' values after the positional ones, in the kind's order: given, or their fallback.
void resolve_options(std::string_view text, const std::string& name, const transform_kind& kind, step_args& a) {
  const std::size_t first = a.values.size();
  for (const auto& option : kind.options) {
    a.values.push_back(option.fallback);
    a.at.push_back(a.open_at);
  }
  std::vector<std::string> option_names;
  for (const auto& o : kind.options) option_names.push_back(o.name);
  for (std::size_t k = 0; k < a.named.size(); ++k) {
    const word_arg& n = a.named[k];
    const auto it = std::find(option_names.begin(), option_names.end(), n.name);
    if (it == option_names.end())
      parse_error(text, n.name_at, name + " has no option '" + n.name + "' (" +
                                       (option_names.empty() ? "it takes none" : "its options: " + listed(option_names)) + ")");
    for (std::size_t before = 0; before < k; ++before)
      if (a.named[before].name == n.name) parse_error(text, n.name_at, name + ": the option '" + n.name + "' is given twice");
    const auto& option = kind.options[static_cast<std::size_t>(it - option_names.begin())];
    const std::size_t slot = first + static_cast<std::size_t>(it - option_names.begin());
    a.at[slot] = n.value_at;
    if (!option.words.empty()) {
      const auto w = std::find(option.words.begin(), option.words.end(), n.value);
      const bool word = w != option.words.end();
      if (!word && !option.numbers_too)
        parse_error(text, n.value_at, name + ": " + n.name + " must be one of " + listed(option.words) + ", not '" + n.value + "'");
      if (word) {
        const auto index = static_cast<double>(w - option.words.begin());
        a.values[slot] = option.numbers_too ? -1.0 - index : index;
        continue;
      }
    }
    std::size_t used = 0;
    a.values[slot] = detail::read_number(n.value, used);
    if (used != n.value.size() || !std::isfinite(a.values[slot]))
      parse_error(text, n.value_at, name + ": " + n.name + " must be a finite number" +
                                        (option.words.empty() ? "" : " or one of " + listed(option.words)) + ", not '" + n.value + "'");
  }
}

std::shared_ptr<transform> make_step(std::string_view text, std::size_t at, const std::string& name, step_args a) {
  const transform_kind kind = find_kind(text, at, name);
  const std::size_t n = a.values.size();
  if (n < kind.min_args || n > kind.max_args)
    parse_error(text, a.open_at,
                name + " takes " +
                    (kind.min_args == kind.max_args ? std::to_string(kind.min_args)
                                                    : std::to_string(kind.min_args) + " to " + std::to_string(kind.max_args)) +
                    " argument(s), got " + std::to_string(n) + " (" + kind.usage + ")");
  for (const word_arg& w : a.words) {
    const auto it = std::find(kind.words.begin(), kind.words.end(), w.name);
    if (it == kind.words.end())
      parse_error(text, w.name_at,
                  kind.words.empty() ? name + ": expected a number, not '" + w.name + "'"
                                     : name + ": '" + w.name + "' is not one of " + listed(kind.words));
    a.values[w.place] = static_cast<double>(it - kind.words.begin());
  }
  resolve_options(text, name, kind, a);
  try {
    return kind.make(a.values);
  } catch (const bad_transform_argument& e) {
    parse_error(text, e.index() < a.at.size() ? a.at[e.index()] : a.open_at, e.what());
  } catch (const std::invalid_argument& e) {
    parse_error(text, a.open_at, e.what());
  }
}

}  // namespace

pipeline parse_pipeline(std::string_view text) {
  std::vector<std::shared_ptr<transform>> steps;
  cursor c{text, 0};
  c.skip_ws();
  if (c.i == text.size()) return pipeline();
  for (;;) {
    c.skip_ws();
    const std::size_t at = c.i;
    const std::string name = c.identifier();
    if (name.empty()) parse_error(text, at, "expected a transform name");
    c.skip_ws();
    steps.push_back(make_step(text, at, name, read_arguments(c)));
    c.skip_ws();
    if (c.i == text.size()) break;
    if (!c.is(',')) parse_error(text, c.i, "expected ',' between transforms");
    ++c.i;
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
