// A test plugin (SDK) with a cross-option validate() (ABI 2.2), for `picomq-connect --check` and
// the start of a sink: `key_field` is only meaningful with mode = "upsert", and upsert needs it.
// Writes are accepted and dropped.
#include <picomq/sdk.hpp>

namespace sdk = picomq::sdk;

class ValidatingSink : public sdk::BaseSink<ValidatingSink> {
 public:
  static constexpr std::string_view sink_name = "validating";
  static constexpr std::string_view description = "Checks its options across each other; drops what it gets (tests).";
  static constexpr std::array options{
      pmq_option{"mode", PMQ_OPTION_STRING, 0, "\"insert\"", "insert|upsert", "How rows are written."},
      pmq_option{"key_field", PMQ_OPTION_STRING, 0, nullptr, nullptr, "The upsert key; only with mode = \"upsert\"."},
      pmq_option{"token", PMQ_OPTION_STRING, PMQ_OPTION_SECRET, nullptr, nullptr, "A secret, at least 8 characters."},
  };

  static void validate(const sdk::Config& c, sdk::ConfigProblems& p) {
    const bool upsert = c.string("mode") == "upsert";
    if (c.has("key_field") && !upsert) p.add("key_field", "needs mode = \"upsert\"");
    if (upsert && !c.has("key_field")) p.add("mode", "\"upsert\" needs key_field");
    if (c.has("token") && c.string("token").size() < 8) p.add("token", "must be at least 8 characters");
  }

  void open(const sdk::Config&) {}
  void write(const sdk::Record&) {}
  void close() {}
};

PICOMQ_SINK_PLUGIN(ValidatingSink)
