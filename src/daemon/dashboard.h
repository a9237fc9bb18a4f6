// The web dashboard's files (web/dashboard/), compiled into the binary at
// build time, and uPlot from the pipeline report's embedded copy. Served at
// "/" and "/assets/..." on the API's TCP port without the token: the page
// holds no data of its own; everything it shows comes from /v1, where reads
// are open and every action needs the token (see routes/).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "http/server.h"

namespace gpuherd::daemon {

struct DashboardFile {
  std::string_view path;          // "/", "/assets/dashboard.js", ...
  std::string_view content_type;  // with charset for text
  std::string_view body;
};

// Every file of the dashboard; a file with an empty body (uPlot in a build
// without npm) is still listed, and the page says its charts are missing.
std::vector<DashboardFile> DashboardFiles();

// The response for a request of the dashboard's paths ("/", "/index.html",
// "/assets/*"); nullopt for any other path, which the API then handles.
// GET and HEAD only (405 otherwise); an unknown asset is a 404.
std::optional<http::Response> ServeDashboard(const http::Request& request);

}  // namespace gpuherd::daemon
