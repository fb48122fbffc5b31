#include "tools/server/redis_url.h"

#include <cctype>
#include <cstdlib>

#include "tools/cli/arguments.h"

namespace aft::server {

const char kRedisUrlForms[] =
    "redis://[[user]:password@]host[:port][/db] or unix://[[user]:password@]/path/to.sock[?db=N]";

namespace {

// The URL in messages: its credentials hidden.
std::string without_credentials(const std::string& url) {
  const size_t scheme = url.find("://"), at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  return url.substr(0, scheme + 3) + "***" + url.substr(at);
}

[[noreturn]] void bad(const std::string& url, const std::string& why) {
  throw cli::UsageError("--redis: " + why + " in \"" + without_credentials(url) + "\": expected " +
                        kRedisUrlForms);
}

// Digits only (no sign, no spaces), in [min, max].
bool parse_number(const std::string& text, long min, long max, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  const long value = std::strtol(text.c_str(), nullptr, 10);
  if (value < min || value > max) return false;
  *out = static_cast<int>(value);
  return true;
}

// %XX escapes, so that a password may hold ':', '@' or '/'.
std::string percent_decode(const std::string& url, const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      bad(url, "a '%' not followed by two hexadecimal digits");
    }
    out += static_cast<char>(std::strtol(text.substr(i + 1, 2).c_str(), nullptr, 16));
    i += 2;
  }
  return out;
}

// [user]:password, %-decoded, into url.
void parse_credentials(const std::string& text, const std::string& credentials, RedisUrl& url) {
  const size_t colon = credentials.find(':');
  if (colon == std::string::npos) bad(text, "the credentials are not [user]:password");
  url.user = percent_decode(text, credentials.substr(0, colon));
  url.password = percent_decode(text, credentials.substr(colon + 1));
  if (url.password.empty()) bad(text, "the password is empty");
}

}  // namespace

std::string RedisUrl::display() const {
  if (!socket.empty()) {
    return "unix://" + (user.empty() ? "" : user + "@") + socket +
           (db != 0 ? "?db=" + std::to_string(db) : "");
  }
  const std::string where = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "redis://" + (user.empty() ? "" : user + "@") + where + ":" + std::to_string(port) + "/" +
         std::to_string(db);
}

RedisUrl parse_redis_url(const std::string& text) {
  RedisUrl url;
  const std::string unix_scheme = "unix://", redis_scheme = "redis://";
  if (text.compare(0, unix_scheme.size(), unix_scheme) == 0) {
    std::string rest = text.substr(unix_scheme.size());
    const size_t query = rest.rfind('?');
    if (query != std::string::npos) {
      const std::string db = rest.substr(query + 1);
      if (db.compare(0, 3, "db=") != 0 || !parse_number(db.substr(3), 0, 1 << 20, &url.db)) {
        bad(text, "the query \"" + db + "\" is not db=N");
      }
      rest.resize(query);
    }
    if (!rest.empty() && rest[0] != '/') {  // credentials before the path
      const size_t at = rest.find("@/");
      if (at == std::string::npos) bad(text, "the socket's path is not absolute");
      parse_credentials(text, rest.substr(0, at), url);
      rest = rest.substr(at + 1);
    }
    if (rest.empty() || rest[0] != '/') bad(text, "the socket's path is not absolute");
    url.socket = rest;
    return url;
  }
  if (text.compare(0, 9, "rediss://") == 0) bad(text, "TLS (rediss://) is not supported");
  if (text.compare(0, redis_scheme.size(), redis_scheme) != 0) {
    bad(text, "the scheme is neither redis:// nor unix://");
  }
  std::string rest = text.substr(redis_scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    if (!db.empty() && !parse_number(db, 0, 1 << 20, &url.db)) {
      bad(text, "the database \"" + db + "\" is not a number");
    }
    rest.resize(slash);
  }
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    parse_credentials(text, rest.substr(0, at), url);
    rest = rest.substr(at + 1);
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) bad(text, "an IPv6 address without its ']'");
    url.host = rest.substr(1, close - 1);
    const std::string after = rest.substr(close + 1);
    if (!after.empty() && after[0] != ':') bad(text, "text after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
    if (after == ":") bad(text, "the port is empty");
  } else {
    const size_t colon = rest.find(':');
    url.host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) bad(text, "the port is empty");
    }
  }
  if (url.host.empty()) bad(text, "no host");
  if (!port.empty() && !parse_number(port, 1, 65535, &url.port)) {
    bad(text, "the port \"" + port + "\" is not a number from 1 to 65535");
  }
  return url;
}

}  // namespace aft::server
