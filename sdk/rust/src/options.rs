//! Typed [plugin_config] options: the rows of the descriptor's option table.
use crate::abi;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionType {
    String,
    Int,
    Float,
    Bool,
    /// "250ms", "5s"... handed to the sink in milliseconds.
    Duration,
    /// "64KiB", "8MB"... handed to the sink in bytes.
    ByteSize,
    StringList,
    /// Any TOML table or array, read as JSON.
    Table,
}

impl OptionType {
    pub(crate) fn abi(self) -> i32 {
        match self {
            OptionType::String => abi::PMQ_OPTION_STRING,
            OptionType::Int => abi::PMQ_OPTION_INT,
            OptionType::Float => abi::PMQ_OPTION_FLOAT,
            OptionType::Bool => abi::PMQ_OPTION_BOOL,
            OptionType::Duration => abi::PMQ_OPTION_DURATION,
            OptionType::ByteSize => abi::PMQ_OPTION_BYTE_SIZE,
            OptionType::StringList => abi::PMQ_OPTION_STRING_LIST,
            OptionType::Table => abi::PMQ_OPTION_TABLE,
        }
    }
}

/// One option: `OptionSpec::string("path").required().help("The file to append to.")`.
#[derive(Debug, Clone)]
pub struct OptionSpec {
    pub name: String,
    pub type_: OptionType,
    pub required: bool,
    pub secret: bool,
    /// The default as a JSON value ("true", "\"stdout\"", "100").
    pub default_json: Option<String>,
    /// For strings: the allowed values.
    pub allowed: Vec<String>,
    pub help: String,
}

impl OptionSpec {
    pub fn new(name: &str, type_: OptionType) -> Self {
        OptionSpec {
            name: name.to_string(),
            type_,
            required: false,
            secret: false,
            default_json: None,
            allowed: Vec::new(),
            help: String::new(),
        }
    }
    pub fn string(name: &str) -> Self {
        Self::new(name, OptionType::String)
    }
    pub fn int(name: &str) -> Self {
        Self::new(name, OptionType::Int)
    }
    pub fn float(name: &str) -> Self {
        Self::new(name, OptionType::Float)
    }
    pub fn boolean(name: &str) -> Self {
        Self::new(name, OptionType::Bool)
    }
    pub fn duration(name: &str) -> Self {
        Self::new(name, OptionType::Duration)
    }
    pub fn byte_size(name: &str) -> Self {
        Self::new(name, OptionType::ByteSize)
    }
    pub fn string_list(name: &str) -> Self {
        Self::new(name, OptionType::StringList)
    }
    pub fn table(name: &str) -> Self {
        Self::new(name, OptionType::Table)
    }
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub fn secret(mut self) -> Self {
        self.secret = true;
        self
    }
    /// The default, as JSON text: `.default("100")`, `.default("\"zstd\"")`, `.default("true")`.
    pub fn default(mut self, json: &str) -> Self {
        self.default_json = Some(json.to_string());
        self
    }
    /// A string default (quoted as JSON for you).
    pub fn default_str(mut self, value: &str) -> Self {
        self.default_json = Some(format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\"")));
        self
    }
    pub fn allowed(mut self, values: &[&str]) -> Self {
        self.allowed = values.iter().map(|v| v.to_string()).collect();
        self
    }
    pub fn help(mut self, help: &str) -> Self {
        self.help = help.to_string();
        self
    }
    pub(crate) fn flags(&self) -> u32 {
        (if self.required { abi::PMQ_OPTION_REQUIRED } else { 0 })
            | (if self.secret { abi::PMQ_OPTION_SECRET } else { 0 })
    }
}
