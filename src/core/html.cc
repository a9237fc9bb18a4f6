#include "core/html.h"

namespace gpuherd {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
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
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace gpuherd
