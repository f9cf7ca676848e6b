// Bounds at the HTTP edge, from the second hostile review (issue 24; docs/SERVER.md, "Hostile
// clients"), on loopback: bounded parsing (finding 1), per-peer limits (4), and the smaller
// findings (6): recall's 64-bit range, half-closed requests, strict types, window completions with
// chunk parts, the HTTP layer's refusals in /metrics, and malformed framing answered at once.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/server.h"
#include "support/raw_http.h"
#include "support/served.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

using tiny::Served;

std::string code_of(const std::string& raw) {
  const std::string r = rawhttp::final_response(raw);
  const json j = json::parse(r.substr(std::min(r.size(), r.find("\r\n\r\n") + 4)), nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].value("code", "") : "";
}

std::string nested(int n) {
  return std::string(size_t(n), '[') + std::string(size_t(n), ']');
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const json kCompletion = {{"prompt", "Once upon a time"}, {"max_tokens", 4}};

}  // namespace

// Finding 1: arrays nested 131,250 deep in a prompt, or in any field of a window route (the
// window need not exist), overflowed the stack (SIGSEGV). Now 400 json_too_deep, and the server
// lives on.
TEST(ServerBounds, DeeplyNestedBodiesAreRefusedNamingTheLimit) {
  Served s;
  const std::string deep = nested(131250);
  for (const auto& [path, body] :
       {std::pair<std::string, std::string>{"/v1/completions", R"({"prompt": )" + deep + "}"},
        {"/v1/windows/w1/append", R"({"x": )" + deep + "}"},
        {"/v1/windows", R"({"rank": )" + deep + "}"},
        {"/v1/chat/completions", R"({"messages": )" + deep + "}"}}) {
    const std::string r = rawhttp::exchange(s.port(), rawhttp::post(path, body), false, 20000);
    EXPECT_EQ(rawhttp::status_of(r), 400) << path;
    EXPECT_EQ(code_of(r), "json_too_deep") << path;
    EXPECT_NE(r.find("64"), std::string::npos) << "the refusal names the limit";
    ASSERT_TRUE(s.healthy()) << path;
  }
  // Values past the limit (checked while parsing, in an unknown field too).
  ServerOptions o;
  o.max_json_values = 1000;
  Served small(o);
  std::string many = R"({"prompt": "Once", "junk": [0)";
  for (int i = 0; i < 2000; ++i) many += ",0";
  const std::string r =
      rawhttp::exchange(small.port(), rawhttp::post("/v1/completions", many + "]}"));
  EXPECT_EQ(rawhttp::status_of(r), 400);
  EXPECT_EQ(code_of(r), "json_too_many_values");
}

// Finding 6: recall's "at" was narrowed to 32 bits, so 4294967296 landed at slot 0.
TEST(ServerBounds, RecallAtIsRangeCheckedIn64Bits) {
  Served s;
  auto [st, up] = s.call("POST", "/v1/chunks", {{"tokens", {5, 6, 7, 8}}});
  ASSERT_EQ(st, 201);
  auto [stw, w] = s.call("POST", "/v1/windows", json::object());
  const std::string base = "/v1/windows/" + w["id"].get<std::string>();
  ASSERT_EQ(s.call("POST", base + "/append", {{"chunk", up["id"]}}).first, 200);
  ASSERT_EQ(s.call("POST", base + "/evict", {{"slot", 0}}).first, 200);
  for (const json& at : {json(4294967296LL), json(-1), json(1), json("0"), json(0.5)}) {
    auto [str, body] = s.call("POST", base + "/recall", {{"chunk", up["id"]}, {"at", at}});
    EXPECT_EQ(str, 400) << at.dump() << " " << body.dump();
  }
  auto [ok, body] = s.call("POST", base + "/recall", {{"chunk", up["id"]}, {"at", 0}});
  EXPECT_EQ(ok, 200) << body.dump();
}

// Finding 6: a client that sends its whole request and then shutdown(SHUT_WR) got no answer from
// /v1/completions (0 of 30) and from /tokenize (12 of 50).
TEST(ServerBounds, HalfClosedRequestsAreAnswered) {
  Served s;
  for (const auto& [path, body] : {std::pair<std::string, json>{"/v1/completions", kCompletion},
                                   {"/tokenize", {{"content", "Once upon a time"}}},
                                   {"/v1/windows", json::object()}}) {
    int answered = 0;
    for (int i = 0; i < 10; ++i) {
      const std::string r = rawhttp::exchange(s.port(), rawhttp::post(path, body.dump()), true);
      answered += rawhttp::status_of(rawhttp::final_response(r)) / 100 == 2;
    }
    EXPECT_EQ(answered, 10) << path;
  }
  // A streamed completion too.
  json streamed = kCompletion;
  streamed["stream"] = true;
  const std::string r =
      rawhttp::exchange(s.port(), rawhttp::post("/v1/completions", streamed.dump()), true);
  EXPECT_EQ(rawhttp::status_of(rawhttp::final_response(r)), 200);
  EXPECT_NE(r.find("data: [DONE]"), std::string::npos);
}

// Finding 6: "stream": "true" was silently not streamed, window "form_on_miss": "no" was read as
// true. A string is not a boolean anywhere, and a wrong type is refused by name.
TEST(ServerBounds, StrictTypesEverywhere) {
  Served s;
  auto refused = [&](const std::string& path, const json& body, const std::string& field) {
    auto [st, b] = s.call("POST", path, body);
    EXPECT_EQ(st, 400) << path << " " << body.dump();
    EXPECT_NE(b.dump().find(field), std::string::npos) << b.dump();
  };
  refused("/v1/completions", {{"prompt", "Once"}, {"stream", "true"}}, "stream");
  refused("/v1/completions", {{"prompt", "Once"}, {"deep_half", 1}}, "deep_half");
  refused("/v1/windows", {{"form_on_miss", "no"}}, "form_on_miss");
  refused("/v1/windows", {{"deep_half", "yes"}}, "deep_half");
  refused("/tokenize", {{"content", "x"}, {"add_special", "true"}}, "add_special");
  auto [stw, w] = s.call("POST", "/v1/windows", {{"form_on_miss", false}});
  ASSERT_EQ(stw, 201) << w.dump();
  const std::string base = "/v1/windows/" + w["id"].get<std::string>();
  refused(base + "/append", {{"tokens", {5, 6, 7}}, {"front", "true"}}, "front");
  ASSERT_EQ(s.call("POST", base + "/append", {{"tokens", {5, 6, 7}}}).first, 200);
  refused(base + "/evict", {{"end", 1}}, "end");
  refused(base + "/reorder", {{"order", {0}}, {"mode", 3}}, "mode");
}

// Finding 6: window completions dropped the chunk parts of their prompt. They are now prefilled
// after the window's content, in order, and reported.
TEST(ServerBounds, WindowCompletionsKeepChunkParts) {
  Served s;
  auto [st, up] = s.call("POST", "/v1/chunks", {{"tokens", {9, 8, 7, 6, 5}}});
  ASSERT_EQ(st, 201);
  auto [stw, w] = s.call("POST", "/v1/windows", json::object());
  const std::string base = "/v1/windows/" + w["id"].get<std::string>();
  ASSERT_EQ(s.call("POST", base + "/append", {{"tokens", {11, 12, 13}}}).first, 200);
  const json prompt = json::array({{{"type", "chunk"}, {"id", up["id"]}}, " And", " then"});
  auto [stc, c] = s.call("POST", base + "/completions", {{"prompt", prompt}, {"max_tokens", 1}});
  ASSERT_EQ(stc, 200) << c.dump();
  const json& segs = c["usage"]["kamera"]["segments"];
  ASSERT_EQ(segs.size(), 2u) << segs.dump();  // the window's slot, then the chunk part
  EXPECT_EQ(segs[1]["id"], up["id"]);
  EXPECT_EQ(segs[1]["source"], "reprefilled");
  EXPECT_EQ(segs[1]["position"], segs[0]["position"].get<int>() + 3);
  // prompt tokens: BOS, the window's 3, the chunk's 5, the query's
  const int64_t query = c["usage"]["prompt_tokens"].get<int64_t>() - 1 - 3 - 5;
  EXPECT_GE(query, 1);
  // The same prompt without the chunk part answers with fewer prompt tokens.
  auto [st2, c2] =
      s.call("POST", base + "/completions", {{"prompt", " And then"}, {"max_tokens", 1}});
  ASSERT_EQ(st2, 200);
  EXPECT_EQ(c2["usage"]["prompt_tokens"].get<int64_t>(), 1 + 3 + query);
}

// Finding 6: kamera_responses_4xx_total missed the HTTP layer's own 431, 413 and 400.
TEST(ServerBounds, TheFrontsRefusalsAreCounted) {
  Served s;
  const double before = s.metric("kamera_responses_4xx_total");
  rawhttp::exchange(
      s.port(), "GET /health HTTP/1.1\r\nX: " + std::string(20 << 10, 'a') + "\r\n\r\n");  // 431
  rawhttp::exchange(s.port(),
                    "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: 999999999999\r\n\r\n");              // 413
  rawhttp::exchange(s.port(), "GET /health HTTP/1.1\r\nHost x\r\n\r\n");  // 400
  rawhttp::exchange(s.port(), "GET /health HTTP/1.1\nHost: x\n\n");       // 400 (bare LF)
  EXPECT_EQ(s.metric("kamera_responses_4xx_total") - before, 4);
}

// Finding 6: a chunk-size overflow and bare-LF request lines got no answer (the latter only after
// the 10 s head timeout), "Transfer-Encoding: gzip, chunked" was read with the gzip ignored,
// and obs-fold headers were accepted.
TEST(ServerBounds, MalformedFramingIsRefusedAtOnce) {
  Served s;
  auto timed = [&](const std::string& raw, int want, int or_this = 0) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r = rawhttp::exchange(s.port(), raw, false, 12000);
    const int got = rawhttp::status_of(r);
    EXPECT_TRUE(got == want || (or_this && got == or_this))
        << got << " for " << raw.substr(0, 80) << "\n"
        << r.substr(0, 200);
    EXPECT_LT(seconds_since(t0), 2.0) << raw.substr(0, 80);
  };
  const std::string chunked =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  timed(chunked + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{}\r\n", 400);
  timed("GET /health HTTP/1.1\nHost: x\n\n", 400);
  timed("GET /health HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400);
  const std::string body = kCompletion.dump();
  timed(chunked + "Transfer-Encoding: gzip, chunked\r\n\r\n" +
            fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body),
        501);
  // (Beast refuses a repeated chunked itself)
  timed(chunked + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501,
        400);
  timed("GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400);
  // A well-formed chunked body still works.
  const std::string ok =
      rawhttp::exchange(s.port(), chunked + "Transfer-Encoding: chunked\r\n\r\n" +
                                      fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
  EXPECT_EQ(rawhttp::status_of(ok), 200) << ok.substr(0, 200);
}

// Finding 4: the 1,024-connection cap was global: one peer holding 1,030 connections made another
// client's /health fail 10 of 10 times with 503. Now each address, and each API key, has a share.
TEST(ServerBounds, OnePeerCannotTakeEveryConnection) {
  ServerOptions o;
  o.max_connections = 64;
  o.max_peer_connections = 16;
  Served s(o);
  std::vector<int> held;
  for (int i = 0; i < 70; ++i) held.push_back(rawhttp::connect_to(s.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int ok = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string r = rawhttp::exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                                            false, 3000, "127.0.0.2");
    ok += rawhttp::status_of(r) == 200;
  }
  EXPECT_EQ(ok, 10);
  // The flooding address itself is refused past its share, with a JSON 503.
  const std::string r = rawhttp::exchange(s.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(rawhttp::status_of(r), 503);
  EXPECT_NE(r.find("too_many_connections"), std::string::npos) << r;
  for (int fd : held)
    if (fd >= 0) ::close(fd);
}

// Per API key: requests in flight (a request counts from its head until its answer), so that one
// key cannot hold every worker or every body read; another key is unaffected.
TEST(ServerBounds, OneKeyCannotTakeEveryWorker) {
  ServerOptions o;
  o.api_keys = {"key-a-0123456789", "key-b-0123456789"};
  o.max_client_inflight = 2;
  Served s(o);
  // Key a: two requests whose bodies never come hold its two slots.
  std::vector<int> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(rawhttp::connect_to(s.port()));
    ASSERT_TRUE(rawhttp::send_all(slow.back(),
                                  "POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                  "key-a-0123456789\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 100\r\n\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto [st_a, a] = s.call("POST", "/tokenize", {{"content", "x"}}, "key-a-0123456789");
  auto [st_b, b] = s.call("POST", "/tokenize", {{"content", "x"}}, "key-b-0123456789");
  EXPECT_EQ(st_a, 429) << a.dump();
  EXPECT_EQ(a["error"]["code"], "quota_exceeded");
  EXPECT_EQ(st_b, 200) << b.dump();
  for (int fd : slow) ::close(fd);
  // Once they are gone, key a is served again.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(s.call("POST", "/tokenize", {{"content", "x"}}, "key-a-0123456789").first, 200);
}
