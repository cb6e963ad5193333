#pragma once
// The Quickwit sink's encoder: one record's document line, {"<id_field>":"topic:partition:offset",
// ...the record's document...}\n (no id field when id_field is empty), after a {"create":{}}
// action line with endpoint = "elastic_bulk". No I/O.
#include <string>

#include "picomq/kit/record_json.hpp"
#include "picomq/sink_abi.h"
#include "quickwit/config.h"

namespace picomq::quickwit {

void render_document(std::string& out, const Settings& s, const kit::BatchJsonWriter& json, const pmq_batch& batch,
                     const pmq_record& record);

}  // namespace picomq::quickwit
