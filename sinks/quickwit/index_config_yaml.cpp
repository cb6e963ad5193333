#include "quickwit/index_config_yaml.h"

#include <yaml.h>

#include <memory>

namespace picomq::quickwit {
namespace {

std::string where(const yaml_mark_t& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

const yaml_char_t* bytes(std::string_view text) { return reinterpret_cast<const yaml_char_t*>(text.data()); }

class Rewriter {
 public:
  explicit Rewriter(std::string_view yaml) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, bytes(yaml), yaml.size());
    yaml_emitter_initialize(&emitter_);
    yaml_emitter_set_unicode(&emitter_, 1);
    yaml_emitter_set_output(&emitter_, &Rewriter::write, &out_);
  }
  ~Rewriter() {
    yaml_parser_delete(&parser_);
    yaml_emitter_delete(&emitter_);
  }
  Rewriter(const Rewriter&) = delete;
  Rewriter& operator=(const Rewriter&) = delete;

  std::string run(std::string_view index_id) {
    int depth = 0;  // open collections
    int documents = 0;
    bool key_next = true;   // at depth 1: the next node is a top-level key
    bool dropping = false;  // the value of the user's index_id (the sink sets it)
    bool has_doc_mapping = false, has_version = false;
    for (;;) {
      yaml_event_t event;
      if (!yaml_parser_parse(&parser_, &event)) {
        throw YamlConfigError(std::string("not valid YAML: ") + (parser_.problem ? parser_.problem : "parse error") +
                              " at " + where(parser_.problem_mark));
      }
      const yaml_mark_t mark = event.start_mark;
      bool value_done = false;
      switch (event.type) {
        case YAML_STREAM_END_EVENT:
          emit(event);
          if (documents == 0) throw YamlConfigError("is empty: Quickwit's index config is a mapping with doc_mapping");
          if (!has_doc_mapping)
            throw YamlConfigError("must hold doc_mapping (Quickwit's index config; index_id is set by the sink)");
          yaml_emitter_flush(&emitter_);
          return std::move(out_);
        case YAML_DOCUMENT_START_EVENT:
          if (++documents > 1) fail(event, "holds more than one YAML document at " + where(mark));
          break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
          if (depth == 0) {
            if (event.type != YAML_MAPPING_START_EVENT)
              fail(event, "must be a mapping (Quickwit's index config), not a sequence");
            emit(event);
            depth = 1;
            pair("index_id", index_id, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
            continue;
          }
          if (depth == 1 && key_next) fail(event, "has a top-level key that is not a plain string at " + where(mark));
          ++depth;
          break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
          if (--depth == 0) {
            if (!has_version) pair("version", "0.8", YAML_DOUBLE_QUOTED_SCALAR_STYLE);
            emit(event);
            continue;
          }
          value_done = depth == 1;
          break;
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT:
          if (depth == 0) fail(event, "must be a mapping (Quickwit's index config), not a single value");
          if (depth == 1 && key_next) {
            if (event.type == YAML_ALIAS_EVENT) fail(event, "has a top-level key that is an alias at " + where(mark));
            const std::string_view key(reinterpret_cast<const char*>(event.data.scalar.value),
                                       event.data.scalar.length);
            key_next = false;
            if (key == "index_id") {
              dropping = true;
              yaml_event_delete(&event);
              continue;
            }
            has_doc_mapping |= key == "doc_mapping";
            has_version |= key == "version";
            emit(event);
            continue;
          }
          value_done = depth == 1;
          break;
        default: break;
      }
      if (dropping) {
        yaml_event_delete(&event);
      } else {
        emit(event);
      }
      if (value_done) {
        key_next = true;
        dropping = false;
      }
    }
  }

 private:
  static int write(void* data, unsigned char* buffer, size_t size) {
    static_cast<std::string*>(data)->append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  [[noreturn]] static void fail(yaml_event_t& event, const std::string& why) {
    yaml_event_delete(&event);
    throw YamlConfigError(why);
  }

  // The emitter owns the event from here, emitted or not.
  void emit(yaml_event_t& event) {
    if (!yaml_emitter_emit(&emitter_, &event))
      throw YamlConfigError(std::string("cannot be written back as YAML: ") +
                            (emitter_.problem ? emitter_.problem : "emitter error"));
  }

  void scalar(std::string_view text, yaml_scalar_style_t style) {
    yaml_event_t event;
    yaml_scalar_event_initialize(&event, nullptr, nullptr, bytes(text), static_cast<int>(text.size()), 1, 1, style);
    emit(event);
  }
  void pair(std::string_view key, std::string_view value, yaml_scalar_style_t style) {
    scalar(key, YAML_PLAIN_SCALAR_STYLE);
    scalar(value, style);
  }

  yaml_parser_t parser_;
  yaml_emitter_t emitter_;
  std::string out_;
};

}  // namespace

std::string yaml_index_config_for(std::string_view yaml, std::string_view index_id) {
  Rewriter rewriter(yaml);
  return rewriter.run(index_id);
}

}  // namespace picomq::quickwit
