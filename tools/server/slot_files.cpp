#include "tools/server/slot_files.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/cli/elapsed.h"
#include "tools/cli/prefix_state.h"
#include "tools/server/request.h"
#include "tools/server/responses.h"

namespace aft::server {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using cli::Clock;
using cli::ms_since;

// NAME_MAX on Linux, less the ".tmp" that write_prefix_state_file's temporary file adds.
constexpr size_t kMaxFileName = 251;

// Two saves to one name would otherwise share write_prefix_state_file's temporary file.
std::mutex save_mutex;

// A client's text in a message: cut short.
std::string cut_short(const std::string& text) {
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

int slot_id(const std::string& text, int slots) {
  const RequestError bad(400,
                         "'id_slot': expected a slot id from 0 to " + std::to_string(slots - 1) +
                             " (--parallel " + std::to_string(slots) + "), found \"" +
                             cut_short(text) + "\"",
                         "id_slot");
  if (text.empty() || text.size() > 9) throw bad;
  for (char c : text) {
    if (c < '0' || c > '9') throw bad;
  }
  const int id = std::stoi(text);
  if (id >= slots) throw bad;
  return id;
}

std::string file_name(const json& body) {
  if (!body.contains("filename") || !body["filename"].is_string()) {
    throw RequestError(400, "'filename': expected the name of a file in --slot-save-path",
                       "filename");
  }
  const std::string name = body["filename"].get<std::string>();
  const std::string problem = slot_file_name_problem(name);
  if (!problem.empty()) {
    throw RequestError(400, "'filename': \"" + cut_short(name) + "\" " + problem, "filename");
  }
  return name;
}

json save(ServerState& state, int id, const std::string& name) {
  const auto start = Clock::now();
  const cli::PrefixState sequence = state.scheduler->slot_sequence(id);
  size_t written = 0;
  try {
    std::lock_guard<std::mutex> lock(save_mutex);
    written = cli::write_prefix_state_file((fs::path(state.options.slot_save_path) / name).string(),
                                           sequence);
  } catch (const std::runtime_error& error) {
    // The message starts with the file's path: the client is told its name, not the directory.
    std::string message = error.what();
    const std::string path = (fs::path(state.options.slot_save_path) / name).string();
    if (message.compare(0, path.size(), path) == 0) message = name + message.substr(path.size());
    throw RequestError(500, message, "", "server_error");
  }
  return {{"id_slot", id},
          {"filename", name},
          {"n_saved", sequence.tokens.size()},
          {"n_written", written},
          {"timings", {{"save_ms", ms_since(start)}}}};
}

json restore(ServerState& state, int id, const std::string& name) {
  const auto start = Clock::now();
  const fs::path path = fs::path(state.options.slot_save_path) / name;
  auto refuse = [&](const std::string& why) {
    return RequestError(400, "'filename': " + name + ": " + why, "filename");
  };
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    throw RequestError(404, "'filename': " + name + ": no such file in --slot-save-path",
                       "filename", "not_found_error");
  }
  if (status.type() != fs::file_type::regular) throw refuse("not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (!in || in.bad()) throw refuse("cannot read it");
  std::string why;
  std::optional<cli::PrefixState> sequence =
      cli::decode_prefix_state(bytes.data(), bytes.size(), &why);
  if (!sequence) throw refuse(why);
  const size_t tokens = sequence->tokens.size();
  why = state.scheduler->restore_slot(id, std::move(*sequence));
  if (!why.empty()) throw refuse(why);
  return {{"id_slot", id},
          {"filename", name},
          {"n_restored", tokens},
          {"n_read", bytes.size()},
          {"timings", {{"restore_ms", ms_since(start)}}}};
}

// id: the path's part after /slots/.
void slot_action(const httplib::Request& req, const std::string& id_text, const std::string& body,
                 httplib::Response& res, ServerState& state) {
  try {
    if (state.options.slot_save_path.empty()) {
      throw RequestError(501,
                         "slot actions are disabled: start the server with --slot-save-path DIR",
                         "", "not_supported_error");
    }
    const std::string action = req.get_param_value("action");
    if (action != "save" && action != "restore" && action != "erase") {
      throw RequestError(
          400,
          req.has_param("action")
              ? "'action': expected save, restore or erase, found \"" + cut_short(action) + "\""
              : "'action': missing (?action=save, restore or erase)",
          "action");
    }
    const int id = slot_id(id_text, state.scheduler->slots());
    if (action == "erase") {
      return send_json(res, 200, {{"id_slot", id}, {"n_erased", state.scheduler->erase_slot(id)}});
    }
    const std::string name = file_name(body.empty() ? json::object() : parse_object(body));
    send_json(res, 200, action == "save" ? save(state, id, name) : restore(state, id, name));
  } catch (const RequestError& error) {
    send_json(res, error.status, error_json(error.what(), error.type, error.param));
  }
}

}  // namespace

void check_slot_save_path(const Options& options) {
  if (options.slot_save_path.empty()) return;
  std::error_code error;
  if (!fs::is_directory(options.slot_save_path, error)) {
    throw std::runtime_error("--slot-save-path " + options.slot_save_path +
                             ": not a directory (create it first)");
  }
}

std::string slot_file_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxFileName) {
    return "is longer than " + std::to_string(kMaxFileName) + " bytes";
  }
  if (name[0] == '.') return "starts with '.'";
  for (unsigned char c : name) {
    if (c == '/' || c == '\\') return "is a path: expected a plain file name";
    if (c < 0x20 || c == 0x7F) return "holds a control character";
  }
  return "";
}

bool answer_bodyless_slot_action(const httplib::Request& req, httplib::Response& res,
                                 ServerState& state) {
  const std::string prefix = "/slots/";
  if (req.method != "POST" || req.has_header("Content-Length") ||
      req.has_header("Transfer-Encoding") || req.path.compare(0, prefix.size(), prefix) != 0 ||
      req.path.find('/', prefix.size()) != std::string::npos) {
    return false;
  }
  slot_action(req, req.path.substr(prefix.size()), "", res, state);
  return true;
}

void install_slot_routes(httplib::Server& http, ServerState& state) {
  http.Post(R"(/slots/([^/]+))", [&state](const httplib::Request& req, httplib::Response& res) {
    slot_action(req, req.matches[1].str(), req.body, res, state);
  });
  http.Get("/slots", [&state](const httplib::Request&, httplib::Response& res) {
    try {
      json slots = json::array();
      for (const Scheduler::SlotInfo& slot : state.scheduler->slot_infos()) {
        slots.push_back(
            {{"id", slot.id}, {"is_processing", slot.processing}, {"n_tokens", slot.n_tokens}});
      }
      send_json(res, 200, slots);
    } catch (const RequestError& error) {
      send_json(res, error.status, error_json(error.what(), error.type, error.param));
    }
  });
}

}  // namespace aft::server
