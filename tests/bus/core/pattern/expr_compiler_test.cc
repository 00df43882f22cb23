#include "bus/core/pattern/expr_compiler.h"

#include <gtest/gtest.h>

#include <climits>
#include <initializer_list>

#include "bus/core/pattern/parser.h"

namespace cepbus::pattern {
namespace {

constexpr std::string_view kPattern = "SEQ(S a, S+ b[], S c)";

EventPtr event(Timestamp ts, std::initializer_list<std::pair<const char*, Value>> attrs,
               std::string_view type = "S") {
  EventBuilder builder(type);
  builder.at(ts);
  for (const auto& [name, value] : attrs) builder.set(name, value);
  return builder.build();
}

// Slots of kPattern: 0 = a, 1 = b (Kleene), 2 = c.
class ExprCompilerTest : public ::testing::Test {
 protected:
  ExprCompilerTest() {
    a_ = event(1, {{"price", Value(10)},
                   {"qty", Value(7)},
                   {"symbol", Value("IBM")},
                   {"big", Value(int64_t{INT64_MAX})},
                   {"flag", Value(true)}});
    c_ = event(9, {{"price", Value(10.0)}, {"symbol", Value("MSFT")}});
    bind();
  }

  void setKleene(std::initializer_list<EventPtr> events) {
    b_owned_.assign(events.begin(), events.end());
    b_.clear();
    for (const EventPtr& e : b_owned_) b_.push_back(e.get());
    bind();
  }

  void bind() {
    slots_.assign(3, SlotBinding{});
    slots_[0].event = a_.get();
    slots_[1].events = b_;
    slots_[2].event = c_.get();
  }

  Query parse(std::string_view where, std::string_view pattern = kPattern) {
    Result<Query> q =
        parseQuery("PATTERN " + std::string(pattern) + " WHERE " + std::string(where));
    if (!q.isOk()) {
      ADD_FAILURE() << where << ": " << q.status().toString();
      return *parseQuery("PATTERN " + std::string(pattern) + " WHERE true");
    }
    return *q;
  }

  // Compiles `where` against the pattern's layout and tests it on the bindings.
  bool holds(std::string_view where) {
    Query q = parse(where);
    Result<CompiledExpr> e = compileExpr(*q.where, BindingLayout::forQuery(q));
    EXPECT_TRUE(e.isOk()) << e.status().toString();
    return e.isOk() && e->test(slots_);
  }

  Scalar value(std::string_view expr) {
    Query q = parse(std::string(expr) + " = 0");
    Result<CompiledExpr> e = compileExpr(*q.where->lhs, BindingLayout::forQuery(q));
    EXPECT_TRUE(e.isOk()) << e.status().toString();
    return e.isOk() ? e->evaluate(slots_) : Scalar();
  }

  EventPtr a_, c_;
  std::vector<EventPtr> b_owned_;
  std::vector<const Event*> b_;
  std::vector<SlotBinding> slots_;
};

TEST_F(ExprCompilerTest, BindingLayoutFollowsPatternOrder) {
  Query q = parse("true", "SEQ(S a, NOT(T t), S+ b[], S c)");
  BindingLayout layout = BindingLayout::forQuery(q);
  ASSERT_EQ(layout.size(), 4u);
  EXPECT_EQ(layout.slotOf("a"), 0u);
  EXPECT_EQ(layout.slotOf("t"), 1u);
  EXPECT_EQ(layout.slotOf("b"), 2u);
  EXPECT_EQ(layout.kindOf(1), VarKind::kNegated);
  EXPECT_EQ(layout.kindOf(2), VarKind::kKleene);
  EXPECT_EQ(layout.nameOf(3), "c");
  EXPECT_FALSE(layout.slotOf("zz").has_value());
  EXPECT_EQ(layout.add("a", VarKind::kSingle), 0u);  // existing names keep their slot
  EXPECT_EQ(layout.add("z", VarKind::kSingle), 4u);
}

TEST_F(ExprCompilerTest, IntAndDoubleMix) {
  EXPECT_TRUE(holds("a.price = c.price"));  // 10 = 10.0
  EXPECT_TRUE(holds("a.price < c.price + 0.5"));
  EXPECT_TRUE(holds("a.price / 4 = 2.5"));  // '/' is real division
  EXPECT_TRUE(holds("a.qty % 3 = 1"));
  EXPECT_TRUE(holds("c.price % 3 = 1"));  // fmod on doubles
  EXPECT_TRUE(holds("-a.qty = -7"));
  EXPECT_TRUE(holds("a.qty * 2 - 4 = 10"));
  EXPECT_EQ(value("a.qty + 1").kind(), Scalar::Kind::kInt);
  EXPECT_EQ(value("a.qty + 1").asInt(), 8);
  EXPECT_EQ(value("a.qty + 1.5").kind(), Scalar::Kind::kDouble);
  EXPECT_DOUBLE_EQ(value("a.qty + 1.5").asDouble(), 8.5);
  EXPECT_EQ(value("a.qty / 7").kind(), Scalar::Kind::kDouble);
}

TEST_F(ExprCompilerTest, IntegerOverflowFallsBackToDouble) {
  // Wrapping would make these negative.
  EXPECT_TRUE(holds("a.big * 2 > 0"));
  EXPECT_TRUE(holds("a.big + a.big > a.big"));
  EXPECT_EQ(value("a.big + 1").kind(), Scalar::Kind::kDouble);
  EXPECT_TRUE(holds("0 - a.big - 2 < 0"));
}

TEST_F(ExprCompilerTest, Strings) {
  EXPECT_TRUE(holds("a.symbol = 'IBM'"));
  EXPECT_TRUE(holds("a.symbol != c.symbol"));
  EXPECT_TRUE(holds("a.symbol < c.symbol"));
  EXPECT_FALSE(holds("a.symbol = 'ibm'"));
  EXPECT_EQ(value("a.symbol").asString(), "IBM");
}

TEST_F(ExprCompilerTest, TypeMismatchAtRunTimeMakesComparisonsFalse) {
  EXPECT_FALSE(holds("a.symbol > a.price"));
  EXPECT_FALSE(holds("a.symbol = a.price"));
  EXPECT_FALSE(holds("a.symbol != a.price"));
  EXPECT_TRUE(holds("NOT a.symbol > a.price"));
  EXPECT_FALSE(holds("a.symbol + 1 > 0"));
  EXPECT_FALSE(holds("a.flag + 1 > 0"));
  EXPECT_TRUE(value("a.symbol * 2").isMissing());
  // A non-boolean value used as a condition is false.
  EXPECT_FALSE(holds("a.price"));
  EXPECT_TRUE(holds("a.flag"));
  EXPECT_TRUE(holds("a.flag = true AND NOT a.flag = false"));
}

TEST_F(ExprCompilerTest, MissingAttributesMakeComparisonsFalse) {
  EXPECT_FALSE(holds("a.nope = 1"));
  EXPECT_FALSE(holds("a.nope != 1"));
  EXPECT_TRUE(holds("NOT a.nope = 1"));
  EXPECT_FALSE(holds("a.nope + 1 > 0"));
  EXPECT_FALSE(holds("a.nope = c.nope"));
  EXPECT_TRUE(holds("a.nope = 1 OR a.price = 10"));
  EXPECT_TRUE(value("a.nope").isMissing());
}

TEST_F(ExprCompilerTest, DivisionByZeroIsMissing) {
  EXPECT_FALSE(holds("a.price / 0 > 0"));
  EXPECT_FALSE(holds("a.price / 0 <= 0"));
  EXPECT_FALSE(holds("a.price % 0 = 0"));
  EXPECT_FALSE(holds("c.price % 0 = 0"));
  EXPECT_FALSE(holds("a.price / 0.0 > 0"));
  EXPECT_EQ(value("a.big % -1").asInt(), 0);
}

TEST_F(ExprCompilerTest, Builtins) {
  EventPtr e = EventBuilder("S").interval(3, 5).probability(0.25).set("ts", Value(99)).build();
  slots_[0].event = e.get();
  EXPECT_TRUE(holds("a.ts = 5"));  // the built-in shadows an attribute named ts
  EXPECT_TRUE(holds("a.start = 3"));
  EXPECT_TRUE(holds("a.prob = 0.25"));
  EXPECT_TRUE(holds("a.type = 'S'"));
  EXPECT_TRUE(holds("a.ts < c.ts"));
  EXPECT_EQ(value("a.ts").kind(), Scalar::Kind::kInt);
}

TEST_F(ExprCompilerTest, UnboundVariablesMakeComparisonsFalse) {
  slots_[2].event = nullptr;
  EXPECT_FALSE(holds("c.price = 10"));
  slots_.resize(1);  // a shorter binding span leaves the remaining slots unbound
  EXPECT_FALSE(holds("c.price = 10"));
  EXPECT_TRUE(holds("a.price = 10"));
}

TEST_F(ExprCompilerTest, KleeneIndexes) {
  setKleene({event(2, {{"price", Value(5)}}), event(3, {{"price", Value(6.5)}}),
             event(4, {{"price", Value(8)}})});
  EXPECT_TRUE(holds("b[1].price = 5"));
  EXPECT_TRUE(holds("b[2].price = 6.5"));
  EXPECT_TRUE(holds("b[last].price = 8"));
  EXPECT_FALSE(holds("b[4].price = 8"));
  EXPECT_FALSE(holds("b[4].price != 8"));
  // b[i] is the newest element by default; b[i-1] the one before.
  EXPECT_TRUE(holds("b[i].price = 8"));
  EXPECT_TRUE(holds("b[i-1].price = 6.5"));
  slots_[1].current = 0;
  EXPECT_TRUE(holds("b[i].price = 5"));
  EXPECT_FALSE(holds("b[i-1].price = 5"));
  EXPECT_FALSE(holds("b[i-1].price != 5"));
  slots_[1].current = 7;  // outside the binding
  EXPECT_FALSE(holds("b[i].price > 0"));
}

TEST_F(ExprCompilerTest, Aggregates) {
  setKleene({event(2, {{"price", Value(5)}, {"qty", Value(1)}}), event(3, {{"price", Value(6.5)}}),
             event(4, {{"price", Value(8)}, {"qty", Value(4)}}),
             event(5, {{"price", Value("n/a")}, {"qty", Value(2)}})});
  EXPECT_EQ(value("count(b[])").asInt(), 4);
  EXPECT_EQ(value("count(b[].qty)").asInt(), 3);  // counts the elements that have qty
  EXPECT_EQ(value("sum(b[].qty)").kind(), Scalar::Kind::kInt);
  EXPECT_EQ(value("sum(b[].qty)").asInt(), 7);
  EXPECT_EQ(value("sum(b[].price)").kind(), Scalar::Kind::kDouble);  // non-numbers skipped
  EXPECT_DOUBLE_EQ(value("sum(b[].price)").asDouble(), 19.5);
  EXPECT_DOUBLE_EQ(value("avg(b[].price)").asDouble(), 6.5);
  EXPECT_DOUBLE_EQ(value("avg(b[].qty)").asDouble(), 7.0 / 3);
  EXPECT_EQ(value("min(b[].price)").asInt(), 5);
  EXPECT_EQ(value("max(b[].price)").asInt(), 8);
  EXPECT_EQ(value("max(b[].price) - min(b[].ts)").asInt(), 6);
  EXPECT_TRUE(holds("avg(b[].price) < a.price AND count(b[]) > 3"));
}

TEST_F(ExprCompilerTest, AggregatesOverNoElements) {
  setKleene({});
  EXPECT_EQ(value("count(b[])").asInt(), 0);
  EXPECT_EQ(value("sum(b[].price)").asInt(), 0);
  EXPECT_TRUE(value("avg(b[].price)").isMissing());
  EXPECT_TRUE(value("min(b[].price)").isMissing());
  EXPECT_FALSE(holds("max(b[].price) < 100"));
  EXPECT_FALSE(holds("b[last].price < 100"));
}

TEST_F(ExprCompilerTest, SumOverflowFallsBackToDouble) {
  setKleene({event(2, {{"v", Value(int64_t{INT64_MAX})}}), event(3, {{"v", Value(10)}})});
  EXPECT_EQ(value("sum(b[].v)").kind(), Scalar::Kind::kDouble);
  EXPECT_TRUE(holds("sum(b[].v) > 0"));
}

TEST_F(ExprCompilerTest, ConjunctsCarryTheirSlots) {
  Query q = parse(
      "a.symbol = c.symbol AND b[i].price > b[i-1].price AND (b[i].qty < 10 OR a.x = 1) AND "
      "c.price > 0 AND count(b[]) > 1 AND 1 = 1");
  Result<std::vector<Conjunct>> r = compileConjuncts(q.where, BindingLayout::forQuery(q));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const std::vector<Conjunct>& c = *r;
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].slots, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(c[0].slot_mask, 0b101u);
  EXPECT_FALSE(c[0].iteration_slot.has_value());
  EXPECT_EQ(c[0].expr.text(), "a.symbol = c.symbol");
  EXPECT_EQ(c[1].slots, std::vector<size_t>{1});
  EXPECT_EQ(c[1].iteration_slot, 1u);
  EXPECT_TRUE(c[1].uses_previous);
  EXPECT_EQ(c[2].slots, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(c[2].iteration_slot, 1u);
  EXPECT_FALSE(c[2].uses_previous);
  EXPECT_EQ(c[3].slot_mask, 0b100u);
  EXPECT_EQ(c[4].slots, std::vector<size_t>{1});
  EXPECT_FALSE(c[4].iteration_slot.has_value());  // an aggregate is not an iteration predicate
  EXPECT_TRUE(c[5].slots.empty());
  EXPECT_EQ(c[5].source, splitConjuncts(q.where)[5]);

  Result<std::vector<Conjunct>> none = compileConjuncts(nullptr, BindingLayout::forQuery(q));
  ASSERT_TRUE(none.isOk());
  EXPECT_TRUE(none->empty());
}

// An engine extending b checks the iteration predicate on every prefix.
TEST_F(ExprCompilerTest, IterationPredicateOverGrowingKleene) {
  Query q = parse("b[i].price > b[i-1].price");
  Result<std::vector<Conjunct>> r = compileConjuncts(q.where, BindingLayout::forQuery(q));
  ASSERT_TRUE(r.isOk());
  const Conjunct& rising = (*r)[0];

  auto accepts = [&](std::initializer_list<Value> prices) {
    std::vector<EventPtr> owned;
    std::vector<const Event*> run;
    Timestamp ts = 0;
    for (const Value& p : prices) owned.push_back(event(++ts, {{"price", p}}));
    for (const EventPtr& e : owned) {
      run.push_back(e.get());
      slots_[1].events = run;
      if (!rising.test(slots_)) return false;
    }
    return true;
  };
  EXPECT_TRUE(accepts({Value(1), Value(2), Value(3.5), Value(4)}));
  EXPECT_FALSE(accepts({Value(1), Value(3), Value(2)}));
  EXPECT_FALSE(accepts({Value(1), Value(1)}));
  // The first element has no predecessor: vacuously true, unlike the bare expression.
  EXPECT_TRUE(accepts({Value(5)}));
  slots_[1].events = {};
  EXPECT_TRUE(rising.test(slots_));
  EXPECT_FALSE(rising.expr.test(slots_));
  // A missing price breaks the chain.
  EXPECT_FALSE(accepts({Value(1), Value("x")}));
}

TEST_F(ExprCompilerTest, CompileErrorsAgainstACustomLayout) {
  Query q = parse("a.price > 1 AND sum(b[].price) > 1 AND b[1].price > 0");
  std::vector<ExprPtr> c = splitConjuncts(q.where);

  BindingLayout missing;
  missing.add("b", VarKind::kKleene);
  Result<CompiledExpr> r1 = compileExpr(*c[0], missing);
  ASSERT_FALSE(r1.isOk());
  EXPECT_EQ(r1.status().message(), "line 1, column 37: variable 'a' is not in the binding layout");

  BindingLayout single;
  single.add("b", VarKind::kSingle);
  Result<CompiledExpr> r2 = compileExpr(*c[1], single);
  ASSERT_FALSE(r2.isOk());
  EXPECT_EQ(r2.status().message(),
            "line 1, column 53: sum() over 'b', which is not a Kleene variable");
  Result<CompiledExpr> r3 = compileExpr(*c[2], single);
  ASSERT_FALSE(r3.isOk());
  EXPECT_EQ(r3.status().message(), "line 1, column 76: variable 'b' cannot be indexed");

  Result<std::vector<Conjunct>> r4 = compileConjuncts(q.where, missing);
  ASSERT_FALSE(r4.isOk());
  EXPECT_EQ(r4.status().message(), r1.status().message());
}

TEST_F(ExprCompilerTest, ConjunctSlotsAbove63AreRejected) {
  BindingLayout layout;
  for (int i = 0; i < 64; ++i) layout.add("v" + std::to_string(i), VarKind::kSingle);
  layout.add("a", VarKind::kSingle);
  Query q = parse("a.price > 1");
  Result<std::vector<Conjunct>> r = compileConjuncts(q.where, layout);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message(),
            "line 1, column 37: variable 'a' has slot 64; conjuncts support slots below 64");
}

TEST_F(ExprCompilerTest, ReturnBuildsCompositeAttributes) {
  setKleene({event(2, {{"price", Value(5)}}), event(3, {{"price", Value(7)}})});
  Result<Query> q = parseQuery(
      "PATTERN SEQ(S a, S+ b[], S c) RETURN Rise(a.symbol, b[last].price, avg(b[].price) AS "
      "mean, a.price * 2 AS twice, c.nope, c.ts)");
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  Result<CompiledReturn> ret = compileReturn(*q->returns, BindingLayout::forQuery(*q));
  ASSERT_TRUE(ret.isOk()) << ret.status().toString();
  EXPECT_EQ(ret->type.name(), "Rise");
  ASSERT_EQ(ret->items.size(), 6u);

  EventBuilder builder(ret->type);
  builder.constituent(a_).constituent(c_);
  ret->apply(slots_, 1.0, builder);
  EventPtr out = builder.build();
  EXPECT_EQ(out->type().name(), "Rise");
  EXPECT_EQ(*out->find(Symbol::intern("a_symbol")), Value("IBM"));
  EXPECT_EQ(*out->find(Symbol::intern("b_last_price")), Value(7));
  EXPECT_EQ(*out->find(Symbol::intern("mean")), Value(6.0));
  EXPECT_EQ(*out->find(Symbol::intern("twice")), Value(20));
  EXPECT_EQ(*out->find(Symbol::intern("c_ts")), Value(9));
  EXPECT_EQ(out->find(Symbol::intern("c_nope")), nullptr);  // missing values are left out
}

TEST_F(ExprCompilerTest, ReturnReadsTheMatchProbabilityWithProb) {
  Result<Query> q = parseQuery("PATTERN SEQ(S a, S c) RETURN P(prob(), 1 - prob() AS miss)");
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  Result<CompiledReturn> ret = compileReturn(*q->returns, BindingLayout::forQuery(*q));
  ASSERT_TRUE(ret.isOk()) << ret.status().toString();
  EventBuilder builder(ret->type);
  ret->apply(slots_, 0.25, builder);
  EventPtr out = builder.build();
  EXPECT_EQ(*out->find(Symbol::intern("prob")), Value(0.25));
  EXPECT_EQ(*out->find(Symbol::intern("miss")), Value(0.75));
  // Outside RETURN there is no match probability: prob() is Missing.
  EXPECT_TRUE(ret->items[0].expr.evaluate(slots_).isMissing());
}

TEST(ScalarTest, ToValue) {
  EXPECT_TRUE(Scalar().toValue().isNull());
  EXPECT_EQ(Scalar::ofBool(true).toValue(), Value(true));
  EXPECT_EQ(Scalar::ofInt(3).toValue().kind(), Value::Kind::kInt);
  EXPECT_EQ(Scalar::ofDouble(2.5).toValue(), Value(2.5));
  EXPECT_EQ(Scalar::ofString("x").toValue(), Value("x"));
  EXPECT_TRUE(Scalar::of(Value()).isMissing());
  EXPECT_DOUBLE_EQ(Scalar::ofInt(4).toDouble(), 4.0);
  EXPECT_DOUBLE_EQ(Scalar::ofString("4").toDouble(), 0.0);
}

TEST(CompiledExprTest, CopiesKeepTheirOwnStringConstants) {
  Result<Query> q = parseQuery("PATTERN S a WHERE a.symbol = 'a fairly long string constant'");
  ASSERT_TRUE(q.isOk());
  std::optional<CompiledExpr> original;
  {
    Result<CompiledExpr> r = compileExpr(*q->where, BindingLayout::forQuery(*q));
    ASSERT_TRUE(r.isOk());
    original = *r;
  }
  const CompiledExpr copy = *original;
  original.reset();
  EventPtr e = event(1, {{"symbol", Value("a fairly long string constant")}});
  SlotBinding slot;
  slot.event = e.get();
  EXPECT_TRUE(copy.test(Bindings(&slot, 1)));
}

}  // namespace
}  // namespace cepbus::pattern
