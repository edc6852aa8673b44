#pragma once
// Internal (not installed): emptying a parsed JSON document without allocating.
//
// nlohmann/json's destructor allocates: it moves an array's or object's children onto a
// std::vector it reserves first (to destroy deep documents without recursion). A document
// destroyed while memory is exhausted then throws std::bad_alloc out of a noexcept destructor,
// and the process ends. json_release empties a document of pinfeed's own (a config, a loader
// state, a pipeline file: a few levels deep) from its leaves up, so that what its destructor
// meets allocates nothing. A document being built when the parser itself fails is destroyed
// inside nlohmann's parser, so pinfeed parses with parse_json_into: nlohmann's SAX reader fills a
// document the caller holds (and empties with json_releaser), in place, so that no half-built
// document is ever destroyed with its children.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pinfeed::detail {

/// Empties `j` leaves first (documents deeper than 64 levels: the rest is left to the destructor).
inline void release_json(nlohmann::json& j, int depth = 0) noexcept {
  if (depth > 64) return;
  if (j.is_array()) {
    auto& a = j.get_ref<nlohmann::json::array_t&>();
    for (auto& e : a) release_json(e, depth + 1);
    a.clear();
  } else if (j.is_object()) {
    auto& o = j.get_ref<nlohmann::json::object_t&>();
    for (auto& kv : o) release_json(kv.second, depth + 1);
    o.clear();
  }
}

/// Empties a document when it goes out of scope, before its own destructor runs: declare it just
/// after the document.
class json_releaser {
 public:
  explicit json_releaser(nlohmann::json& j) noexcept : j_(j) {}
  ~json_releaser() { release_json(j_); }
  json_releaser(const json_releaser&) = delete;
  json_releaser& operator=(const json_releaser&) = delete;

 private:
  nlohmann::json& j_;
};

/// nlohmann's SAX events written into a document in place: each value goes straight into its
/// parent, so a failure at any point (a parse error, an allocation) leaves one partial document
/// that the caller's json_releaser empties, and nothing else to destroy.
class json_in_place {
 public:
  explicit json_in_place(nlohmann::json& root) : root_(root) {}
  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(std::int64_t v) { return put(v); }
  bool number_unsigned(std::uint64_t v) { return put(v); }
  bool number_float(double v, const std::string&) { return put(v); }
  bool string(std::string& v) { return put(std::move(v)); }
  bool binary(nlohmann::json::binary_t& v) { return put(std::move(v)); }
  bool start_object(std::size_t) {
    nlohmann::json* j = place();
    *j = nlohmann::json::object();  // (empty: nothing to destroy if the push below fails)
    open_.push_back(j);
    return true;
  }
  bool key(std::string& k) {
    key_ = &(*open_.back())[k];  // a null member, filled by the next value
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) {
    nlohmann::json* j = place();
    *j = nlohmann::json::array();
    open_.push_back(j);
    return true;
  }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    // As nlohmann's own DOM reader throws them: a parse_error, or out_of_range for a number too large.
    if (e.id >= 400 && e.id < 500) throw static_cast<const nlohmann::json::out_of_range&>(e);
    throw static_cast<const nlohmann::json::parse_error&>(e);
  }

 private:
  /// Where the next value goes: the root, the member whose key came last, or a new array element.
  nlohmann::json* place() {
    if (open_.empty()) return &root_;
    nlohmann::json& parent = *open_.back();
    if (parent.is_object()) return key_;
    parent.push_back(nullptr);
    return &parent.back();
  }
  template <class T>
  bool put(T&& v) {
    *place() = std::forward<T>(v);
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }
  nlohmann::json& root_;
  std::vector<nlohmann::json*> open_;
  nlohmann::json* key_ = nullptr;
};

/// Parses `text` into `root` (declare its json_releaser first): throws nlohmann::json::parse_error
/// for text that is not JSON, std::bad_alloc when memory runs out; `root` is then partial, and
/// emptied by its releaser without allocating.
inline void parse_json_into(nlohmann::json& root, std::string_view text) {
  json_in_place events(root);
  (void)nlohmann::json::sax_parse(text, &events);
}

}  // namespace pinfeed::detail
