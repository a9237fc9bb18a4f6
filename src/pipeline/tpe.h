// Tree-structured Parzen estimator (Bergstra et al. 2011, as Optuna's
// default sampler): a pure suggestion of the next point of a sweep from the
// points already scored, without I/O or clock, so a seed gives the same
// sequence everywhere.
//
// After `startup` random points, the scored points are split into the best
// ceil(gamma · n) (at most 25) and the rest. Per parameter, each part becomes
// a Parzen density (a Gaussian at every value, widths from the neighbours'
// distances, plus the uniform prior; for a choice, smoothed counts) and the
// next value is, of `candidates` draws from the good density l, the one with
// the highest l(x) / g(x). Log-uniform parameters are modelled in log space,
// integers as reals rounded at the end.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "pipeline/early_stop.h"
#include "pipeline/spec.h"

namespace gpuherd::pipeline {

struct TpeOptions {
  int startup = 5;      // random points before the model is used (Optuna: 10; 5 did better on 30 seeds)
  int candidates = 24;  // draws from l(x) per parameter
  double gamma = 0.25;  // the share of scored points counted as good (Hyperopt's; Optuna's 0.1 lost more seeds)
};

// One scored point: each parameter's value (reals as numbers, a choice as its
// index, an integer as itself) and its objective.
struct TpeTrial {
  std::vector<double> values;
  double objective = 0;
};

// The next point's values, in the order of `params`, drawn with `rng`.
std::vector<double> TpeSuggest(const std::vector<Distribution>& params, const std::vector<TpeTrial>& trials,
                               ObjectiveMode mode, const TpeOptions& options, std::mt19937_64& rng);

// A point drawn independently from each parameter's prior (the random sampler).
std::vector<double> RandomSuggest(const std::vector<Distribution>& params, std::mt19937_64& rng);

}  // namespace gpuherd::pipeline
