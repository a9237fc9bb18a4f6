// gpuherd dashboard [--read-only]: prints the address of the web dashboard
// the daemon serves on its TCP port. Where this user can read the API token,
// the address carries it after '#' (never sent to the server; the page keeps
// it in the browser's storage), so that the page's actions work.
#include <charconv>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "http/token.h"
#include "host/host.h"

namespace gpuherd::cli {

void AddDashboardCommand(CLI::App& app, CommandContext* ctx) {
  auto read_only = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("dashboard", "Print the address of the web dashboard (with the API token "
                                                  "where this user may read it)");
  cmd->add_flag("--read-only", *read_only, "Leave the token out: the page shows everything but cannot act");
  cmd->callback([ctx, read_only] {
    const StateDir dir = ctx->dir();
    DaemonClient client(dir, 3000);
    if (auto health = client.Get("/v1/health"); !health.ok()) return ctx->Fail(health.status());
    auto text = host::NewHost()->ReadFile(dir.port_path());
    if (!text.ok()) return ctx->Fail(text.status().Annotate("cannot read the daemon's port"));
    int port = 0;
    const char* begin = text->data();
    auto [end, ec] = std::from_chars(begin, begin + text->size(), port);
    (void)end;
    if (ec != std::errc() || port <= 0) {
      return ctx->Fail(FailedPrecondition("the daemon serves no TCP port (" + dir.port_path() +
                                          "); start it with --port P to open the dashboard"));
    }
    std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
    if (!*read_only) {
      auto token = http::ReadToken(dir);
      if (token.ok()) {
        url += "#token=" + *token;
      } else {
        std::fprintf(stderr, "gpuherd: %s; the page is read-only\n", PrintableLines(token.status().message()).c_str());
      }
    }
    std::printf("%s\n", url.c_str());
  });
}

}  // namespace gpuherd::cli
