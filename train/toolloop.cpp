#include "train/toolloop.h"

#include <array>

#include "core/mix.h"
#include "jinja/chat_template.h"
#include "synthetic/vocab.h"

namespace kamera::train {

namespace {

// splitmix64 (its finalizer in core/mix.h): the same sequence on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() { return mix64_finalize(s += 0x9e3779b97f4a7c15ull); }
  int below(int n) { return int(next() % uint64_t(n)); }
  template <class T, size_t N>
  const T& pick(const std::array<T, N>& a) {
    return a[size_t(below(int(N)))];
  }
};

constexpr std::array<const char*, 32> kCities = {
    "Lima",    "Oslo",   "Paris",  "Cairo",  "Tokyo", "Quito",   "Dakar",  "Perth",
    "Sofia",   "Kyiv",   "Hanoi",  "Rome",   "Bern",  "Accra",   "Doha",   "Minsk",
    "Riga",    "Lagos",  "Delhi",  "Seoul",  "Porto", "Malmo",   "Cusco",  "Tunis",
    "Valetta", "Bergen", "Gdansk", "Havana", "Turin", "Nairobi", "Denver", "Austin"};
constexpr std::array<const char*, 12> kDirs = {"src", "docs", "data", "notes", "logs", "tests",
                                               "lib", "etc",  "home", "tmp",   "web",  "jobs"};
constexpr std::array<const char*, 24> kStems = {
    "report", "budget", "config", "readme", "orders", "invoice", "plan",   "summary",
    "draft",  "index",  "notes",  "ledger", "census", "survey",  "digest", "schedule",
    "agenda", "memo",   "log",    "list",   "roster", "table",   "sheet",  "record"};
constexpr std::array<const char*, 6> kExts = {"txt", "md", "csv", "json", "log", "yaml"};
constexpr std::array<const char*, 64> kWords = {
    "green",   "river",   "stone",   "silver",  "quiet",  "amber",   "north",  "winter",
    "copper",  "lantern", "harbor",  "maple",   "falcon", "velvet",  "orchid", "granite",
    "meadow",  "cedar",   "crystal", "ember",   "willow", "cobalt",  "summit", "prairie",
    "thunder", "marble",  "coral",   "saffron", "birch",  "glacier", "hollow", "ivory",
    "jasper",  "juniper", "kestrel", "lotus",   "mosaic", "nectar",  "onyx",   "pepper",
    "quartz",  "raven",   "sable",   "tundra",  "umber",  "violet",  "walnut", "yarrow",
    "zephyr",  "anchor",  "beacon",  "canyon",  "delta",  "fable",   "garnet", "hazel",
    "island",  "jade",    "kernel",  "lemon",   "mango",  "nickel",  "olive",  "plum"};
constexpr std::array<const char*, 10> kMonths = {"March",  "April", "May",  "June",    "July",
                                                 "August", "May",   "June", "October", "January"};
constexpr std::array<const char*, 8> kStatus = {"shipped", "delayed",   "packed",  "returned",
                                                "paid",    "cancelled", "on hold", "delivered"};
constexpr std::array<const char*, 8> kSky = {"sunny", "cloudy", "rainy", "windy",
                                             "foggy", "snowy",  "clear", "stormy"};

std::string num(Rng& r, int lo, int hi) {
  return std::to_string(lo + r.below(hi - lo + 1));
}

std::string phrase(Rng& r) {
  return std::string(r.pick(kWords)) + " " + r.pick(kWords) + " " + r.pick(kWords);
}

// One tool use: how the task names it, the call, and the observation's sentences (the key one at
// `key`).
struct Task {
  std::string ask, tool, arg, value;
  std::vector<std::string> obs;
  int key = 0;
};

std::string filler(Rng& r) {
  switch (r.below(6)) {
    case 0:
      return "The request took " + num(r, 2, 950) + " ms and returned " + num(r, 1, 80) + " rows.";
    case 1:
      return "A note from " + std::string(r.pick(kCities)) + " mentions the " + r.pick(kWords) +
             " " + r.pick(kStems) + ".";
    case 2:
      return "There were " + num(r, 2, 60) + " other matches in " + r.pick(kDirs) + ".";
    case 3:
      return "The cache was " + std::string(r.below(2) ? "warm" : "cold") + " for " +
             num(r, 1, 40) + " seconds.";
    case 4:
      return "Version " + num(r, 1, 9) + "." + num(r, 0, 30) + " was used for the " +
             r.pick(kWords) + " step.";
    default:
      return "The owner is " + std::string(r.pick(kWords)) + " " + r.pick(kStems) + " team.";
  }
}

Task make_task(Rng& r) {
  Task t;
  switch (r.below(4)) {
    case 0: {
      t.tool = "read_file", t.arg = "path";
      t.value = std::string(r.pick(kDirs)) + "/" + r.pick(kStems) + "_" + num(r, 1, 99) + "." +
                r.pick(kExts);
      t.ask = "read the file " + t.value;
      t.obs.push_back("The file " + t.value + " says the " + r.pick(kWords) + " " + r.pick(kStems) +
                      " is due on " + r.pick(kMonths) + " " + num(r, 1, 28) + ".");
      break;
    }
    case 1: {
      t.tool = "weather", t.arg = "city";
      t.value = r.pick(kCities);
      t.ask = "get the weather in " + t.value;
      t.obs.push_back("In " + t.value + " it is " + r.pick(kSky) + " and " + num(r, -5, 35) +
                      " degrees with wind of " + num(r, 1, 60) + " km/h.");
      break;
    }
    case 2: {
      t.tool = "lookup", t.arg = "id";
      t.value = std::string(1, char('A' + r.below(26))) + char('A' + r.below(26)) + "-" +
                num(r, 1000, 9999);
      t.ask = "look up the order " + t.value;
      t.obs.push_back("Order " + t.value + " was " + r.pick(kStatus) + " to " + r.pick(kCities) +
                      " for " + num(r, 3, 900) + " dollars.");
      break;
    }
    default: {
      t.tool = "search", t.arg = "query";
      t.value = phrase(r);
      t.ask = "search for \"" + t.value + "\"";
      t.obs.push_back("The top result for " + t.value + " is the " + r.pick(kStems) + " page of " +
                      r.pick(kCities) + " from " + num(r, 1990, 2026) + ".");
      break;
    }
  }
  const int extra = 1 + r.below(3);
  for (int i = 0; i < extra; ++i) t.obs.push_back(filler(r));
  t.key = r.below(int(t.obs.size()));
  std::swap(t.obs[0], t.obs[size_t(t.key)]);
  return t;
}

std::string call_of(const Task& t) {
  return "<tool_call>\n{\"name\": \"" + t.tool + "\", \"arguments\": {\"" + t.arg + "\": \"" +
         t.value + "\"}}\n</tool_call>";
}

std::string observation(const Task& t) {
  std::string s;
  for (size_t i = 0; i < t.obs.size(); ++i) s += (i ? " " : "") + t.obs[i];
  return s;
}

}  // namespace

std::vector<LoopMessage> make_tool_loop(LoopSplit split, uint64_t index) {
  Rng r{mix64_finalize(2 * index + uint64_t(split) + 0x51ec)};
  const int n = 2 + r.below(3);
  std::vector<Task> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(make_task(r));
  std::string ask = "Please ";
  for (int i = 0; i < n; ++i)
    ask += (i == 0 ? "" : i + 1 == n ? ", and " : ", ") + tasks[size_t(i)].ask;
  ask += ", then quote what the tools said.";
  std::vector<LoopMessage> m = {
      {"system",
       "You are a careful agent. Call one tool at a time with <tool_call> and quote the tool "
       "results exactly."},
      {"user", ask}};
  for (int i = 0; i < n; ++i) {
    const Task& t = tasks[size_t(i)];
    std::string say = i == 0 ? "I will " + t.ask + " first.\n"
                             : "The tool said: \"" +
                                   tasks[size_t(i - 1)].obs[size_t(tasks[size_t(i - 1)].key)] +
                                   "\"\nNext I will " + t.ask + ".\n";
    m.push_back({"assistant", say + call_of(t)});
    m.push_back({"tool", observation(t)});
  }
  std::string fin = "Here is what the tools said:";
  for (const Task& t : tasks) fin += "\n- " + t.tool + ": \"" + t.obs[size_t(t.key)] + "\"";
  m.push_back({"assistant", fin});
  return m;
}

std::string render_chatml(const std::vector<LoopMessage>& msgs, bool generation_prompt) {
  std::string s;
  for (const LoopMessage& m : msgs)
    s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (generation_prompt) s += "<|im_start|>assistant\n";
  return s;
}

std::string loop_corpus(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    for (const LoopMessage& m : make_tool_loop(LoopSplit::Train, uint64_t(i)))
      s += m.role + " " + m.content + " ";
  // No piece holds a newline: each one is a token of its own, so a message's tokens do not
  // depend on what is before or after it (the server renders and tokenizes the whole prompt).
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

Result<Tokenizer::Vocab> loop_vocab(int n_vocab) {
  auto v = build_synthetic_vocab(n_vocab - 2, loop_corpus(400));
  if (!v.ok()) return v.error();
  for (const char* c : {"<|im_start|>", "<|im_end|>"}) {
    v->pieces.push_back(c);
    v->scores.push_back(0.0f);
    v->types.push_back(TokenType::Control);
  }
  v->eos = n_vocab - 1;
  v->eot = n_vocab - 1;
  v->add_bos = false;
  v->add_space_prefix = false;
  v->chat_template = std::string(ChatTemplate::builtin_source("chatml"));
  return *v;
}

LoopTokens tokenize_loop(const Tokenizer& tok, const std::vector<LoopMessage>& msgs) {
  // The server's context starts with BOS (its anchor), whatever the vocabulary's add_bos says.
  LoopTokens out{{tok.bos()}, {0}};
  const Tokenizer::EncodeOptions opts{false, true};
  for (const LoopMessage& m : msgs) {
    const bool a = m.role == "assistant";
    // The header is the prompt's, the content and <|im_end|> the answer's (what the server's
    // model generates after "<|im_start|>assistant\n"); the newline after it is the prompt's.
    auto head = tok.tokenize("<|im_start|>" + m.role + "\n", opts);
    auto body = tok.tokenize(m.content + "<|im_end|>", opts);
    auto tail = tok.tokenize("\n", opts);
    for (auto* part : {&head, &body, &tail})
      for (int32_t id : *part) {
        out.ids.push_back(id);
        out.assistant.push_back(a && part == &body);
      }
  }
  return out;
}

}  // namespace kamera::train
