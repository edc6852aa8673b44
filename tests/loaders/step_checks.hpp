#pragma once
// Checks the augmentation steps' tests share: a refusal with its caret, and the chi-square test of
// drawn counts (its p from the regularized upper incomplete gamma function).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "pinfeed/loaders/transforms.hpp"

namespace pinfeed::test {

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
