// POST /slots/{id}?action=save|restore|erase and GET /slots, in llama-server's shape
// (docs/server.md): a slot's sequence written to a file in --slot-save-path as a cli::PrefixState
// record, and read back into a slot, and the prefix cache, by this server or another serving the
// same model.
#pragma once

#include <string>

#include <httplib.h>

#include "tools/server/options.h"
#include "tools/server/routes.h"

namespace aft::server {

// Throws std::runtime_error naming the flag unless --slot-save-path is unset or a directory.
void check_slot_save_path(const Options& options);

// Why name cannot be a slot file's name (empty, a path, hidden, too long...), or "" if it can:
// only plain names inside the directory, so that no request reaches a file outside it.
std::string slot_file_name_problem(const std::string& name);

void install_slot_routes(httplib::Server& http, ServerState& state);

// httplib 0.11 reads the body of a POST that has neither Content-Length nor Transfer-Encoding
// until the client closes the connection, or --timeout passes, where such a request has none
// (RFC 9112), as `curl -X POST .../slots/0?action=erase` sends it. For the routing step, before
// the body is read: answers such a /slots/ID request at once and returns true.
bool answer_bodyless_slot_action(const httplib::Request& req, httplib::Response& res,
                                 ServerState& state);

}  // namespace aft::server
