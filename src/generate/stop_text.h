// Stop strings over text that grows as tokens are decoded: what may be shown now, and where the
// text ends. A suffix that could be the beginning of a stop string is held back until the text
// after it shows that it is not one (then it is shown) or that it is (then the text is cut
// exactly before the stop and nothing of it is ever shown).
//
//   StopText s({"\n\n", "END"});
//   out += s.push("Hello EN");   // "Hello " ("EN" held)
//   out += s.push("D of it");    // "" and s.stopped(): the text is "Hello "
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kamera {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops = {});
  // Appends text (whole UTF-8 characters); returns what may be shown now. After a stop string
  // appears, stopped() is true, the text ends before it, and push returns nothing more.
  std::string push(std::string_view s);
  // The held-back text, when the text ends without a stop.
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that ended the text (empty until stopped()).
  const std::string& matched() const { return matched_; }
  // The text so far (cut before the stop once stopped), shown or held.
  const std::string& text() const { return text_; }
  size_t shown() const { return shown_; }

 private:
  size_t held_suffix() const;

  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_;
  size_t shown_ = 0;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace kamera
