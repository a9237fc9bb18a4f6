// Text that a user or a job wrote, made safe to print where other users (and
// root) read it: on a terminal, in a Markdown file, in a CSV file. The daemon
// runs for every user of a machine, so a job's name, its cwd or a metric name
// must never carry an escape sequence (to hide text, retitle a window, move
// the cursor) to someone else's terminal. One escaping for all of them.
#pragma once

#include <string>
#include <string_view>

namespace gpuherd {

// Every control character (C0 such as NUL, BEL, ESC, CR, LF and TAB; DEL;
// the C1 range U+0080..U+009F) becomes a visible escape ("\0", "\e", "\r",
// "\n", "\t", "\x07", "\x7f", "\u009b"), and so does every byte that is not
// part of well-formed UTF-8 ("\xff"), since a terminal that is not in UTF-8
// mode reads a lone 0x9b as CSI. Anything else, UTF-8 included, is kept.
std::string Printable(std::string_view text);
// Printable, except that line feeds are kept: a multi-line message.
std::string PrintableLines(std::string_view text);
// Whether Printable(text) differs from `text`. Cheap for plain ASCII, which
// most text is.
bool NeedsEscape(std::string_view text);

// A cell or a line of Markdown: printable, with "\" and "|" escaped so that
// the text can neither end a table cell nor escape the next character, and
// line breaks shown as "\n" so that it cannot end a table row.
std::string MarkdownText(std::string_view text);

// A CSV field (RFC 4180): printable (no raw control character, hence no line
// break), and quoted, with quotes doubled, when it holds a comma or a quote.
std::string CsvField(std::string_view text);

}  // namespace gpuherd
