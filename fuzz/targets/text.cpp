// Text a user writes or a program saved: file lists, shard patterns, transform specs and pipeline
// files, pinfeed.config/1, loader states, .npy labels. Each parse that succeeds is printed and
// parsed again (or checked against a second way to the same answer).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/tar_samples.hpp"
#include "pinfeed/loaders/image_files.hpp"
#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "pinfeed/runtime/npy.hpp"
#include "pinfeed/runtime/random.hpp"
#include "targets.hpp"
#if PINFEED_FUZZ_REMOTE
#include "pinfeed/loaders/remote.hpp"
#endif

namespace pinfeed::fuzz {

outcome file_list(bytes input) {
  constexpr std::string_view name = "file_list";
  std::vector<loaders::image_file> files;
  try {
    files = loaders::parse_file_list(text_of(input), "fuzz", "/base");
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  std::string printed;
  for (const auto& f : files) {
    if (f.label < 0 || f.path.empty() || f.path.front() != '/') broken(name, "entry '" + f.path + "' label " + std::to_string(f.label));
    printed += f.path + " " + std::to_string(f.label) + "\n";
  }
  const auto again = loaders::parse_file_list(printed, "fuzz again", "/elsewhere");
  bool same = again.size() == files.size();
  for (std::size_t i = 0; same && i < files.size(); ++i) same = again[i].path == files[i].path && again[i].label == files[i].label;
  if (!same) broken(name, "parsed, printed and parsed again, the list changed:\n" + printed);
  return outcome::accepted;
}

namespace {
/// How many names `pattern` expands to, counted without expanding: the product of its ranges'
/// sizes; -1 when it holds a '{' that does not start a numeric {first..last} range.
long long count_names(std::string_view pattern) {
  long long n = 1;
  for (std::size_t at = pattern.find('{'); at != std::string_view::npos; at = pattern.find('{', at)) {
    const auto close = pattern.find('}', at), dots = pattern.find("..", at);
    if (close == std::string_view::npos || dots == std::string_view::npos || dots > close) return -1;
    const auto lo = pattern.substr(at + 1, dots - at - 1), hi = pattern.substr(dots + 2, close - dots - 2);
    if (lo.empty() || hi.empty() || lo.size() > 18 || hi.size() > 18 ||
        lo.find_first_not_of("0123456789") != std::string_view::npos || hi.find_first_not_of("0123456789") != std::string_view::npos)
      return -1;
    const long long a = std::stoll(std::string(lo)), b = std::stoll(std::string(hi));
    if (b < a) return -1;
    n *= b - a + 1;
    if (n > 1000000) return -1;
    at = close + 1;
  }
  return n;
}
}  // namespace

outcome shard_pattern(bytes input) {
  constexpr std::string_view name = "shard_pattern";
  const std::string pattern(text_of(input));
  std::vector<std::string> names;
  try {
    names = loaders::detail::expand_braces(pattern);
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  const long long expect = count_names(pattern);
  if (expect != static_cast<long long>(names.size()))
    broken(name, "'" + pattern + "' expanded to " + std::to_string(names.size()) + " names, its ranges make " +
                     std::to_string(expect));
  for (const auto& n : names)
    if (n.find('{') != std::string::npos) broken(name, "'" + pattern + "' expanded to '" + n + "', a range left in it");
#if PINFEED_FUZZ_REMOTE
  // The same pattern as the path of an https:// location: the same names, each on that server.
  if (pattern.find_first_of("?#*[") == std::string::npos) {
    std::vector<std::string> remote;
    try {
      remote = loaders::expand_remote_pattern("https://example.invalid/" + pattern);
    } catch (const std::invalid_argument&) {
      return outcome::accepted;  // not a valid URL path: refused by name
    }
    if (remote.size() != names.size()) broken(name, "as an https:// pattern, '" + pattern + "' gives another count");
    for (std::size_t i = 0; i < names.size(); ++i)
      if (remote[i] != "https://example.invalid/" + names[i]) broken(name, "as an https:// pattern, name " + std::to_string(i) + " differs");
  }
#endif
  return outcome::accepted;
}

/// What each step says it did to a sample (transform::explain) is a pipeline that parses and gives
/// the step's own output shape (noise drawn from the stream, value=random, is no step of its own).
void explanations_parse(std::string_view name, const loaders::pipeline& p) {
  const auto same = [](const loaders::image_spec& a, const loaders::image_spec& b) {
    return a.height == b.height && a.width == b.width && a.channels == b.channels && a.type == b.type;
  };
  loaders::image_spec cur{480, 640, 3};
  for (std::size_t k = 0; k < p.steps().size(); ++k) {
    const auto& step = *p.steps()[k];
    loaders::image_spec next;
    try {
      next = step.output_spec(cur);
    } catch (const std::invalid_argument&) {
      return;
    }
    const std::string why = step.explain(cur, philox_stream(1, 0, k));
    if (why.find("value=random") == std::string::npos && why.find("per-channel") == std::string::npos) {
      try {
        const loaders::pipeline e = loaders::parse_pipeline(why);
        if (!same(e.empty() ? cur : e.output_spec(cur), next))
          broken(name, "'" + step.name() + "' explained as '" + why + "', which gives another shape");
      } catch (const std::invalid_argument& x) {
        broken(name, "'" + step.name() + "' explained as '" + why + "', which is refused: " + x.what());
      }
    }
    cur = next;
  }
}

namespace {
/// Applies the first host steps of `p` to an image of shape `in` (pixels from a fixed stream), out
/// of place into exactly sized buffers. A step with no fixed shape or an output over 64 KiB ends
/// it, and so does the sixth step: an input's work stays well inside the fuzzer's time limit
/// (a blur's kernel may be 1023 wide).
void run_steps(std::string_view name, const loaders::pipeline& p, loaders::image_spec in) {
  constexpr std::size_t kMostSteps = 6;
  constexpr double kMostBytes = 64 << 10;
  std::vector<std::byte> cur(in.bytes());
  fill_random_bytes(philox_stream(5, 0, 0), cur);
  for (std::size_t k = 0; k < p.steps().size() && k < kMostSteps; ++k) {
    const auto& step = *p.steps()[k];
    if (step.batch_op()) return;  // a batch op mixes a batch's samples: not a step of one image
    loaders::image_spec next;
    try {
      next = step.output_spec(in);
    } catch (const std::invalid_argument&) {
      return;
    }
    const double bytes = static_cast<double>(next.height) * static_cast<double>(next.width) * static_cast<double>(next.channels) * 4;
    if (!next.fixed() || next.channels <= 0 || bytes > kMostBytes) return;  // (4: the widest sample, float)
    std::vector<std::byte> out(next.bytes());
    try {
      step.apply(loaders::image_view{cur.data(), in}, loaders::image_view{out.data(), next}, philox_stream(7, 0, 0, static_cast<std::uint32_t>(100 + k)));
    } catch (const std::exception& e) {  // a shape the step accepted is one it can run
      broken(name, "step " + step.name() + " accepted shape " + std::to_string(in.height) + "x" + std::to_string(in.width) +
                       "x" + std::to_string(in.channels) + " and then failed on it: " + e.what());
    }
    cur = std::move(out);
    in = next;
  }
}
}  // namespace

outcome pipeline(bytes input) {
  constexpr std::string_view name = "pipeline";
  const auto text = text_of(input);
  const bool json = !text.empty() && (text.front() == '{' || text.front() == '[');
  loaders::pipeline p;
  try {
    p = json ? loaders::parse_pipeline_json(text, "fuzz.json") : loaders::parse_pipeline(text);
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  // Printed, it parses back to a pipeline that prints the same.
  const std::string printed = p.to_string();
  loaders::pipeline again;
  try {
    again = loaders::parse_pipeline(printed);
  } catch (const std::invalid_argument& e) {
    broken(name, "'" + printed + "' (printed from a parsed pipeline) does not parse: " + e.what());
  }
  if (again.to_string() != printed) broken(name, "'" + printed + "' parsed and printed is '" + again.to_string() + "'");
  // Its shape on a few inputs: a shape or a named refusal.
  for (const loaders::image_spec in : {loaders::image_spec{480, 640, 3}, loaders::image_spec{1, 1, 3}, loaders::image_spec{4096, 17, 3}}) {
    try {
      (void)p.output_spec(in);
    } catch (const std::invalid_argument&) {
    }
  }
  explanations_parse(name, p);
  // Run, each step into a buffer of exactly its output's size (so that the sanitizers see a
  // step that reads or writes past an image), on small images whose shape the pipeline accepts.
  for (const loaders::image_spec in : {loaders::image_spec{64, 48, 3}, loaders::image_spec{13, 7, 3}, loaders::image_spec{1, 1, 3}})
    run_steps(name, p, in);
  return outcome::accepted;
}

outcome config(bytes input) {
  constexpr std::string_view name = "config";
  loader_config c;
  try {
    c = loader_config::from_json(std::string(text_of(input)), "fuzz.json");
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  const std::string printed = c.to_json();
  loader_config again;
  try {
    again = loader_config::from_json(printed, "printed");
  } catch (const std::invalid_argument& e) {
    broken(name, "'" + printed + "' (printed from a parsed config) does not parse: " + e.what());
  }
  if (again.to_json() != printed) broken(name, "'" + printed + "' parsed and printed is '" + again.to_json() + "'");
  loader_options o;
  c.apply_to(o);
  return outcome::accepted;
}

namespace {
/// The loader whose state the inputs are: 100 samples of their index, batches of 7, shuffled,
/// on the host. Made once; never destroyed (libFuzzer ends the process without unwinding).
loader& state_loader() {
  static loader* l = [] {
    loader_options o;
    o.batch_size = 7;
    o.workers = 1;
    o.prefetch = 1;
    o.device = "cpu";
    o.seed = 77;
    o.order = {true, 0, 1, false};
    auto src = make_source(100, {{"id", dtype::i64, {}}}, [](sample& s) { s.as<std::int64_t>(0)[0] = static_cast<std::int64_t>(s.index()); });
    return new loader(std::move(src), o);
  }();
  return *l;
}
}  // namespace

outcome loader_state(bytes input) {
  constexpr std::string_view name = "loader_state";
  auto& l = state_loader();
  try {
    l.resume(std::string(text_of(input)));
  } catch (const std::invalid_argument&) {
    return outcome::rejected;
  }
  // Where it resumed, saved again and resumed from, it stays.
  const std::string saved = l.state();
  try {
    l.resume(saved);
  } catch (const std::invalid_argument& e) {
    broken(name, "the state saved after resuming is refused: " + std::string(e.what()) + "\n" + saved);
  }
  if (l.state() != saved) broken(name, "resumed from its own state, the loader saves another:\n" + saved + "\n" + l.state());
  return outcome::accepted;
}

outcome npy(bytes input) {
  constexpr std::string_view name = "npy";
  npy_array a;
  try {
    a = parse_npy({reinterpret_cast<const std::byte*>(input.data()), input.size()}, "fuzz.npy");
  } catch (const std::runtime_error&) {
    return outcome::rejected;
  }
  if (a.data.size() != a.elements() * dtype_size(a.type)) broken(name, "data and shape disagree");
  const auto printed = format_npy(a);
  const auto again = parse_npy(printed, "printed.npy");
  if (again.type != a.type || again.shape != a.shape || again.data != a.data) broken(name, "parsed, printed and parsed again, the array changed");
  return outcome::accepted;
}

}  // namespace pinfeed::fuzz
