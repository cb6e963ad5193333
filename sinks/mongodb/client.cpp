#include "mongodb/client.h"

#include <map>
#include <mutex>
#include <set>

namespace picomq::mongodb {
namespace {

void init_once() {
  // mongoc_init() once per process; never mongoc_cleanup(): other users of libmongoc in the
  // process (another instance, another plugin) may still run.
  static std::once_flag once;
  std::call_once(once, [] { mongoc_init(); });
}

struct LogRoutes {
  std::mutex mutex;
  std::map<uint64_t, LibraryLogRoute::Forward> live;  // by age: the first is the oldest
  uint64_t next = 0;
};
LogRoutes& log_routes() {
  static auto* routes = new LogRoutes;  // never destroyed: libmongoc may log during exit
  return *routes;
}

void route_line(mongoc_log_level_t level, const char* domain, const char* message, void* user_data) {
  auto& routes = log_routes();
  std::lock_guard lock(routes.mutex);
  if (routes.live.empty()) return mongoc_log_default_handler(level, domain, message, user_data);
  routes.live.begin()->second(level,
                              std::string("libmongoc ") + (domain ? domain : "") + ": " + (message ? message : ""));
}

struct PooledClient {
  explicit PooledClient(mongoc_client_pool_t* pool) : pool(pool), client(mongoc_client_pool_pop(pool)) {}
  ~PooledClient() { mongoc_client_pool_push(pool, client); }
  mongoc_client_pool_t* pool;
  mongoc_client_t* client;
};

}  // namespace

LibraryLogRoute::LibraryLogRoute(Forward forward) {
  init_once();
  auto& routes = log_routes();
  std::lock_guard lock(routes.mutex);
  id_ = routes.next++;
  routes.live.emplace(id_, std::move(forward));
  mongoc_log_set_handler(route_line, nullptr);
}

LibraryLogRoute::~LibraryLogRoute() {
  auto& routes = log_routes();
  std::lock_guard lock(routes.mutex);
  routes.live.erase(id_);
  // The last one gives libmongoc its own printer back: route_line lives in this plugin, which the
  // host may unload while libmongoc (loaded for good) still logs. mongoc_log_set_handler takes
  // libmongoc's log lock, so no call of route_line is running once it returns.
  if (routes.live.empty()) mongoc_log_set_handler(mongoc_log_default_handler, nullptr);
}

mongoc_uri_t* parse_uri(const std::string& text, std::string& error) {
  init_once();
  bson_error_t e;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(text.c_str(), &e);
  if (!uri) {
    error = e.message;
    return nullptr;
  }
  if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
    mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
  if (!mongoc_uri_get_appname(uri)) mongoc_uri_set_appname(uri, "picomq-connect");
  return uri;
}

std::string uri_hosts(const mongoc_uri_t* uri) {
  std::string out;
  for (const mongoc_host_list_t* h = mongoc_uri_get_hosts(uri); h; h = h->next) {
    if (!out.empty()) out += ',';
    out += h->host_and_port;
  }
  if (out.empty() && mongoc_uri_get_srv_hostname(uri)) out = std::string("srv:") + mongoc_uri_get_srv_hostname(uri);
  return out;
}

Client::Client(mongoc_uri_t* uri, std::string database) : uri_(uri), database_(std::move(database)) {
  init_once();
  pool_ = mongoc_client_pool_new(uri_);
  mongoc_client_pool_set_error_api(pool_, MONGOC_ERROR_API_VERSION_2);
}

Client::~Client() {
  if (pool_) mongoc_client_pool_destroy(pool_);
  if (uri_) mongoc_uri_destroy(uri_);
}

BulkResult Client::bulk(const std::string& collection, bool ordered, std::span<const Op* const> ops) {
  BulkResult out;
  PooledClient pc(pool_);
  mongoc_collection_t* coll = mongoc_client_get_collection(pc.client, database_.c_str(), collection.c_str());
  bson_t opts = BSON_INITIALIZER;
  BSON_APPEND_BOOL(&opts, "ordered", ordered);
  mongoc_bulk_operation_t* bulk = mongoc_collection_create_bulk_operation_with_opts(coll, &opts);
  bson_destroy(&opts);
  // The server judges documents (field names with '$' or '.', ...), not the client: the same
  // rules for every server version, and its error codes in writeErrors.
  bson_t insert_opts = BSON_INITIALIZER, upsert_opts = BSON_INITIALIZER;
  BSON_APPEND_BOOL(&insert_opts, "validate", false);
  BSON_APPEND_BOOL(&upsert_opts, "upsert", true);
  BSON_APPEND_BOOL(&upsert_opts, "validate", false);
  std::vector<size_t> sent;  // bulk index -> ops index
  sent.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = *ops[i];
    bson_error_t e;
    bool added = false;
    switch (op.kind) {
      case OpKind::Insert: added = mongoc_bulk_operation_insert_with_opts(bulk, op.doc.get(), &insert_opts, &e); break;
      case OpKind::Replace:
        added = mongoc_bulk_operation_replace_one_with_opts(bulk, op.filter.get(), op.doc.get(), &upsert_opts, &e);
        break;
      case OpKind::Update:
        added = mongoc_bulk_operation_update_one_with_opts(bulk, op.filter.get(), op.doc.get(), &upsert_opts, &e);
        break;
      case OpKind::Delete:
        added = mongoc_bulk_operation_remove_one_with_opts(bulk, op.filter.get(), nullptr, &e);
        break;
      case OpKind::DeleteAll:
        added = mongoc_bulk_operation_remove_many_with_opts(bulk, op.filter.get(), nullptr, &e);
        break;
    }
    if (added) sent.push_back(i);
    else out.refused.emplace_back(i, e.message);
  }
  bson_destroy(&insert_opts);
  bson_destroy(&upsert_opts);
  if (sent.empty()) {
    out.executed = true;
  } else {
    bson_t reply;
    bson_error_t e;
    out.executed = mongoc_bulk_operation_execute(bulk, &reply, &e) != 0;
    out.reply = parse_bulk_reply(reply);
    // Indexes back to the caller's ops.
    for (auto& we : out.reply.write_errors)
      if (we.index < sent.size()) we.index = static_cast<uint32_t>(sent[we.index]);
    if (!out.executed) {
      out.error_domain = e.domain;
      out.error_code = e.code;
      out.error = e.message;
      out.server_error = e.domain == MONGOC_ERROR_SERVER;
      out.auth_error = e.domain == MONGOC_ERROR_CLIENT && e.code == MONGOC_ERROR_CLIENT_AUTHENTICATE;
    }
    bson_destroy(&reply);
  }
  mongoc_bulk_operation_destroy(bulk);
  mongoc_collection_destroy(coll);
  return out;
}

namespace {
// A value's identity for comparison: its BSON bytes under one fixed key.
std::string value_key(const bson_iter_t& it) {
  bson_t wrapper = BSON_INITIALIZER;
  bson_append_iter(&wrapper, "v", 1, &it);
  std::string out(reinterpret_cast<const char*>(bson_get_data(&wrapper)), wrapper.len);
  bson_destroy(&wrapper);
  return out;
}
}  // namespace

std::optional<std::vector<bool>> Client::ids_present(const std::string& collection, std::span<const bson_t* const> docs,
                                                     std::string& error) {
  std::vector<std::string> keys;
  bson_t filter = BSON_INITIALIZER, id, in;
  BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &id);
  BSON_APPEND_ARRAY_BEGIN(&id, "$in", &in);
  for (size_t i = 0; i < docs.size(); ++i) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, docs[i], "_id")) {
      keys.emplace_back();
      continue;
    }
    keys.push_back(value_key(it));
    const std::string k = std::to_string(i);
    bson_append_iter(&in, k.c_str(), -1, &it);
  }
  bson_append_array_end(&id, &in);
  bson_append_document_end(&filter, &id);
  bson_t opts = BSON_INITIALIZER, projection;
  BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &projection);
  BSON_APPEND_INT32(&projection, "_id", 1);
  bson_append_document_end(&opts, &projection);
  PooledClient pc(pool_);
  mongoc_collection_t* coll = mongoc_client_get_collection(pc.client, database_.c_str(), collection.c_str());
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(coll, &filter, &opts, nullptr);
  std::set<std::string> found;
  const bson_t* doc;
  while (mongoc_cursor_next(cursor, &doc)) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, "_id")) found.insert(value_key(it));
  }
  bson_error_t e;
  const bool failed = mongoc_cursor_error(cursor, &e);
  mongoc_cursor_destroy(cursor);
  mongoc_collection_destroy(coll);
  bson_destroy(&filter);
  bson_destroy(&opts);
  if (failed) {
    error = e.message;
    return std::nullopt;
  }
  std::vector<bool> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(!k.empty() && found.count(k));
  return out;
}

bool Client::command(const bson_t& cmd, bson_t* reply, std::string& error, uint32_t* domain, uint32_t* code) {
  PooledClient pc(pool_);
  bson_error_t e;
  bson_t local;
  const bool ok = mongoc_client_command_simple(pc.client, database_.c_str(), &cmd, nullptr, reply ? reply : &local, &e);
  if (!reply) bson_destroy(&local);
  if (!ok) {
    error = e.message;
    if (domain) *domain = e.domain;
    if (code) *code = e.code;
  }
  return ok;
}

}  // namespace picomq::mongodb
