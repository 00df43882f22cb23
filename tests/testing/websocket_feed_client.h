#pragma once

// FeedClient: a blocking client of the bus's WebSocket feed
// (GET /ws?address=PATTERN), for the listener's tests and end-to-end tests.

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <string>
#include <string_view>

namespace cepbus::testing {

class FeedClient {
 public:
  // Connects to 127.0.0.1:`port` and completes the handshake for `target`;
  // throws boost::beast::system_error when the bus refuses it.
  FeedClient(int port, std::string_view target) : ws_(ioc_) {
    ws_.next_layer().connect(
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws_.handshake("127.0.0.1", std::string(target));
  }
  // The next frame's text.
  std::string read() {
    boost::beast::flat_buffer buffer;
    ws_.read(buffer);
    return boost::beast::buffers_to_string(buffer.data());
  }
  // Reads frames until the server closes; the close reason.
  boost::beast::websocket::close_reason readUntilClosed() {
    boost::beast::error_code ec;
    while (!ec) {
      boost::beast::flat_buffer buffer;
      ws_.read(buffer, ec);
    }
    EXPECT_EQ(ec, boost::beast::websocket::error::closed) << ec.message();
    return ws_.reason();
  }
  void close() { ws_.close(boost::beast::websocket::close_code::normal); }

 private:
  boost::asio::io_context ioc_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_;
};

}  // namespace cepbus::testing
