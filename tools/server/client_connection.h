// The connection a request arrived on, so that a handler that writes nothing until its answer is
// whole (a non-streamed completion) can see its client go away and cancel the work. cpp-httplib
// 0.11 gives a handler neither the socket nor a way to ask (later versions added
// Request::is_connection_closed); the socket is found by the request's two addresses, which name
// one open TCP connection. The connection's thread runs the handler and closes the socket only
// after it returns, so the descriptor found stays this connection's while the handler runs.
#pragma once

#include <httplib.h>

namespace aft::server {

class ClientConnection {
 public:
  // Looks the socket up among the process's open descriptors (Linux's /proc/self/fd); a request
  // that came some other way (a test driving the routes in process) has none.
  explicit ClientConnection(const httplib::Request& request);

  bool found() const { return socket_ >= 0; }
  // True once the client has closed its end or the connection failed: what it sent is read, the
  // next read would say end of file. False while it is open (a pipelined next request waiting to
  // be read included), and when no socket was found.
  bool closed_by_client() const;

 private:
  int socket_ = -1;
};

}  // namespace aft::server
