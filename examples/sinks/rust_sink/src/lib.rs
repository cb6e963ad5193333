//! Example: a sink in Rust on the Rust SDK (sdk/rust). Each record becomes one JSON line in
//! `<directory>/<file>`: the pico_* metadata (keys base64, header values as UTF-8 text or base64,
//! the spec's rule for JSON) and the payload. Lines are held per write and appended with one
//! write + fsync on flush (or once `buffer_records` are held): writes are pending until then,
//! which shows Call::pending, flush and the host's completion rules.
//!
//! Errors: the directory missing is retried (it may be a mount that comes back); the file being
//! a directory or not writable is fatal. `required_field` rejects JSON records without that field.
use std::fs::OpenOptions;
use std::io::{ErrorKind as IoKind, Write};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use picomq_sink::{
    export_sink, Batch, Call, Error, Host, LogLevel, OptionSpec, PayloadFormat, Pending, Sink, PLANE_BATCHES,
};

struct JsonLinesSink {
    host: Host,
    directory: PathBuf,
    file: String,
    required_field: Option<String>,
    buffer_records: usize,
    lines: Vec<u8>,
    held_records: usize,
    pending: Vec<Pending>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn text_or_base64(bytes: &[u8]) -> serde_json::Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.into(),
        Err(_) => b64(bytes).into(),
    }
}

impl JsonLinesSink {
    fn path(&self) -> PathBuf {
        self.directory.join(&self.file)
    }

    /// Appends everything held, then completes the held writes with the outcome.
    fn write_out(&mut self) -> Result<(), Error> {
        if self.lines.is_empty() && self.pending.is_empty() {
            return Ok(());
        }
        let result = self.append();
        let pending = std::mem::take(&mut self.pending);
        match &result {
            Ok(()) => {
                self.host.count("lines_written", self.held_records as u64);
                pending.iter().for_each(|p| {
                    p.done();
                });
            }
            Err(e) => pending.iter().for_each(|p| {
                p.fail(e);
            }),
        }
        self.lines.clear();
        self.held_records = 0;
        result
    }

    fn append(&self) -> Result<(), Error> {
        let path = self.path();
        if !self.directory.is_dir() {
            return Err(Error::retry(format!(
                "directory {} does not exist (yet)",
                self.directory.display()
            )));
        }
        let mut f = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| {
            let m = format!("cannot open {}: {e}", path.display());
            match e.kind() {
                IoKind::NotFound | IoKind::Interrupted | IoKind::WouldBlock => Error::retry(m),
                _ => Error::fatal(m),
            }
        })?;
        // One write of whole lines; a failure part-way may leave some lines: maybe written.
        f.write_all(&self.lines)
            .and_then(|_| f.sync_data())
            .map_err(|e| Error::maybe_written(format!("appending to {}: {e}", path.display())))
    }
}

impl Sink for JsonLinesSink {
    const NAME: &'static str = "example_rust";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Appends each record as a JSON line to a file (an example sink in Rust).";
    const NATIVE_PLANES: u32 = PLANE_BATCHES;
    const MAX_IN_FLIGHT: u32 = 16;

    fn options() -> Vec<OptionSpec> {
        vec![
            OptionSpec::string("directory")
                .required()
                .help("The folder the file is in; it must exist (a missing folder is retried)."),
            OptionSpec::string("file")
                .default_str("records.jsonl")
                .help("The file inside `directory` the lines are appended to."),
            OptionSpec::string("required_field").help("Reject JSON records whose payload object has no such field."),
            OptionSpec::int("buffer_records")
                .default("1000")
                .help("Records held before they are written without waiting for a flush."),
        ]
    }

    fn validate(config: &Host) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        let file = config.config_string("file").unwrap_or_default();
        if file.is_empty() || file.contains('/') || file == ".." {
            problems.push(format!("file: '{file}' must be a plain file name inside directory"));
        }
        if config.config_int("buffer_records") < 1 {
            problems.push("buffer_records: must be at least 1".to_string());
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    fn open(host: Host) -> Result<Self, Error> {
        let sink = JsonLinesSink {
            host,
            directory: PathBuf::from(host.config_string("directory").unwrap_or_default()),
            file: host.config_string("file").unwrap_or_else(|| "records.jsonl".into()),
            required_field: host.config_string("required_field").filter(|f| !f.is_empty()),
            buffer_records: host.config_int("buffer_records").max(1) as usize,
            lines: Vec::new(),
            held_records: 0,
            pending: Vec::new(),
        };
        host.log(
            LogLevel::Info,
            &format!("appending JSON lines to {}", sink.path().display()),
        );
        Ok(sink)
    }

    fn write_batch(&mut self, batch: &Batch, call: &mut Call) -> Result<(), Error> {
        let mut lines = Vec::new();
        for r in batch.records() {
            let payload = match (r.payload(), batch.payload_format()) {
                (None, _) => serde_json::Value::Null,
                (Some(p), PayloadFormat::Json) => match serde_json::from_slice::<serde_json::Value>(p) {
                    Ok(v) => v,
                    Err(e) => {
                        call.reject(r.index(), &format!("payload is not JSON: {e}"));
                        continue;
                    }
                },
                (Some(p), PayloadFormat::Text) => String::from_utf8_lossy(p).into_owned().into(),
                (Some(p), PayloadFormat::Raw) => b64(p).into(),
            };
            if let Some(field) = &self.required_field {
                if payload.get(field.as_str()).is_none() {
                    call.reject(r.index(), &format!("payload has no field '{field}'"));
                    continue;
                }
            }
            let mut line = serde_json::Map::new();
            line.insert("pico_topic".into(), batch.topic().into());
            line.insert("pico_partition".into(), batch.partition().into());
            line.insert("pico_offset".into(), r.offset().into());
            if let Some(ts) = r.timestamp_ms() {
                line.insert("pico_timestamp".into(), ts.into());
            }
            if let Some(key) = r.key() {
                line.insert("pico_key".into(), b64(key).into());
            }
            let mut headers = serde_json::Map::new();
            for h in r.headers() {
                let value = h.value.map(text_or_base64).unwrap_or(serde_json::Value::Null);
                headers.insert(String::from_utf8_lossy(h.name).into_owned(), value);
            }
            line.insert("pico_headers".into(), headers.into());
            line.insert("payload".into(), payload);
            serde_json::to_writer(&mut lines, &serde_json::Value::Object(line))
                .map_err(|e| Error::fatal(e.to_string()))?;
            lines.push(b'\n');
            self.held_records += 1;
        }
        self.lines.extend_from_slice(&lines);
        // Held until flush: the host keeps this batch's offset uncommitted until then.
        self.pending.push(call.pending());
        if self.held_records >= self.buffer_records || self.pending.len() >= Self::MAX_IN_FLIGHT as usize {
            // This call's own handle is completed inside the call: that is its status.
            let _ = self.write_out();
        }
        Ok(())
    }

    fn flush(&mut self, _timeout: Duration) {
        if let Err(e) = self.write_out() {
            self.host.log(LogLevel::Warn, &format!("flush: {e}"));
        }
    }

    fn close(mut self) {
        let _ = self.write_out();
    }
}

export_sink!(JsonLinesSink);
