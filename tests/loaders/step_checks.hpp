#pragma once
// Checks the augmentation steps' tests share: a refusal with its caret, the chi-square test of
// drawn counts (its p from the regularized upper incomplete gamma function), and the same batches
// for any worker count and across a resume.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"
#include "pinfeed/runtime/checksum.hpp"
#include "pinfeed/runtime/loader.hpp"
#include "test_util.hpp"

namespace pinfeed::test {

/// Two epochs of `src` in batches of `batch` (seed 3) give the same checksum lines for 1, 2 and 4
/// workers, and a loader resumed after two batches of epoch 1 gives the rest of them. Returns the
/// lines (1 worker).
inline std::vector<std::string> check_same_batches(const std::shared_ptr<source>& src, std::size_t batch) {
  const auto run = [&](std::size_t workers) {
    loader l(src, cpu_loader(batch, workers, 3));
    std::vector<std::string> lines;
    for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
      l.start_epoch(epoch);
      while (auto b = l.next()) lines.push_back(checksum_line(*b));
    }
    return lines;
  };
  const auto one = run(1);
  for (const std::size_t workers : {std::size_t{2}, std::size_t{4}}) {
    CAPTURE(workers);
    CHECK(run(workers) == one);
  }
  loader first(src, cpu_loader(batch, 2, 3));
  first.start_epoch(1);
  (void)first.next();
  (void)first.next();
  loader second(src, cpu_loader(batch, 2, 3));
  second.resume(first.state());
  std::vector<std::string> rest;
  while (auto b = second.next()) rest.push_back(checksum_line(*b));
  const std::size_t first_epoch = (src->size() + batch - 1) / batch;
  REQUIRE(one.size() == 2 * first_epoch);
  CHECK(rest == std::vector<std::string>(one.begin() + static_cast<std::ptrdiff_t>(first_epoch + 2), one.end()));
  return one;
}

/// parse_pipeline(text) must throw std::invalid_argument that says `says` and quotes the text with
/// its caret at character `where`.
inline void check_refused_at(const std::string& text, const std::string& says, std::size_t where) {
  CAPTURE(text);
  try {
    (void)loaders::parse_pipeline(text);
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find(says) != std::string::npos, what);
    CHECK_MESSAGE(what.find("\n  " + text + "\n  " + std::string(where, ' ') + "^") != std::string::npos, what);
  }
}

/// The chi-square distribution's upper tail at x with `dof` degrees of freedom: Q(dof / 2, x / 2)
/// (the series below a + 1, the continued fraction above).
inline double chi_square_p(double x, int dof) {
  const double a = dof / 2.0, z = x / 2.0;
  if (z <= 0) return 1.0;
  const double front = std::exp(-z + a * std::log(z) - std::lgamma(a));
  if (z < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::abs(term) > std::abs(sum) * 1e-15; ++n) sum += (term *= z / (a + n));
    return 1.0 - sum * front;
  }
  constexpr double tiny = 1e-300;
  double b = z + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::abs(d) < tiny ? tiny : d;
    c = b + an / c;
    c = std::abs(c) < tiny ? tiny : c;
    d = 1 / d;
    h *= d * c;
    if (std::abs(d * c - 1) < 1e-15) break;
  }
  return front * h;
}

/// The chi-square of observed counts against expected ones: prints it and p, checks p > 0.001.
inline double check_chi_square(const std::string& what, const std::vector<double>& observed,
                               const std::vector<double>& expected) {
  double x = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) x += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
  const int dof = static_cast<int>(observed.size()) - 1;
  const double p = chi_square_p(x, dof);
  MESSAGE(what << ": chi-square " << x << " with " << dof << " degrees of freedom, p = " << p);
  CHECK_MESSAGE(p > 0.001, what);
  return p;
}

/// The same against equal expected counts.
inline double check_uniform(const std::string& what, const std::vector<double>& observed) {
  double total = 0;
  for (double v : observed) total += v;
  return check_chi_square(what, observed, std::vector<double>(observed.size(), total / static_cast<double>(observed.size())));
}

}  // namespace pinfeed::test
