// The input side of `kamera chat`: lines from a terminal with line editing and history (Debian's
// libedit, its readline interface), or from a pipe line by line; and Ctrl-C, which stops the
// reply being generated (the conversation keeps what was said) and, at the prompt, ends the chat.
#pragma once

#include <atomic>
#include <string>

namespace kamera::cli {

class ChatInput {
 public:
  // history_file: where the terminal's history is read from and kept ("" : not kept).
  explicit ChatInput(std::string history_file);
  ~ChatInput();
  ChatInput(const ChatInput&) = delete;
  ChatInput& operator=(const ChatInput&) = delete;

  bool tty() const { return tty_; }
  // One message: a line, with '\' continuations joined by newlines; false at the end of input.
  bool read_message(std::string& out);

  // While a reply is generated: Ctrl-C sets the flag this returns (the generation loop stops at
  // its next token) instead of ending the program.
  void begin_reply();
  void end_reply();
  const std::atomic<bool>* cancel_flag() const;

 private:
  bool read_line(const char* prompt, std::string& line);
  std::string history_file_;
  bool tty_ = false;
};

}  // namespace kamera::cli
