#include "pipeline/tpe.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpuherd::pipeline {
namespace {

// A parameter in the space the model works in: log for log-uniform.
struct Range {
  double lo = 0, hi = 1;
  bool log = false;
  bool integer = false;
};

Range RangeOf(const Distribution& d) {
  switch (d.kind) {
    case Distribution::Kind::kLogUniform: return {std::log(d.lo), std::log(d.hi), true, false};
    case Distribution::Kind::kInteger: return {d.lo - 0.5, d.hi + 0.5, false, true};
    default: return {d.lo, d.hi, false, false};
  }
}

double ToModel(const Range& r, double v) { return r.log ? std::log(v) : v; }

double FromModel(const Range& r, double x) {
  x = std::clamp(x, r.lo, r.hi);
  if (r.log) return std::exp(x);
  if (r.integer) return std::clamp(std::round(x), r.lo + 0.5, r.hi - 0.5);
  return x;
}

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// A truncated Gaussian mixture over [lo, hi]: one component per observation
// and the uniform prior, equally weighted.
struct Parzen {
  Range range;
  std::vector<double> mu, sigma;

  Parzen(const Range& r, std::vector<double> xs) : range(r) {
    std::sort(xs.begin(), xs.end());
    const double width = r.hi - r.lo;
    const double min_sigma = width / std::min(100.0, 1.0 + static_cast<double>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const double left = i == 0 ? xs[i] - r.lo : xs[i] - xs[i - 1];
      const double right = i + 1 == xs.size() ? r.hi - xs[i] : xs[i + 1] - xs[i];
      mu.push_back(xs[i]);
      sigma.push_back(std::clamp(std::max(left, right), min_sigma, width));
    }
  }

  double Density(double x) const {
    const double width = range.hi - range.lo;
    const double n = static_cast<double>(mu.size()) + 1;
    double p = 1.0 / width;  // the prior
    for (size_t i = 0; i < mu.size(); ++i) {
      const double mass = NormalCdf((range.hi - mu[i]) / sigma[i]) - NormalCdf((range.lo - mu[i]) / sigma[i]);
      const double z = (x - mu[i]) / sigma[i];
      p += std::exp(-0.5 * z * z) / (sigma[i] * std::sqrt(2 * std::numbers::pi) * std::max(mass, 1e-12));
    }
    return p / n;
  }

  double Draw(std::mt19937_64& rng) const {
    std::uniform_int_distribution<size_t> pick(0, mu.size());
    const size_t k = pick(rng);
    if (k == mu.size()) return std::uniform_real_distribution<double>(range.lo, range.hi)(rng);
    std::normal_distribution<double> normal(mu[k], sigma[k]);
    for (int tries = 0; tries < 100; ++tries) {
      const double x = normal(rng);
      if (x >= range.lo && x <= range.hi) return x;
    }
    return std::clamp(mu[k], range.lo, range.hi);
  }
};

// Smoothed counts of a choice's indices: one prior count each.
std::vector<double> ChoiceWeights(size_t choices, const std::vector<double>& picked) {
  std::vector<double> w(choices, 1.0);
  for (double v : picked) {
    const auto i = static_cast<size_t>(v);
    if (i < choices) w[i] += 1.0;
  }
  double sum = 0;
  for (double x : w) sum += x;
  for (double& x : w) x /= sum;
  return w;
}

double DrawPrior(const Distribution& d, std::mt19937_64& rng) {
  if (d.kind == Distribution::Kind::kChoice) {
    return static_cast<double>(std::uniform_int_distribution<size_t>(0, std::max<size_t>(1, d.choices.size()) - 1)(rng));
  }
  const Range r = RangeOf(d);
  return FromModel(r, std::uniform_real_distribution<double>(r.lo, r.hi)(rng));
}

}  // namespace

std::vector<double> RandomSuggest(const std::vector<Distribution>& params, std::mt19937_64& rng) {
  std::vector<double> out;
  for (const Distribution& d : params) out.push_back(DrawPrior(d, rng));
  return out;
}

std::vector<double> TpeSuggest(const std::vector<Distribution>& params, const std::vector<TpeTrial>& trials,
                               ObjectiveMode mode, const TpeOptions& options, std::mt19937_64& rng) {
  if (static_cast<int>(trials.size()) < std::max(1, options.startup)) return RandomSuggest(params, rng);
  std::vector<size_t> order(trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return Better(trials[a].objective, trials[b].objective, mode); });
  const size_t good = std::clamp<size_t>(
      static_cast<size_t>(std::ceil(options.gamma * static_cast<double>(trials.size()))), 1, 25);
  std::vector<double> out;
  for (size_t p = 0; p < params.size(); ++p) {
    std::vector<double> below, above;
    for (size_t k = 0; k < order.size(); ++k) {
      if (p >= trials[order[k]].values.size()) continue;
      (k < good ? below : above).push_back(trials[order[k]].values[p]);
    }
    const Distribution& d = params[p];
    if (d.kind == Distribution::Kind::kChoice) {
      const size_t n = std::max<size_t>(1, d.choices.size());
      const std::vector<double> l = ChoiceWeights(n, below), g = ChoiceWeights(n, above);
      std::discrete_distribution<size_t> draw(l.begin(), l.end());
      size_t best = draw(rng);
      for (int c = 1; c < options.candidates; ++c) {
        const size_t i = draw(rng);
        if (l[i] / g[i] > l[best] / g[best]) best = i;
      }
      out.push_back(static_cast<double>(best));
      continue;
    }
    const Range r = RangeOf(d);
    for (double& v : below) v = ToModel(r, v);
    for (double& v : above) v = ToModel(r, v);
    const Parzen l(r, below), g(r, above);
    double best = l.Draw(rng), best_ratio = l.Density(best) / g.Density(best);
    for (int c = 1; c < options.candidates; ++c) {
      const double x = l.Draw(rng);
      const double ratio = l.Density(x) / g.Density(x);
      if (ratio > best_ratio) best = x, best_ratio = ratio;
    }
    out.push_back(FromModel(r, best));
  }
  return out;
}

}  // namespace gpuherd::pipeline
