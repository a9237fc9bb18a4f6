#include "core/html.h"

namespace gpuherd {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // A control character has no place in an HTML page (and one from a
        // hostile file could garble it): shown as the replacement character.
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
          out += "&#xfffd;";
        } else if (static_cast<unsigned char>(c) == 0xc2 && i + 1 < text.size() &&
                   static_cast<unsigned char>(text[i + 1]) >= 0x80 && static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
          out += "&#xfffd;";  // a C1 control (U+0080..U+009F), CSI among them
          ++i;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace gpuherd
