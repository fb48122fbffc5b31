#include "tools/server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>

namespace aft::server {
namespace {

struct Address {
  std::string host;
  int port = -1;
};

// The numeric form httplib gives Request::remote_addr / local_addr.
bool numeric_address(const sockaddr_storage& address, socklen_t length, Address* out) {
  if (address.ss_family != AF_INET && address.ss_family != AF_INET6) return false;
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, port,
                  sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  out->host = host;
  out->port = std::atoi(port);
  return true;
}

bool is_connection(int fd, const httplib::Request& request) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  Address local, remote;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !numeric_address(address, length, &local) || local.port != request.local_port ||
      local.host != request.local_addr) {
    return false;
  }
  length = sizeof address;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         numeric_address(address, length, &remote) && remote.port == request.remote_port &&
         remote.host == request.remote_addr;
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& request) {
  if (request.remote_port < 0 || request.local_port < 0) return;
  std::unique_ptr<DIR, int (*)(DIR*)> descriptors(opendir("/proc/self/fd"), closedir);
  if (!descriptors) return;
  while (const dirent* entry = readdir(descriptors.get())) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd < 0 || fd == dirfd(descriptors.get())) continue;
    if (is_connection(static_cast<int>(fd), request)) {
      socket_ = static_cast<int>(fd);
      return;
    }
  }
}

bool ClientConnection::closed_by_client() const {
  if (socket_ < 0) return false;
  pollfd watched{socket_, POLLIN, 0};
  if (poll(&watched, 1, 0) <= 0) return false;  // nothing to read: open (or poll interrupted)
  if ((watched.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;
  char byte;
  const ssize_t peeked = recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (peeked > 0) return false;  // the client's next request, pipelined
  return peeked == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace aft::server
