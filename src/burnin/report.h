// Pictures of burn-in runs for people: the temperature curve as SVG, and a
// self-contained HTML report (no scripts, no external files) of several runs.
#pragma once

#include <string>
#include <vector>

#include "burnin/result.h"

namespace gpuherd::burnin {

// A line chart of the run's curve: temperature (left axis) with the card's
// slowdown temperature as a dashed line, power (right axis), time along the
// bottom. A run without readings gives a chart that says so.
std::string TemperatureCurveSvg(const BurnInRun& run, int width = 720, int height = 240);

// A ranked table of the runs (best score first; runs that could not run or
// were stopped last), then per GPU its checks, errors, rates, throughput
// ratios, score factors and temperature curve.
std::string RenderHtmlReport(const std::vector<BurnInRun>& runs);

}  // namespace gpuherd::burnin
