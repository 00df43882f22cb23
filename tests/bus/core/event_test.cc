#include "bus/core/event.h"

#include <gtest/gtest.h>

namespace cepbus {
namespace {

TEST(EventTest, AtomicEventHasEqualStartAndEnd) {
  EventPtr e = EventBuilder("Stock").at(17).set("price", 10.5).set("symbol", "IBM").build();
  EXPECT_EQ(e->type().name(), "Stock");
  EXPECT_EQ(e->start(), 17);
  EXPECT_EQ(e->end(), 17);
  EXPECT_EQ(e->ts(), 17);
  EXPECT_FALSE(e->isComposite());
  EXPECT_EQ(e->probability(), 1.0);
  EXPECT_TRUE(e->key().isNull());
  EXPECT_NE(e->id(), 0u);
}

TEST(EventTest, FindsAttributesBySymbolWhateverTheInsertionOrder) {
  Symbol z = Symbol::intern("zz-attr"), a = Symbol::intern("aa-attr"), m = Symbol::intern("mm");
  EventPtr e = EventBuilder("T").at(1).set(z, 1).set(a, 2).set(m, 3).set(a, 4).build();
  ASSERT_EQ(e->attributes().size(), 3u);
  EXPECT_EQ(e->find(z)->asInt(), 1);
  EXPECT_EQ(e->find(a)->asInt(), 4);  // replaced, not duplicated
  EXPECT_EQ(e->find(m)->asInt(), 3);
  EXPECT_EQ(e->find(Symbol::intern("absent")), nullptr);
  for (size_t i = 1; i < e->attributes().size(); ++i) {
    EXPECT_LT(e->attributes()[i - 1].name, e->attributes()[i].name);
  }
}

// Names set in id order are appended; a name already set (the last one too)
// is replaced and one that sorts before the last is inserted in its place.
TEST(EventTest, KeepsAttributesSortedWhenSetInIdOrderThenOutOfIt) {
  const Symbol a = Symbol::intern("order-a"), b = Symbol::intern("order-b");
  const Symbol c = Symbol::intern("order-c"), d = Symbol::intern("order-d");
  ASSERT_TRUE(a < b && b < c && c < d);
  EventPtr e = EventBuilder("T").at(1).set(a, 1).set(c, 3).set(d, 4).set(d, 40).set(b, 2).build();
  ASSERT_EQ(e->attributes().size(), 4u);
  const Symbol names[] = {a, b, c, d};
  const int64_t values[] = {1, 2, 3, 40};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(e->attributes()[i].name, names[i]);
    EXPECT_EQ(e->attributes()[i].value.asInt(), values[i]);
  }
}

TEST(EventTest, CompositeSpansItsConstituents) {
  EventPtr a = EventBuilder("A").at(5).build();
  EventPtr b = EventBuilder("B").at(2).build();
  EventPtr c = EventBuilder("C").at(9).build();
  EventPtr composite = EventBuilder("ABC").constituent(a).constituent(b).constituent(c).build();
  EXPECT_TRUE(composite->isComposite());
  EXPECT_EQ(composite->start(), 2);
  EXPECT_EQ(composite->end(), 9);
  ASSERT_EQ(composite->constituents().size(), 3u);
  EXPECT_EQ(composite->constituents()[1], b);
}

TEST(EventTest, IdsAreUniqueUnlessGiven) {
  EventPtr a = EventBuilder("A").at(1).build();
  EventPtr b = EventBuilder("A").at(1).build();
  EXPECT_NE(a->id(), b->id());
  EXPECT_EQ(EventBuilder("A").id(42).build()->id(), 42u);
}

}  // namespace
}  // namespace cepbus
