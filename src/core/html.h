// Text made safe inside HTML: the one escaping used by every report page.
#pragma once

#include <string>
#include <string_view>

namespace gpuherd {

// & < > " ' as entities, so the text is safe in element content and in
// attribute values quoted with either quote; control characters other than
// newline and tab (C0, DEL and C1) become U+FFFD.
std::string HtmlEscape(std::string_view text);

}  // namespace gpuherd
