#pragma once
// Internal (not installed): emptying a parsed JSON document without allocating.
//
// nlohmann/json's destructor allocates: it moves an array's or object's children onto a
// std::vector it reserves first (to destroy deep documents without recursion). A document
// destroyed while memory is exhausted then throws std::bad_alloc out of a noexcept destructor,
// and the process ends. json_release empties a document of pinfeed's own (a config, a loader
// state, a pipeline file: a few levels deep) from its leaves up, so that what its destructor
// meets allocates nothing. A document being built when the parser itself fails is destroyed
// inside nlohmann's parser: that reserve succeeds unless every later allocation fails too.

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

}  // namespace pinfeed::detail
