// The Responses API's store (service/tenancy/response_store): per-tenant
// entries, a byte bound (least recently used first), a TTL, deletion, and
// ids that never repeat.

#include "service/tenancy/response_store.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace troupe;

namespace {

auto response(std::string text) -> stored_response {
  stored_response r;
  r.conversation.push_back({"user", "hello"});
  r.conversation.push_back({"assistant", text});
  r.response_json = R"({"id":"x","output_text":")" + text + "\"}";
  return r;
}

} // namespace

TEST_CASE("an entry is its tenant's: another tenant, or another id, finds nothing") {
  response_store store(1 << 20, 60);
  store.put("a", "resp_1", response("one"), 0);
  REQUIRE(store.get("a", "resp_1", 1) != nullptr);
  CHECK(store.get("a", "resp_1", 1)->conversation.back().content == "one");
  CHECK(store.get("b", "resp_1", 1) == nullptr);
  CHECK(store.get("", "resp_1", 1) == nullptr);
  CHECK(store.get("a", "resp_2", 1) == nullptr);
  // A tenant name and an id cannot be spliced into another pair's key.
  store.put("ab", "c", response("two"), 0);
  CHECK(store.get("a", "bc", 1) == nullptr);
  CHECK_FALSE(store.erase("b", "resp_1", 1));
  CHECK(store.erase("a", "resp_1", 1));
  CHECK(store.get("a", "resp_1", 1) == nullptr);
  CHECK(store.entries() == 1);
}

TEST_CASE("past the TTL an entry is gone") {
  response_store store(1 << 20, 10);
  store.put("a", "resp_1", response("one"), 100);
  CHECK(store.get("a", "resp_1", 110) != nullptr);
  CHECK(store.get("a", "resp_1", 110.5) == nullptr);
  CHECK(store.entries() == 0);
  CHECK(store.bytes() == 0);
}

TEST_CASE("past the byte bound the least recently used go first; one too large is not kept") {
  const auto size = response("0").bytes() + 1 + 6; // tenant "a", id "resp_N"
  response_store store(3 * size, 60);
  store.put("a", "resp_0", response("0"), 0);
  store.put("a", "resp_1", response("1"), 0);
  store.put("a", "resp_2", response("2"), 0);
  CHECK(store.entries() == 3);
  CHECK(store.bytes() == 3 * size);
  CHECK(store.get("a", "resp_0", 1) != nullptr); // now the most recently used
  store.put("a", "resp_3", response("3"), 1);
  CHECK(store.get("a", "resp_1", 1) == nullptr);
  CHECK(store.get("a", "resp_0", 1) != nullptr);
  CHECK(store.get("a", "resp_2", 1) != nullptr);
  CHECK(store.get("a", "resp_3", 1) != nullptr);
  CHECK(store.bytes() <= 3 * size);
  store.put("a", "resp_big", response(std::string(4 * size, 'x')), 1);
  CHECK(store.get("a", "resp_big", 1) == nullptr);
  CHECK(store.entries() == 3);
  // Stored again under the same id: replaced, counted once.
  store.put("a", "resp_3", response("3"), 2);
  CHECK(store.entries() == 3);
  CHECK(store.bytes() == 3 * size);
}

TEST_CASE("a store of 0 bytes keeps nothing and still gives ids; ids never repeat") {
  response_store store(0, 60);
  store.put("a", "resp_1", response("one"), 0);
  CHECK(store.get("a", "resp_1", 0) == nullptr);
  std::set<std::string> ids;
  for (int i = 0; i < 10000; ++i) {
    const auto id = store.new_id();
    CHECK(id.size() == 5 + 32);
    CHECK(id.starts_with("resp_"));
    ids.insert(id);
  }
  CHECK(ids.size() == 10000);
  response_store other(0, 60); // another server's ids are other ids
  CHECK(ids.count(other.new_id()) == 0);
}
