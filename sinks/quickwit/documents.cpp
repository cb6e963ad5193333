#include "quickwit/documents.h"

#include "picomq/kit/encoding.hpp"
#include "picomq/kit/metadata.hpp"

namespace picomq::quickwit {

void render_document(std::string& out, const Settings& s, const kit::BatchJsonWriter& json, const pmq_batch& batch,
                     const pmq_record& record) {
  if (s.endpoint == Endpoint::ElasticBulk) out += "{\"create\":{}}\n";  // the index is the path's
  const size_t start = out.size();
  json.append(out, record);
  if (!s.id_field.empty()) {  // the record id first: {"pico_id":"topic:0:42", ...
    std::string member;
    kit::append_json_escaped(member, s.id_field);
    member += ':';
    kit::append_json_escaped(member, kit::record_id(batch.topic, batch.partition, record.offset));
    kit::insert_first_member(out, start, member);
  }
  out += '\n';
}

}  // namespace picomq::quickwit
