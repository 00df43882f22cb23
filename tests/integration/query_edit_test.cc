// A CEP query edited on the running bus, end to end with the real `cepbus`:
// a stream of order pairs replayed over AMQP, the pairing query's WITHIN
// widened mid-stream by a PUT on the admin API, of the query or of its whole
// assembly (a redeploy). The composites the
// subscriber gets must be the narrower query's up to the change and the
// wider one's from it on — a pair open across the change found from the
// state the narrower query kept — none lost, none twice; /api/queries says
// what the edit carried over. Then the PUTs the API refuses.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "services/protocols/amqp/message_mapping.h"
#include "tests/integration/order_stream.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using nlohmann::json;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::client;
using testing::reservedPort;

constexpr const char* kTokenEnv = "CEPBUS_QUERY_EDIT_TOKEN";
constexpr const char* kToken = "query-edit-token";

// Pair p opens at 100p and closes `gap(p)` later: 5 for an even p, 50 for
// an odd one, so that WITHIN 10 pairs the even ones only, WITHIN 60 all.
constexpr int64_t kNarrow = 10;
constexpr int64_t kWide = 60;
int64_t gap(int64_t p) { return p % 2 == 0 ? 5 : 50; }

proton::message openOf(int64_t p) {
  proton::message m;
  m.subject("Open");
  m.properties().put("ts", 100 * p);
  m.properties().put("pair", p);
  return m;
}

proton::message closeOf(int64_t p) {
  proton::message m;
  m.subject("Close");
  m.properties().put("ts", 100 * p + gap(p));
  m.properties().put("pair", p);
  return m;
}

std::string queryText(int64_t within) {
  return "PATTERN SEQ(Open a, Close b) WHERE a.pair = b.pair WITHIN " + std::to_string(within) +
         " STRATEGY skip_till_next_match RETURN Pair(a.pair)";
}

std::string queryXml(const std::string& name, int64_t within) {
  return "<query name=\"" + name +
         "\" engine=\"nfa\" input=\"orders.in\" output=\"pairs.out\">\n  <text>" +
         queryText(within) + "</text>\n</query>";
}

// The assembly as deployed (its query's WITHIN `within`), plus `more`.
std::string assemblyXml(int64_t within, const std::string& more = "") {
  return R"(<service-assembly name="cep">
    <service-unit name="detector" type="cep">
      )" +
         queryXml("pairs", within) + more + R"(
    </service-unit>
  </service-assembly>)";
}

std::string descriptor(int port) {
  return R"(<cepbus name="query-edit">
  <listeners><amqp host="127.0.0.1" port=")" +
         std::to_string(port) +
         R"(" allow-anonymous="true"/><http host="127.0.0.1" port="0" token-env=")" + kTokenEnv +
         R"("/>
  </listeners>
  <plugins><search-path>)" +
         CEPBUS_PLUGIN_DIR + R"(</search-path><plugin name="nfa"/></plugins>
  )" + assemblyXml(kNarrow) +
         R"(
</cepbus>
)";
}

struct Reply {
  int status = 0;
  json body;
};

// A PUT of `body` on `target`, with the token.
Reply put(int admin, const std::string& target, const std::string& body) {
  const std::string raw = testing::httpRequest(
      admin, "PUT", target, "Authorization: Bearer " + std::string(kToken) + "\r\n", body);
  Reply reply;
  if (raw.size() > 12) reply.status = std::stoi(raw.substr(9, 3));
  const size_t start = raw.find("\r\n\r\n");
  if (start != std::string::npos) reply.body = json::parse(raw.substr(start + 4), nullptr, false);
  return reply;
}

json queryEntry(int admin) {
  const std::string raw = testing::httpGet(admin, "/api/queries/cep.detector/pairs");
  const size_t start = raw.find("\r\n\r\n");
  return start == std::string::npos ? json() : json::parse(raw.substr(start + 4), nullptr, false);
}

// The pair a composite names; -1 for a message that is none.
int64_t pairOf(const testing::AmqpReceived& received) {
  const services::amqp::MappedEvent e = services::amqp::eventFromMessage(received.message);
  const Value* pair = e.event ? e.event->find(Symbol::intern("a_pair")) : nullptr;
  return pair != nullptr ? pair->asInt() : -1;
}

// The pairs of the composites the subscriber got, in arrival order.
std::vector<int64_t> receivedPairs(AmqpTestClient& subscriber) {
  return subscriber.read<std::vector<int64_t>>([&] {
    std::vector<int64_t> out;
    for (const testing::AmqpReceived& r : subscriber.received["pairs"]) out.push_back(pairOf(r));
    return out;
  });
}

// How the edit reaches the bus: a PUT of the query, or of its assembly.
enum class EditBy { kQuery, kAssembly };

class QueryEditByTest : public ::testing::TestWithParam<EditBy> {};

// The edit, as the PUT of the query answers it (the assembly's PUT answers
// it for each query it replaced).
json widen(int admin, EditBy by) {
  if (by == EditBy::kQuery) {
    const Reply edit = put(admin, "/api/queries/cep.detector/pairs", queryXml("pairs", kWide));
    EXPECT_EQ(edit.status, 200) << edit.body.dump();
    return edit.body;
  }
  const Reply redeploy = put(admin, "/api/assemblies/cep", assemblyXml(kWide));
  EXPECT_EQ(redeploy.status, 200) << redeploy.body.dump();
  const json& changed = redeploy.body.value("changed", json::array());
  EXPECT_EQ(changed.size(), 1u) << redeploy.body.dump();
  if (changed.size() != 1) return json();
  EXPECT_EQ(changed[0].value("query", ""), "pairs");
  EXPECT_EQ(changed[0].value("change", ""), "replaced");
  return changed[0].value("edit", json());
}

TEST_P(QueryEditByTest, AWiderWithinMidStreamFindsTheNarrowerMatchesBeforeAndTheWiderOnesAfter) {
  ::setenv(kTokenEnv, kToken, 1);
  constexpr int64_t kPairs = 40;
  constexpr int64_t kChange = 21;  // an odd pair: open across the change, closed 50 later
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-query-edit");
  ASSERT_TRUE(bus.start(descriptor(port), {port}));
  const int admin = bus.adminPort();
  ASSERT_NE(admin, 0) << bus.err();
  AmqpTestClient subscriber(client(port, "edit-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("pairs.out", "pairs", /*durable=*/false, /*credit=*/1000);
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["pairs"] == 1; }));
  AmqpTestClient publisher(client(port, "edit-pub"));
  ASSERT_TRUE(publisher.waitOpen());

  // Up to the change: every pair before kChange, and kChange's Open.
  std::vector<proton::message> before;
  for (int64_t p = 0; p < kChange; ++p) {
    before.push_back(openOf(p));
    before.push_back(closeOf(p));
  }
  before.push_back(openOf(kChange));
  publisher.send("orders.in", before);
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == before.size(); }));
  const auto consumed = [&] { return queryEntry(admin).value("consumed", uint64_t{0}); };
  ASSERT_TRUE(testing::waitUntil([&] { return consumed() == before.size(); })) << consumed();

  const json edit = widen(admin, GetParam());
  ASSERT_FALSE(edit.is_null()) << bus.err();
  EXPECT_EQ(edit.value("carried_over", false), true) << edit.dump();
  EXPECT_EQ(edit.value("from", ""), queryText(kNarrow));

  std::vector<proton::message> after{closeOf(kChange)};
  for (int64_t p = kChange + 1; p < kPairs; ++p) {
    after.push_back(openOf(p));
    after.push_back(closeOf(p));
  }
  publisher.send("orders.in", after);

  // The brute force: a pair is found by the query that sees its Close —
  // the narrower before the change, the wider after it — and the wider one
  // finds a pair open across the change when the narrower one still kept
  // its Open: within the narrower WITHIN of the newest event before it.
  const int64_t newest_before = 100 * kChange;
  std::vector<int64_t> expected;
  for (int64_t p = 0; p < kPairs; ++p) {
    const bool closed_before = p < kChange;
    const bool kept = closed_before || 100 * p >= newest_before - kNarrow;
    if (kept && gap(p) <= (closed_before ? kNarrow : kWide)) expected.push_back(p);
  }
  ASSERT_EQ(expected.back(), kPairs - 1);
  // The composites come out in order: the last pair's is the last one.
  ASSERT_TRUE(subscriber.waitFor([&] {
    const auto& got = subscriber.received["pairs"];
    return !got.empty() && pairOf(got.back()) == kPairs - 1;
  })) << bus.err();
  const std::vector<int64_t> got = receivedPairs(subscriber);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()).size(), got.size());  // none twice
  // The pair open across the change is there: the edit carried its Open over.
  EXPECT_NE(std::find(got.begin(), got.end(), kChange), got.end());

  const json entry = queryEntry(admin);
  ASSERT_TRUE(entry.contains("edited")) << entry.dump();
  EXPECT_EQ(entry["edited"].value("carried_over", false), true);
  EXPECT_EQ(entry["edited"].value("from", ""), queryText(kNarrow));
  EXPECT_EQ(entry.value("text", ""), queryText(kWide));
  EXPECT_NE(bus.err().find("query pairs edited; its partial matches and windows carried over"),
            std::string::npos)
      << bus.err();
  EXPECT_TRUE(bus.stop());
}

INSTANTIATE_TEST_SUITE_P(ByQueryAndByAssembly, QueryEditByTest,
                         ::testing::Values(EditBy::kQuery, EditBy::kAssembly),
                         [](const auto& info) {
                           return info.param == EditBy::kQuery ? "Query" : "Assembly";
                         });

TEST(QueryEditTest, ARedeployAddsAndRemovesQueriesAndRefusesAnythingElse) {
  ::setenv(kTokenEnv, kToken, 1);
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-redeploy");
  ASSERT_TRUE(bus.start(descriptor(port), {port}));
  const int admin = bus.adminPort();
  ASSERT_NE(admin, 0) << bus.err();
  const auto queries = [&] {
    const std::string raw = testing::httpGet(admin, "/api/queries");
    const json body = json::parse(raw.substr(raw.find("\r\n\r\n") + 4), nullptr, false);
    std::vector<std::string> names;
    for (const json& q : body.value("queries", json::array())) names.push_back(q.value("name", ""));
    return names;
  };

  // The same descriptor changes nothing.
  const Reply same = put(admin, "/api/assemblies/cep", assemblyXml(kNarrow));
  ASSERT_EQ(same.status, 200) << same.body.dump();
  EXPECT_TRUE(same.body.at("changed").empty()) << same.body.dump();
  EXPECT_EQ(same.body.at("kept"), json::array({"cep.detector/pairs"}));

  const Reply added =
      put(admin, "/api/assemblies/cep", assemblyXml(kNarrow, "\n      " + queryXml("more", kWide)));
  ASSERT_EQ(added.status, 200) << added.body.dump();
  EXPECT_EQ(added.body.at("changed").at(0).value("change", ""), "added") << added.body.dump();
  EXPECT_EQ(queries(), (std::vector<std::string>{"pairs", "more"}));

  // A unit's subscriptions are read when it is built: not changed in place.
  std::string other = assemblyXml(kNarrow);
  other.insert(other.find("      <query"), "      <subscribe address=\"extra\"/>\n");
  const Reply refused = put(admin, "/api/assemblies/cep", other);
  EXPECT_EQ(refused.status, 409) << refused.body.dump();
  EXPECT_NE(refused.body.value("error", "").find("its subscriptions differ"), std::string::npos)
      << refused.body.dump();
  EXPECT_EQ(queries(), (std::vector<std::string>{"pairs", "more"}));  // nothing changed

  const Reply removed = put(admin, "/api/assemblies/cep", assemblyXml(kNarrow));
  ASSERT_EQ(removed.status, 200) << removed.body.dump();
  EXPECT_EQ(removed.body.at("changed").at(0).value("change", ""), "removed");
  EXPECT_EQ(queries(), std::vector<std::string>{"pairs"});
  EXPECT_TRUE(bus.stop());
}

TEST(QueryEditTest, APutOfAnUnknownQueryOfAnotherNameOrOfABadQueryIsRefused) {
  ::setenv(kTokenEnv, kToken, 1);
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-query-edit-bad");
  ASSERT_TRUE(bus.start(descriptor(port), {port}));
  const int admin = bus.adminPort();
  ASSERT_NE(admin, 0) << bus.err();
  const std::string target = "/api/queries/cep.detector/pairs";

  const Reply unknown = put(admin, "/api/queries/cep.detector/nope", queryXml("nope", kWide));
  EXPECT_EQ(unknown.status, 404) << unknown.body.dump();
  EXPECT_NE(unknown.body.value("error", "").find("no query \"nope\""), std::string::npos)
      << unknown.body.dump();

  const Reply other = put(admin, target, queryXml("other", kWide));
  EXPECT_EQ(other.status, 400) << other.body.dump();
  EXPECT_NE(other.body.value("error", "").find("replaces it by a <query> of the same name"),
            std::string::npos)
      << other.body.dump();

  // The text on line 2 of the body: the error names it, and where in the text.
  const std::string bad =
      "<query name=\"pairs\" engine=\"nfa\" input=\"orders.in\" output=\"pairs.out\">\n"
      "  <text>PATTERN SEQ(Open a, Close b WITHIN 60</text>\n</query>";
  const Reply broken = put(admin, target, bad);
  EXPECT_EQ(broken.status, 400) << broken.body.dump();
  const std::string error = broken.body.value("error", "");
  EXPECT_NE(error.find("request body:2: <query name=\"pairs\">: "), std::string::npos) << error;
  EXPECT_NE(error.find("line 1, column"), std::string::npos) << error;

  // Nothing changed.
  const json entry = queryEntry(admin);
  EXPECT_FALSE(entry.contains("edited")) << entry.dump();
  EXPECT_EQ(entry.value("text", ""), queryText(kNarrow));
  EXPECT_TRUE(bus.stop());
}

}  // namespace
}  // namespace cepbus
