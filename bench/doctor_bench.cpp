#include "doctor_bench.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_rows.hpp"

#include "pinfeed/doctor/doctor.hpp"
#include "pinfeed/loaders/synthetic.hpp"

namespace pinfeed::bench {
namespace {

using clock_type = std::chrono::steady_clock;

doctor_pipeline article_pipeline(const doctor_bench_options& o) {
  return {loaders::make_reader_from_source(loaders::make_synthetic_source({o.samples, 1024, 1024, 1000})),
          loaders::parse_pipeline(o.transforms),
          {}};
}

loader_options loader_for(const doctor_bench_options& o) {
  loader_options l;
  l.batch_size = o.batch;
  l.workers = o.workers;
  l.prefetch = o.prefetch;
  l.device = "cpu";
  return l;
}

/// What `pinfeed run` does with each batch when no step is asked for: take it, release it.
double run_loop(const doctor_bench_options& o) {
  const auto p = article_pipeline(o);
  loader l(std::make_shared<loaders::pipeline_source>(p.reader, p.steps, p.source), loader_for(o));
  const auto next = [&] {
    auto b = l.next();
    if (!b) {
      l.start_epoch(l.epoch() + 1);
      b = l.next();
    }
    return b->size();
  };
  for (int i = 0; i < 3; ++i) (void)next();  // the doctor's warm-up
  std::size_t images = 0;
  const auto t0 = clock_type::now();
  double elapsed = 0;
  while (elapsed < o.seconds) {
    images += next();
    elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  return images / elapsed;
}

double doctor_l0(const doctor_bench_options& o) {
  doctor_options d;
  d.loader = loader_for(o);
  d.modes = {"L0"};
  d.steps = 3;
  d.min_mode_seconds = o.seconds;
  d.max_mode_seconds = o.seconds;
  return doctor(article_pipeline(o), d).mode("L0")->images_per_s;
}

}  // namespace

void run_doctor_bench(const doctor_bench_options& o, std::ostream& out) {
  std::vector<double> run, doc;
  for (int r = 0; r < o.repeats; ++r) {
    // Alternate which goes first, so drift of the machine falls on both.
    for (int k = 0; k < 2; ++k) {
      const bool doctor_turn = (r + k) % 2 == 1;
      const double v = doctor_turn ? doctor_l0(o) : run_loop(o);
      (doctor_turn ? doc : run).push_back(v);
      out << nlohmann::json{{"bench", "doctor"}, {"impl", doctor_turn ? "doctor_l0" : "run"}, {"repeat", r},
                            {"transforms", o.transforms}, {"batch", o.batch}, {"images_per_s", v}}
          << std::endl;
    }
  }
  const double rm = median_of(run), dm = median_of(doc);
  out << nlohmann::json{{"bench", "doctor"}, {"metric", "overhead"}, {"run_images_per_s", rm},
                        {"doctor_l0_images_per_s", dm}, {"overhead_pct", 100.0 * (1.0 - dm / rm)},
                        {"repeats", o.repeats}, {"seconds_each", o.seconds}}
      << std::endl;
  if (o.ladder) {
    doctor_options d;
    d.loader = loader_for(o);
    const auto t0 = clock_type::now();
    const doctor_report rep = doctor(article_pipeline(o), d);
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    // The balance of the stages (which the verdict reports) is a property of the machine: it is
    // measured here, not asserted in a test.
    nlohmann::json shares = nlohmann::json::object();
    for (const auto& t : rep.transforms) shares[t.name] = t.share;
    out << nlohmann::json{{"bench", "doctor"}, {"metric", "ladder_seconds"}, {"seconds", s},
                          {"modes_run", std::count_if(rep.modes.begin(), rep.modes.end(), [](const auto& m) { return m.ran; })},
                          {"verdict", rep.verdict}, {"bottleneck", rep.bottleneck}, {"transform_shares", shares}}
        << std::endl;
  }
}

}  // namespace pinfeed::bench
