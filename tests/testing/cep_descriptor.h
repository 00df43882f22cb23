#pragma once

// Writing the descriptor of a cep service unit in a test, so that a test
// shows only the parts it is about:
//
//   start(CepUnit()
//             .query(CepQuery("pairs", "PATTERN SEQ(A a, B b)").option("batched", "true"))
//             .toXml());
//
// toXml() lays the document out one element a line, the way a person writes
// it: <service-assembly name="sa"> on line 1, <service-unit name="cep"> on
// line 2, each <param> on a line, then each <query> on a line followed by its
// options one a line and its <text> on one line (plus the lines of a text
// that holds newlines). Tests that check the line numbers of errors rely on
// that layout.
//
// Thread-safety: none; value types.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cepbus::testing {

// `<tag name="name" value="value"/>` on a line of its own after `indent`.
inline std::string nameValueLine(std::string_view indent, std::string_view tag,
                                 std::string_view name, std::string_view value) {
  std::string line(indent);
  line.append("<").append(tag).append(" name=\"").append(name);
  line.append("\" value=\"").append(value).append("\"/>\n");
  return line;
}

// One <query>. By default it runs on the test plugin "cepfake", reads
// "in.events" and publishes to "out.<name>".
class CepQuery {
 public:
  // `text` is XML content: a '<' must be written &lt; or sit in a CDATA section.
  CepQuery(std::string name, std::string text)
      : name_(std::move(name)), text_(std::move(text)), output_("out." + name_) {}

  CepQuery& engine(std::string engine) {
    engine_ = std::move(engine);
    return *this;
  }
  CepQuery& input(std::string addresses) {
    input_ = std::move(addresses);
    return *this;
  }
  CepQuery& output(std::string address) {
    output_ = std::move(address);
    return *this;
  }
  // The query's time-unit attribute; none by default.
  CepQuery& timeUnit(std::string unit) {
    time_unit_ = std::move(unit);
    return *this;
  }
  CepQuery& option(std::string name, std::string value) {
    options_.emplace_back(std::move(name), std::move(value));
    return *this;
  }

  std::string toXml() const {
    std::string xml = "    <query name=\"" + name_ + "\" engine=\"" + engine_ + "\" input=\"" +
                      input_ + "\" output=\"" + output_ + "\"" +
                      (time_unit_.empty() ? "" : " time-unit=\"" + time_unit_ + "\"") + ">\n";
    for (const auto& [name, value] : options_) {
      xml += nameValueLine("      ", "option", name, value);
    }
    return xml + "      <text>" + text_ + "</text>\n    </query>\n";
  }

 private:
  std::string name_;
  std::string text_;
  std::string engine_ = "cepfake";
  std::string input_ = "in.events";
  std::string output_;
  std::string time_unit_;
  std::vector<std::pair<std::string, std::string>> options_;
};

// A <service-assembly name="sa"> with one <service-unit name="cep" type="cep">.
class CepUnit {
 public:
  CepUnit& param(std::string name, std::string value) {
    params_.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  CepUnit& query(const CepQuery& query) {
    queries_.push_back(query.toXml());
    return *this;
  }

  std::string toXml() const {
    std::string xml =
        "<service-assembly name=\"sa\">\n  <service-unit name=\"cep\" type=\"cep\">\n";
    for (const auto& [name, value] : params_) {
      xml += nameValueLine("    ", "param", name, value);
    }
    for (const std::string& query : queries_) xml += query;
    return xml + "  </service-unit>\n</service-assembly>";
  }

 private:
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<std::string> queries_;
};

}  // namespace cepbus::testing
