#include "tools/chat_line.h"

#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace kamera::cli {

namespace {

std::atomic<bool> g_replying{false};
std::atomic<bool> g_cancel{false};

// Ctrl-C: stops the reply being generated, or at the prompt ends the chat (the terminal is back
// in its normal mode: libedit restores it before passing the signal on).
void on_interrupt(int) {
  if (g_replying.load()) {
    g_cancel = true;
    return;
  }
  static const char bye[] = "\n";
  (void)!write(STDERR_FILENO, bye, sizeof bye - 1);
  _exit(130);
}

}  // namespace

ChatInput::ChatInput(std::string history_file) : history_file_(std::move(history_file)) {
  tty_ = isatty(STDIN_FILENO);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt is interrupted
  sigaction(SIGINT, &sa, nullptr);
  if (!tty_) return;
  rl_outstream = stderr;  // stdout carries the replies only
  using_history();
  if (!history_file_.empty()) read_history(history_file_.c_str());
}

ChatInput::~ChatInput() {
  signal(SIGINT, SIG_DFL);
}

bool ChatInput::read_line(const char* prompt, std::string& line) {
  if (!tty_) {
    if (!std::getline(std::cin, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  char* got = readline(prompt);
  if (!got) return false;
  line = got;
  std::free(got);
  return true;
}

bool ChatInput::read_message(std::string& out) {
  out.clear();
  std::string line;
  const char* prompt = "> ";
  while (read_line(prompt, line)) {
    const bool more = !line.empty() && line.back() == '\\';
    if (more) line.pop_back();
    out += line;
    if (!more) {
      if (tty_ && !out.empty()) {
        add_history(out.c_str());
        if (!history_file_.empty()) write_history(history_file_.c_str());
      }
      return true;
    }
    out += "\n";
    prompt = ". ";
  }
  return !out.empty();
}

void ChatInput::begin_reply() {
  g_cancel = false;
  g_replying = true;
}

void ChatInput::end_reply() {
  g_replying = false;
  g_cancel = false;
}

const std::atomic<bool>* ChatInput::cancel_flag() const {
  return &g_cancel;
}

}  // namespace kamera::cli
