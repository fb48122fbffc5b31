// --redis URL: where the state cache shared across replicas lives (tools/server/redis_store.h).
// Parsed whether or not the server is built with Redis, so that a bad URL is always a usage error.
#pragma once

#include <string>

namespace aft::server {

struct RedisUrl {
  std::string host;  // TCP (a name, an IPv4 or an IPv6 address); empty for a unix socket
  int port = 6379;
  std::string socket;  // the unix socket's path
  std::string user;    // AUTH user password (Redis 6 ACLs); AUTH password alone when empty
  std::string password;
  int db = 0;
  // The URL without its password, for logs.
  std::string display() const;
};

extern const char kRedisUrlForms[];  // the forms accepted, for messages

// redis://[[user]:password@]host[:port][/db] (an IPv6 address in brackets) or
// unix://[[user]:password@]/path/to.sock[?db=N]; user and password may be %-encoded. Throws
// cli::UsageError naming --redis, what is wrong and the forms expected.
RedisUrl parse_redis_url(const std::string& text);

}  // namespace aft::server
